// The side-effect runner (HOSTS.md "The side-effect runner"; the Rust
// host's `Runner`, the Python host's `Runner`): the body of an effect runs
// at most once per idempotency key, whatever crashes in between.
//
// Exactly-once at a remote system needs the remote to deduplicate too: pass
// `lease.key` (the idempotency key) to the remote API — e.g. as an
// `Idempotency-Key` header — and `lease.fence` to any store that can
// compare it. That wiring is the embedder's; the kernel guarantees the local
// half: it never *starts* the body twice for one key.
import { GakError } from './errors.js';
import * as v from './values.js';

/**
 * Thrown by an effect body that definitely did NOT apply its effect (refused
 * before sending): the key is abandoned and may be granted again. Any other
 * error means "may have applied": the key becomes uncertain.
 */
export class NotApplied extends Error {
  constructor(message, options) {
    super(message, options);
    this.name = 'NotApplied';
  }
}

/**
 * The body's view of its lease while the runner keeps it alive: the lease as
 * last renewed, how many renewals succeeded, and — as soon as a renewal is
 * refused (another verdict, a takeover, the hold expired) — that the lease
 * is lost, so a long body can stop instead of finishing work whose result
 * will be refused.
 */
export class Heartbeat {
  #lease;
  #renewals = 0;
  #refusal;
  #waiters = [];

  constructor(lease) {
    this.#lease = lease;
  }

  /** The lease as last renewed (the one `complete` will present). */
  get lease() {
    return this.#lease;
  }

  /** Renewals that succeeded so far. */
  get renewals() {
    return this.#renewals;
  }

  /** The refusal that lost the lease (a `GakError`), or undefined. */
  get refusal() {
    return this.#refusal;
  }

  /** Throws `GakError('lease-lost')` once a renewal was refused: stop and return. */
  check() {
    if (this.#refusal !== undefined) {
      throw new GakError('lease-lost', `the runner's renewal was refused: ${this.#refusal.message}`, {
        cause: this.#refusal,
      });
    }
  }

  /**
   * Resolves at the next renewal or at the loss of the lease (at once when
   * it is lost already, or when the runner stops renewing).
   */
  changed() {
    if (this.#refusal !== undefined) return Promise.resolve();
    return new Promise((resolve) => this.#waiters.push(resolve));
  }

  /** @internal */
  renewed(lease) {
    this.#lease = lease;
    this.#renewals += 1;
    this.#wake();
  }

  /** @internal */
  lose(refusal) {
    this.#refusal = refusal;
    this.#wake();
  }

  /** @internal The runner stopped renewing: nobody waits for a change that cannot come. */
  stopped() {
    this.#wake();
  }

  #wake() {
    const waiters = this.#waiters;
    this.#waiters = [];
    for (const resolve of waiters) resolve();
  }
}

/** The answers of `acquire` that end a run without calling the body. */
const DONE = new Set(['replayed', 'uncertain', 'in-flight', 'contended']);

/** A renewal refused for good (not a store failure worth another try). */
const lost = (e) => !(e instanceof GakError && e.code === 'storage');

/**
 * Runs effect bodies through the side-effect gate with leases of `ttl` ms
 * (bigint), renewed every `ttl / 3` while the body runs (`every`: another
 * interval in ms, or `null` for none — the ttl must then cover the body).
 *
 * Renewals are timer-driven: they run while an async body awaits. A body
 * that runs synchronously holds the event loop, so no renewal can happen
 * until it returns; give such a body a ttl that covers it.
 */
export class Runner {
  #kernel;
  #ttl;
  #every;

  constructor(kernel, ttl, { every } = {}) {
    this.#kernel = kernel;
    this.#ttl = v.u64('ttl', ttl);
    if (every === undefined) {
      this.#every = Math.max(1, Number(this.#ttl / 3n));
    } else if (every === null) {
      this.#every = null;
    } else {
      if (typeof every !== 'number' || !(every >= 1)) throw new GakError('invalid-input', 'every: ms >= 1, or null');
      this.#every = every;
    }
  }

