// The calling convention of `wit/world.wit` (gak:kernel@0.4.0), for one
// component in one process: instances, the store import, and the
// transaction that wraps every exported call (HOSTS.md rules 1-6, 12, 13).
//
// - One host transaction per exported call: commit when the export returns
//   ok, roll back when it returns an error.
// - The component crosses into the host few times per call: `store.read`
//   (point reads, range reads, then the clock, then fresh entropy, in one
//   crossing) and, when it decides ok, one `store.write` with the call's
//   whole write set.
// - A store conflict (busy SQLite) re-runs the whole call in a fresh
//   transaction, at most MAX_ATTEMPTS runs with jittered exponential backoff
//   (`retryDelay`); the component is deterministic given its reads, clock
//   and entropy, so a re-run is a fresh decision, never a partial one.
//   A COMMIT refused as busy did not apply and is re-run; a COMMIT that
//   fails any other way may have applied and is `storage`, never re-run.
// - Imports never throw. jco re-throws a plain `Error` from an import
//   through the guest (jco #405): the guest's stack is unwound without it
//   knowing, and the instance may be left inconsistent. Every failure (the
//   clock's and the random source's too) is returned as the `store-error`
//   payload instead, and remembered so the call cannot commit. A fenced
//   sink body's store errors are remembered the same way, even when the
//   body catches them.
// - Anything unexpected thrown out of an export (a trap, a glue error) ends
//   the call with `storage`, rolls back, and discards the instance: the next
//   call gets a fresh one.
import { GakError, fromRefusal, isRefusal } from './errors.js';
import { StoreConflict, StoreFailure } from './store/errors.js';
import { entropy, wasiImports } from './wasi.js';
import { RETRY_ATTEMPTS as MAX_ATTEMPTS, RETRY_BASE_MS, RETRY_MAX_MS } from './store/facts.js';

/**
 * How many times one call runs before store conflicts make it `storage`
 * (HOSTS.md 3), and the first and longest pause between runs (ms): the
 * protocol's numbers, generated from host/sql/store.json for every host.
 */
export { MAX_ATTEMPTS, RETRY_BASE_MS, RETRY_MAX_MS };
/** Every number the kernel handles stays below 2^53 (SPEC 8). */
const MAX_NUMBER = (1n << 53n) - 1n;

/**
 * The pause (ms) after the `attempt`-th run: the exponential step
 * (1, 2, 4 … ms, at most 500) halved, plus up to the other half at random,
 * so callers that collided spread out.
 */
export function retryDelay(attempt, random = Math.random) {
  const step = Math.min(RETRY_BASE_MS * 2 ** Math.min(Math.max(attempt - 1, 0), 16), RETRY_MAX_MS);
  return step / 2 + random() * (step / 2);
}

const sleeper = new Int32Array(new SharedArrayBuffer(4));

/** Block this thread for `retryDelay(attempt)` (the calls are synchronous). */
function pause(attempt) {
  Atomics.wait(sleeper, 0, 0, retryDelay(attempt));
}

/**
 * How many times the component crossed into the host (`store.read`,
 * `store.write`), summed over every instance of this thread: the latency
 * tool divides it by the calls it made. An increment per crossing, nothing
 * else.
 * @internal
 */
export const crossings = { read: 0, write: 0 };

/**
 * What the imports of one instance act on during a call: the open
 * transaction, the clock, and the store errors met so far (by the component
 * or by a sink body), which decide how the call ends.
 */
class HostState {
  txn = null;
  clock = null;
  conflict = false;
  failure = undefined;

  reset(clock, txn) {
    this.clock = clock;
    this.txn = txn;
    this.conflict = false;
    this.failure = undefined;
  }

  fault(e) {
    if (e instanceof StoreConflict) {
      this.conflict = true;
      return { tag: 'err', val: { tag: 'conflict', val: e.message } };
    }
    const why = e instanceof Error ? e.message : String(e);
    this.failure ??= why;
    return { tag: 'err', val: { tag: 'failure', val: why } };
  }
}

const NOTHING = Object.freeze([]);
// What `store.write` answers: the glue wraps any other value in a fresh
// `{tag: 'ok'}` object, once per call.
const WRITTEN = Object.freeze({ tag: 'ok', val: undefined });

/**
 * The clock's reading as the WIT's `millis`: a bigint in 0..2^53-1 (a safe
 * integer number is accepted and converted). Anything else, or a clock
 * that throws, is a `StoreFailure`: the read fails and so does the call.
 */
function instant(clock) {
  let raw;
  try {
    raw = clock.now();
  } catch (e) {
    throw new StoreFailure(`reading the clock: ${e?.message ?? String(e)}`, { cause: e });
  }
  const now = typeof raw === 'bigint' ? raw : Number.isSafeInteger(raw) ? BigInt(raw) : undefined;
  if (now === undefined) throw new StoreFailure(`reading the clock: it returned ${String(raw)}, not a safe integer`);
  if (now < 0n || now > MAX_NUMBER) throw new StoreFailure(`reading the clock: it reads ${now}, outside 0..2^53 ms`);
  return now;
}

