// The one error type of the API: every refusal of the contract, and every
// store failure, is a `GakError` whose `code` is the WIT variant's
// kebab-case name (`taken`, `fence-stale`, `storage`, ...): ERROR_CODES,
// generated from the WIT (contract.js).
import { ERROR_CODES } from './contract.js';

const CODES = new Set(ERROR_CODES);

/**
 * A refusal (or store failure). Branch on `code`, never on `message`:
 * `detail` (the payload of `invalid-plan`, `invalid-input`, `storage`) is
 * for humans.
 */
export class GakError extends Error {
  constructor(code, detail, options) {
    super(detail ? `${code}: ${detail}` : code, options);
    this.name = 'GakError';
    this.code = code;
    this.detail = detail;
  }

  /** JSON form: `{ code, detail? }`. */
  toJSON() {
    return this.detail === undefined ? { code: this.code } : { code: this.code, detail: this.detail };
  }
}

/** Is `e` an error payload thrown by a component export (`{tag: 'taken'}`)? */
export function isRefusal(e) {
  return (
    e !== null &&
    typeof e === 'object' &&
    !(e instanceof Error) &&
    typeof e.tag === 'string' &&
    CODES.has(e.tag)
  );
}

/** The component's error payload as a `GakError`. */
export function fromRefusal(e) {
  return new GakError(e.tag, typeof e.val === 'string' ? e.val : undefined);
}

/** An argument no caller should send, refused before the component is called. */
export function invalidInput(detail) {
  return new GakError('invalid-input', detail);
}
