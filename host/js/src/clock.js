// The clock that judges expiry, injectable: `SystemClock` by default,
// `ManualClock` for tests and vectors. The component asks for it with a
// read (gak:kernel@0.4.0 `store.read`, `clock: true`), and the host reads
// it after that read's rows. A clock's `now()` returns integer
// milliseconds since the Unix epoch, as a bigint (or a safe integer
// number), below 2^53; it MUST NOT move backwards. Anything else, or a
// `now()` that throws, fails the call with `storage`.

/** The system's wall clock in whole ms, held at its last value if the system clock steps back. */
export class SystemClock {
  #last = 0;

  now() {
    const wall = Date.now();
    if (wall > this.#last) this.#last = wall;
    return BigInt(this.#last);
  }
}

/** A clock that moves only when told to. */
export class ManualClock {
  #now;

  constructor(at = 0n) {
    this.#now = BigInt(at);
    if (this.#now < 0n) throw new RangeError('a clock cannot read before the epoch');
  }

  now() {
    return this.#now;
  }

  /** Set the time; refuses to go backwards. */
  set(to) {
    const t = BigInt(to);
    if (t < this.#now) throw new RangeError(`clock cannot move back from ${this.#now} to ${t}`);
    this.#now = t;
  }

  /** Move forward by `ms`. */
  advance(ms) {
    const by = BigInt(ms);
    if (by < 0n) throw new RangeError('advance takes a non-negative duration');
    this.#now += by;
  }
}
