// The queue worker (HOSTS.md "The queue worker"; the Rust host's `Worker`):
// what queue users call. It claims a batch, runs each task's handler with
// its claim renewed while it runs, completes the successes in one
// `complete-batch`, fails the errors with exponential back-off and jitter,
// and stops gracefully: no new claim, the handlers it has not started
// released (their attempt given back), the running ones finished and
// reported.
//
//   const worker = new Worker(kernel, { agent: 'worker-1' });
//   process.on('SIGTERM', () => worker.stop());
//   await worker.run(async (task) => { await send(task.id); });
import { webcrypto } from 'node:crypto';
import { GakError } from './errors.js';

/** The longest delay `fail` takes: one year, in ms. */
export const MAX_DELAY = 365 * 24 * 60 * 60 * 1000;

/** The longest `last-error` the contract stores, in UTF-8 bytes. */
export const MAX_REASON = 4096;

/** The default back-off: 1 s doubling to 1 h, shortened by up to 20 % at random. */
export const DEFAULT_BACKOFF = Object.freeze({ base: 1_000, max: 3_600_000, jitter: 0.2 });

const invalid = (what) => new GakError('invalid-input', what);

/**
 * The delay (ms, a whole number) after the task's `attempts`-th attempt
 * failed: `min(max, base * 2^(attempts - 1)) * (1 - jitter * u)`, `u` in
 * [0, 1): jitter only shortens, the cap (and the contract's one year) holds.
 */
export function backoffDelay(backoff, attempts, u) {
  const { base, max, jitter } = backoff;
  const doublings = Math.min(Math.max(attempts - 1, 0), 63);
  const full = Math.min(base * 2 ** doublings, max, MAX_DELAY);
  const shorten = clamp01(jitter) * clamp01(u);
  return Math.min(Math.floor(full * (1 - shorten)), full);
}

const clamp01 = (x) => (x > 0 ? (x < 1 ? x : 1) : 0);

/**
 * A uniform draw in [0, 1) from the CSPRNG (no generator state a fork
 * could share, so workers forked together do not back off together).
 */