/**
 * `store.read`: the point and range reads in one call to the binding (none
 * when the component asks only for the clock or entropy, as the Rust host),
 * then the clock — after the reads, so expiry is judged at an instant no
 * older than the state it is judged on — then the call's fresh entropy.
 * Returned as the answers record itself (no `tag`: the glue takes it as ok).
 */
function readImport(host) {
  return (reads) => {
    crossings.read++;
    const txn = host.txn;
    if (!txn) return host.fault(new Error('no open transaction (a pure call touched the store)'));
    try {
      const { keys, ranges } = reads;
      let values = NOTHING;
      let pages = NOTHING;
      let said;
      // clock=db (PostgreSQL): the binding reads the server's clock after
      // the point reads' locks, in the same round trip.
      const dbClock = reads.clock && txn.clocked === true;
      if (keys.length > 0 || ranges.length > 0 || dbClock) ({ values, pages, now: said } = txn.read(keys, ranges, dbClock));
      const now = reads.clock ? instant(dbClock ? { now: () => said } : host.clock) : undefined;
      return { values, pages, now, entropy: entropy(reads.entropy) };
    } catch (e) {
      return host.fault(e);
    }
  };
}

/**
 * `store.try-read`: point reads that pass over held keys (SPEC 10). A
 * binding without `tryRead` never holds a key: each is read as `read` does.
 */
function tryReadImport(host) {
  return (keys) => {
    crossings.read++;
    const txn = host.txn;
    if (!txn) return host.fault(new Error('no open transaction (a pure call touched the store)'));
    try {
      if (keys.length === 0) return [];
      if (typeof txn.tryRead === 'function') {
        return txn.tryRead(keys).map((p) => (p.held ? HELD : { tag: 'found', val: p.value ?? undefined }));
      }
      return txn.read(keys, NOTHING).values.map((value) => ({ tag: 'found', val: value ?? undefined }));
    } catch (e) {
      return host.fault(e);
    }
  };
}

const HELD = Object.freeze({ tag: 'held' });

/** `store.write`: the call's whole write set, applied in its transaction. */
function writeImport(host) {
  return (changes) => {
    crossings.write++;
    const txn = host.txn;
    if (!txn) return host.fault(new Error('no open transaction (a pure call touched the store)'));
    try {
      txn.write(changes);
      return WRITTEN;
    } catch (e) {
      return host.fault(e);
    }
  };
}

function importObject(component, host) {
  const own = {
    'gak:kernel/store': { read: readImport(host), tryRead: tryReadImport(host), write: writeImport(host) },
    ...wasiImports,
  };
  const imports = {};
  for (const name of component.meta.imports) {
    const impl = own[name];
    if (!impl) throw new Error(`the component imports ${name}, which this host does not provide`);
    // jco #708: the glue reads the unversioned name, its .d.ts the versioned one.
    imports[name] = impl;
    const version = component.meta.versions[name];
    if (version) imports[`${name}@${version}`] = impl;
  }
  return imports;
}

/** One instance and the host state its imports act on. */
class Instance {
  constructor(component) {
    this.host = new HostState();
    this.exports = component.instantiate(importObject(component, this.host));
  }
}

const idle = new WeakMap();

/** An idle instance of `component`, or a new one. */
function checkout(component) {
  const pool = idle.get(component);
  const instance = pool?.pop();
  if (instance) return instance;
  try {
    return new Instance(component);
  } catch (e) {
    throw new GakError('storage', `cannot instantiate the component: ${e.message}`, { cause: e });
  }
}

/**
 * Instantiate `component` once now (and keep the instance for the first
 * call), so a component this host cannot link fails at open, not later.
 */
export function prepare(component) {
  checkin(component, checkout(component));
}

function checkin(component, instance) {
  let pool = idle.get(component);
  if (!pool) idle.set(component, (pool = []));
  pool.push(instance);
}

/**
 * Thrown by a call's `fn` to roll its transaction back and end the call with
 * `error` (thrown to the caller as is), or with `value` when `error` is
 * undefined.
 */
export class Rollback {
  constructor(error, value) {
    this.error = error;
    this.value = value;
  }
}

// One transaction at a time per thread: a call made while another's
// transaction is open (from inside a fenced sink's body) would need a second
// transaction — a deadlock on SQLite (the first holds the write lock), a
// refusal on memory. Any kernel of this thread is refused, not only the one
// whose body runs: two kernels on one SQLite file would deadlock the same way.
let inCall = false;

