// How a binding reports failures to the kernel (WIT `store-error`).

/**
 * A serialization conflict or busy database: the kernel re-runs the whole
 * call (bounded, with backoff).
 */
export class StoreConflict extends Error {
  constructor(message, options) {
    super(message, options);
    this.name = 'StoreConflict';
  }
}

/** Any other store failure: the call ends with `storage`. */
export class StoreFailure extends Error {
  constructor(message, options) {
    super(message, options);
    this.name = 'StoreFailure';
  }
}