  /**
   * acquire → (replayed | uncertain | in-flight | contended: return without
   * calling `body`) | granted → `await body(lease, heartbeat)`, renewing the
   * hold meanwhile → complete.
   *
   * Answers one of:
   * - `{tag: 'applied', result}`: the body ran now; its result is recorded;
   * - `{tag: 'replayed', result}`: the key completed before; body not called;
   * - `{tag: 'uncertain', reason}`: the key may have been applied and must
   *   be reconciled; body not called;
   * - `{tag: 'uncertain', reason: 'body failed', error}`: the body threw
   *   `error`: the key was marked uncertain and its hold released;
   * - `{tag: 'not-applied', error}`: the body threw `NotApplied`; the key was
   *   abandoned and may be granted again;
   * - `{tag: 'in-flight'}` / `{tag: 'contended', until}`: another attempt or
   *   key holds it; body not called.
   *
   * Throws `GakError` when the kernel refuses or the store fails. If
   * recording the result fails after the body ran, nothing is retried: the
   * intent stays and the key surfaces as uncertain once the lease expires,
   * never as a second grant.
   */
  async run(action, body) {
    if (typeof body !== 'function') throw new GakError('invalid-input', 'body: expected a function');
    const gate = this.#kernel.sideeffect;
    // `await`: the calls answer at once on memory and SQLite, with a
    // promise on PostgreSQL (`PostgresKernel`); the runner serves both.
    const acquired = await gate.acquire(action, this.#ttl);
    if (DONE.has(acquired?.tag)) return acquired;
    if (acquired?.tag !== 'granted') {
      // An answer this host does not know: never run the body on it.
      throw new GakError('storage', `acquire answered ${JSON.stringify(acquired?.tag)}, which this runner does not know`);
    }
    const heartbeat = new Heartbeat(acquired.lease);
    const stop = this.#keepAlive(action, heartbeat);
    let result;
    let failure;
    try {
      result = v.bytes('body result', await body(acquired.lease, heartbeat));
    } catch (error) {
      failure = { error };
    } finally {
      // Before any verdict is sent: a renewal after it would be refused
      // anyway, and one racing it must not replace the lease it presents
      // (a renewal in flight is waited for).
      await stop();
    }
    const lease = heartbeat.lease;
    if (failure === undefined) return { tag: 'applied', result: await gate.complete(action, lease, result) };
    const { error } = failure;
    if (error instanceof NotApplied) {
      await bestEffort(() => gate.abandon(action, lease, 'body reported not applied'));
      return { tag: 'not-applied', error };
    }
    // Best effort: if either call fails, the intent is still there and the
    // key turns uncertain when the lease expires.
    await bestEffort(() => gate.markUncertain(action, lease, 'body failed'));
    await bestEffort(() => gate.release(action, lease));
    return { tag: 'uncertain', reason: 'body failed', error };
  }

  /** Renew every `#every` ms until stopped or refused; returns the stop function. */
  #keepAlive(action, heartbeat) {
    let timer;
    let stopped = false;
    let inflight;
    const renew = async () => {
      try {
        const renewed = await this.#kernel.sideeffect.renew(action, heartbeat.lease, this.#ttl);
        if (!stopped) heartbeat.renewed(renewed);
      } catch (e) {
        if (lost(e)) {
          heartbeat.lose(e instanceof GakError ? e : new GakError('storage', String(e?.message ?? e), { cause: e }));
          return; // renewals stop; the body decides when to return
        }
        // `storage`: retried at the next tick, while the lease may still hold.
      }
      if (!stopped) timer = setTimeout(tick, this.#every);
    };
    const tick = () => {
      if (stopped) return;
      inflight = renew();
    };
    if (this.#every !== null) timer = setTimeout(tick, this.#every);
    return async () => {
      stopped = true;
      clearTimeout(timer);
      await inflight;
      heartbeat.stopped();
    };
  }
}

/** `new Runner(kernel, ttl).run(action, body)`. */
export async function runEffect(kernel, action, ttl, body) {
  return new Runner(kernel, ttl).run(action, body);
}

async function bestEffort(call) {
  try {
    await call();
  } catch {
    // see the callers
  }
}