function refuseReentry() {
  if (inCall) {
    throw new GakError('invalid-input', 'a kernel call cannot be made inside another call (e.g. from a writeFenced body)');
  }
}

/** Why a call ended with `storage` after its transaction failed. */
function storageError(e) {
  return new GakError('storage', e instanceof Error ? e.message : String(e), { cause: e });
}

/**
 * Run `fn(exports, host)` inside one transaction of `session`, re-running it
 * on conflicts. `fn` MUST be re-runnable; `host.txn` is the open
 * transaction and `host.fault(e)` records a store error so the call cannot
 * commit. `ending: 'rollback'` answers what the call would do and leaves the
 * store as it was (a dry run).
 *
 * Re-entrant calls are refused before an instance is checked out or a
 * transaction begun (HOSTS.md 13).
 */
export function transact(component, session, clock, fn, ending = 'commit') {
  refuseReentry();
  inCall = true;
  try {
    const instance = checkout(component);
    let usable = true;
    try {
      return attempts(instance, session, clock, fn, ending);
    } catch (e) {
      if (e instanceof Trapped) {
        usable = false; // its guest state is unknown: never reused
        throw e.error;
      }
      throw e;
    } finally {
      instance.host.reset(null, null);
      if (usable) checkin(component, instance);
    }
  } finally {
    inCall = false;
  }
}

/** The instance trapped: `error` is the call's answer, the instance is dropped. */
class Trapped {
  constructor(error) {
    this.error = error;
  }
}

function attempts(instance, session, clock, fn, ending) {
  const host = instance.host;
  for (let attempt = 1; ; attempt++) {
    const mayRetry = attempt < MAX_ATTEMPTS;
    let txn;
    try {
      txn = session.begin();
    } catch (e) {
      // A failed BEGIN opened nothing: no rollback.
      if (e instanceof StoreConflict && mayRetry) {
        pause(attempt);
        continue;
      }
      throw e instanceof StoreConflict ? persisted(attempt, e) : storageError(e);
    }
    host.reset(clock, txn);
    let value;
    let signal;
    let trap;
    try {
      value = fn(instance.exports, host);
    } catch (e) {
      if (e instanceof Rollback) signal = e;
      else if (e instanceof GakError) signal = new Rollback(e);
      else if (isRefusal(e)) signal = new Rollback(fromRefusal(e));
      else trap = { error: e };
    } finally {
      host.txn = null;
    }
    if (!txn.isOpen()) {
      // Ended under the call (a body reached the connection, or the
      // database rolled it back): whatever it did may be durable. Never
      // re-run, never report ok (HOSTS.md 12).
      txn.rollback(); // the binding's bookkeeping; nothing is left to roll back
      const why = 'the transaction ended inside the call (a body must never end the kernel\'s transaction)';
      const error = new GakError('storage', why);
      throw trap ? new Trapped(error) : error;
    }
    if (trap) {
      txn.rollback();
      const e = trap.error;
      throw new Trapped(new GakError('storage', `component trapped: ${e?.message ?? String(e)}`, { cause: e }));
    }
    if (host.conflict) {
      // Whatever the component answered after a conflict is discarded.
      txn.rollback();
      if (mayRetry) {
        pause(attempt);
        continue;
      }
      throw persisted(attempt);
    }
    if (host.failure !== undefined) {
      txn.rollback();
      throw new GakError('storage', host.failure);
    }
    if (signal || ending === 'rollback') {
      txn.rollback();
      if (signal?.error) throw signal.error;
      return signal ? signal.value : value;
    }
    try {
      txn.commit();
    } catch (e) {
      // A failed COMMIT leaves nothing open: no rollback. Busy: it did not
      // apply, run the call again. Anything else may have applied: storage.
      if (e instanceof StoreConflict && mayRetry) {
        pause(attempt);
        continue;
      }
      throw e instanceof StoreConflict ? persisted(attempt, e) : storageError(e);
    }
    return value;
  }
}

function persisted(attempt, cause) {
  return new GakError('storage', `store conflicts persisted after ${attempt} attempts`, cause ? { cause } : undefined);
}

/**
 * Call a pure export (one that MUST NOT touch the store, such as
 * `checkpoint.build-plan`) without a transaction. Should it touch the
 * store, the import refuses and the call fails with `storage`.
 */
export function pure(component, clock, fn) {
  refuseReentry();
  const instance = checkout(component);
  instance.host.reset(clock, null);
  let value;
  try {
    value = fn(instance.exports);
  } catch (e) {
    if (isRefusal(e)) {
      checkin(component, instance);
      throw fromRefusal(e);
    }
    throw new GakError('storage', `component trapped: ${e?.message ?? String(e)}`, { cause: e });
  }
  checkin(component, instance);
  if (instance.host.failure !== undefined) throw new GakError('storage', instance.host.failure);
  return value;
}