export function unit() {
  const [x] = webcrypto.getRandomValues(new BigUint64Array(1));
  return Number(x >> 11n) / 2 ** 53;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/**
 * A handler's error message as `last-error`: U+0000 (which no store keeps)
 * and lone surrogates (which are not text) as U+FFFD, cut to at most 4096
 * UTF-8 bytes at a character boundary.
 */
export function failReason(message) {
  const clean = wellFormed(String(message)).replaceAll('\0', '\uFFFD');
  // Every UTF-16 unit is at most 3 bytes of UTF-8.
  if (clean.length * 3 <= MAX_REASON) return clean;
  const bytes = encoder.encode(clean);
  if (bytes.length <= MAX_REASON) return clean;
  let end = MAX_REASON;
  while ((bytes[end] & 0xc0) === 0x80) end -= 1;
  return decoder.decode(bytes.subarray(0, end));
}

const wellFormed = (s) =>
  typeof s.toWellFormed === 'function' ? s.toWellFormed() : s.replace(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g, '\uFFFD');

/** Is `e` an Error (of this realm or another)? */
const isError = (e) => e instanceof Error || Object.prototype.toString.call(e) === '[object Error]';

/**
 * What a handler's rejection becomes as `last-error`: an Error's message; a
 * thrown value that is not an Error is JavaScript's panic, `panicked:
 * <String(value)>`.
 */
export function reasonOf(thrown) {
  if (isError(thrown)) return failReason(thrown.message ?? '');
  let shown;
  try {
    shown = String(thrown);
  } catch {
    shown = Object.prototype.toString.call(thrown);
  }
  return failReason(`panicked: ${shown}`);
}

/** A refusal that means another worker holds (or removed) the task. */
const gone = (e) => e instanceof GakError && (e.code === 'lease-lost' || e.code === 'not-found');

const integer = (what, x, min, max) => {
  if (typeof x !== 'number' || !Number.isInteger(x) || x < min || x > max) {
    throw invalid(`${what}: expected a whole number from ${min} to ${max}, got ${typeof x === 'bigint' ? `${x}n` : String(x)}`);
  }
  return x;
};

/** A ms option as a number and a bigint: a safe whole number or a bigint below 2^53. */
const millis = (what, x) => {
  if (typeof x === 'bigint') {
    if (x < 0n || x > BigInt(Number.MAX_SAFE_INTEGER)) throw invalid(`${what}: expected ms from 0 to 2^53 - 1, got ${x}n`);
    return Number(x);
  }
  return integer(what, x, 0, Number.MAX_SAFE_INTEGER);
};

function checkBackoff(given) {
  if (given !== undefined && (given === null || typeof given !== 'object')) throw invalid('backoff: expected {base, max, jitter}');
  const b = { ...DEFAULT_BACKOFF, ...given };
  const jitter = b.jitter;
  if (typeof jitter !== 'number' || !(jitter >= 0 && jitter <= 1)) throw invalid(`backoff.jitter: expected a number from 0 to 1, got ${String(jitter)}`);
  return Object.freeze({ base: millis('backoff.base', b.base), max: millis('backoff.max', b.max), jitter });
}

/**
 * A queue worker over one kernel, claiming as `options.agent`.
 *
 * Options: `agent` (required); `batch` (1-1000 tasks per claim, default
 * 10); `ttl` (the claims' ttl in ms, number or bigint, default 30 000,
 * renewed every third of it while a handler runs); `concurrency` (handlers
 * at once, default the batch); `idle` (ms to wait before polling an empty
 * board again, default 1000); `backoff` (`{base, max, jitter}`, default
 * 1 s doubling to 1 h, jitter 0.2; fields left out keep their default);
 * `onError(error)` (what `run` does with a store failure it goes on after,
 * default `console.warn`).
 *
 * A handler is called with the task (its token inside) and may be async;
 * it succeeds by returning (or resolving) and fails by throwing (or
 * rejecting). Renewals are timer-driven: they run while an async handler
 * awaits; a handler that runs synchronously holds the event loop, so give
 * such a handler a ttl that covers it.
 */
export class Worker {
  #kernel;
  #agent;
  #batch;
  #ttl;
  #ttlBig;
  #every;
  #concurrency;
  #idle;
  #backoff;
  #onError;
  #stopped = false;
  #wake = new Set();

  constructor(kernel, options = {}) {
    if (kernel === null || typeof kernel !== 'object' || !kernel.taskboard) throw invalid('kernel: expected a Kernel');
    if (options === null || typeof options !== 'object') throw invalid('options: expected an object');
    const { agent, batch = 10, ttl = 30_000, concurrency, idle = 1_000, backoff, onError } = options;
    if (typeof agent !== 'string') throw invalid('agent: expected a string');
    this.#kernel = kernel;
    this.#agent = agent;
    this.#batch = integer('batch', batch, 1, 1000);
    this.#ttl = millis('ttl', ttl);
    this.#ttlBig = BigInt(this.#ttl);
    this.#every = Math.max(1, Math.floor(this.#ttl / 3));
    this.#concurrency = concurrency === undefined ? this.#batch : integer('concurrency', concurrency, 1, Number.MAX_SAFE_INTEGER);
    this.#idle = millis('idle', idle);
    this.#backoff = checkBackoff(backoff);
    if (onError !== undefined && typeof onError !== 'function') throw invalid('onError: expected a function');
    this.#onError = onError ?? ((e) => console.warn(`gak worker ${agent}: ${e?.message ?? e}; going on`));
  }

  /** The options in force (`backoff` with its defaults filled in). */
  get options() {
    return {
      agent: this.#agent,
      batch: this.#batch,
      ttl: this.#ttl,
      concurrency: this.#concurrency,
      idle: this.#idle,
      backoff: this.#backoff,
    };
  }

  /**
   * Ask the worker to stop: no new claim; the batch's handlers not yet
   * started are not called and their claims are released; the running ones
   * finish and are reported; then `run` resolves. From anywhere (a handler,
   * a signal handler). A stopped worker stays stopped.
   */
  stop() {
    this.#stopped = true;
    for (const wake of this.#wake) wake();
    this.#wake.clear();
  }

  /** Was it asked to stop? */
  get stopped() {
    return this.#stopped;
  }

  /**
   * Work until stopped. Store failures (`storage`) go to `onError`, and the
   * loop goes on after the idle wait (what it could not report expires and
   * is taken over). Rejects on any other error (`invalid-input`: a bad
   * option). Resolves to the counts `{claimed, completed, failed, released,
   * lost}`.
   */
  run(handler) {
    return this.#work(handler, false);
  }

  /** Work until a claim finds no free task (or a stop); rejects on the first error of a call. */
  runUntilIdle(handler) {
    return this.#work(handler, true);
  }

  async #work(handler, untilIdle) {
    if (typeof handler !== 'function') throw invalid('handler: expected a function');
    const worked = { claimed: 0, completed: 0, failed: 0, released: 0, lost: 0 };
    while (!this.#stopped) {
      let claimed;
      try {
        claimed = await this.#round(handler, worked);
      } catch (e) {
        if (untilIdle || !(e instanceof GakError && e.code === 'storage')) throw e;
        try {
          this.#onError(e);
        } catch {
          // a logger's own failure must not end the loop
        }
        await this.#wait();
        continue;
      }
      if (claimed) continue;
      if (untilIdle) break;
      await this.#wait();
    }
    return worked;
  }

  /** The idle wait, cut short by a stop. */
  #wait() {
    if (this.#stopped) return Promise.resolve();
    return new Promise((resolve) => {
      const wake = () => {
        clearTimeout(timer);
        this.#wake.delete(wake);
        resolve();
      };
      const timer = setTimeout(wake, this.#idle);
      this.#wake.add(wake);
    });
  }

  /** One batch: claim, run, report. Resolves to whether it claimed anything. */
  async #round(handler, worked) {
    const board = this.#kernel.taskboard;
    // `await`: a promise on PostgreSQL (`PostgresKernel`), a value elsewhere.
    const tasks = await board.claimBatch(this.#agent, this.#ttlBig, this.#batch);
    if (tasks.length === 0) return false;
    worked.claimed += tasks.length;
    // Each lane takes the next task in the batch's order: handlers are
    // called in claim order, at most `concurrency` at once.
    const ran = new Array(tasks.length);
    let next = 0;
    const lane = async () => {
      while (next < tasks.length) {
        const i = next++;
        ran[i] = await this.#one(handler, tasks[i]);
      }
    };
    await Promise.all(Array.from({ length: Math.min(this.#concurrency, tasks.length) }, lane));

    const done = ran.filter((r) => r.ok);
    if (done.length > 0) {
      for (const answer of await board.completeBatch(done.map(({ id, token }) => ({ id, token })))) {
        if (answer.answer === 'completed') worked.completed += 1;
        else worked.lost += 1;
      }
    }
    for (const r of ran.filter((x) => x.reason !== undefined)) {
      const after = backoffDelay(this.#backoff, r.attempts, unit());
      try {
        await board.fail(r.id, r.token, r.reason, BigInt(after));
        worked.failed += 1;
      } catch (e) {
        if (!gone(e)) throw e;
        worked.lost += 1;
      }
    }
    for (const r of ran.filter((x) => x.unstarted)) {
      try {
        await board.release(r.id, r.token);
        worked.released += 1;
      } catch (e) {
        if (!gone(e)) throw e;
        worked.lost += 1;
      }
    }
    return true;
  }

  /**
   * Run one handler (unless the worker was stopped before it started), its
   * claim renewed meanwhile. Never throws: answers how the handler ended.
   */
  async #one(handler, task) {
    const { id, attempts } = task;
    const token = task.token ?? '';
    if (this.#stopped) return { id, token, unstarted: true };
    const stopRenewing = this.#keepAlive(id, token);
    try {
      await handler(task);
      return { id, token, ok: true };
    } catch (e) {
      return { id, token, attempts, reason: reasonOf(e) };
    } finally {
      await stopRenewing();
    }
  }

  /**
   * Renew the claim every third of the ttl until a renewal is refused
   * (`lease-lost`, `not-found`: the handler's result will be counted lost)
   * or the handler ends; any other failure is retried at the next tick.
   * Returns the function that stops it.
   */
  #keepAlive(id, token) {
    let live = true;
    let timer;
    let inflight;
    const renew = async () => {
      try {
        await this.#kernel.taskboard.renew(id, token, this.#ttlBig);
      } catch (e) {
        if (gone(e)) return;
      }
      if (live) timer = setTimeout(tick, this.#every);
    };
    const tick = () => {
      if (live) inflight = renew();
    };
    timer = setTimeout(tick, this.#every);
    return async () => {
      live = false;
      clearTimeout(timer);
      await inflight;
    };
  }
}
