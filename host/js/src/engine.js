// The calling convention of `wit/world.wit`, for one component in one
// process: instances, the store and clock imports, and the transaction that
// wraps every exported call.
//
// - One host transaction per exported call: commit when the export returns
//   ok, roll back when it returns an error.
// - A store conflict (busy SQLite) re-runs the whole call with bounded
//   backoff; the component is deterministic given its reads, clock and
//   random draws, so a re-run is a fresh decision, never a partial one.
// - Imports never throw. jco re-throws a plain `Error` from an import
//   through the guest (jco #405): the guest's stack is unwound without it
//   knowing, and the instance may be left inconsistent. Every failure is
//   returned as the `store-error` payload instead, and remembered so the
//   call cannot commit.
// - Anything unexpected thrown out of an export (a trap, a glue error) ends
//   the call with `storage`, rolls back, and discards the instance: the next
//   call gets a fresh one.
import { GakError, fromRefusal, isRefusal } from './errors.js';
import { StoreConflict } from './store/errors.js';
import { wasiImports } from './wasi.js';

/** How many times one call runs before store conflicts make it `storage`. */
export const MAX_ATTEMPTS = 10;
/** Every number the kernel handles stays below 2^53 (SPEC 8). */
const MAX_NUMBER = (1n << 53n) - 1n;

const sleeper = new Int32Array(new SharedArrayBuffer(4));

/** Exponential backoff with jitter, 1 ms to ~0.5 s (as the Rust host). */
function backoff(attempt) {
  const base = 2 ** Math.min(attempt, 9);
  Atomics.wait(sleeper, 0, 0, base / 2 + Math.random() * (base / 2));
}

/** What the imports of one instance act on during a call. */
class HostState {
  txn = null;
  clock = null;
  now = undefined;
  conflict = false;
  failure = undefined;

  reset(clock, txn) {
    this.clock = clock;
    this.txn = txn;
    this.now = undefined;
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

function storeImport(host, op) {
  return (...args) => {
    const txn = host.txn;
    if (!txn) return host.fault(new Error('no open transaction (a pure call touched the store)'));
    try {
      return op(txn, ...args);
    } catch (e) {
      return host.fault(e);
    }
  };
}

function clockImport(host) {
  return () => {
    // One reading per call (the WIT's SHOULD): every deadline a call
    // computes uses the same now.
    if (host.now !== undefined) return host.now;
    let now;
    try {
      const raw = host.clock.now();
      now = typeof raw === 'bigint' ? raw : Number.isSafeInteger(raw) ? BigInt(raw) : undefined;
      if (now === undefined) throw new Error(`the clock returned ${String(raw)}, not an integer`);
      if (now < 0n || now > MAX_NUMBER) throw new Error(`the clock reads ${now}, outside 0..2^53 ms`);
    } catch (e) {
      host.failure ??= `reading the clock: ${e.message}`;
      now = 0n; // the call is failed whatever the component decides
    }
    host.now = now;
    return now;
  };
}

function importObject(component, host) {
  const own = {
    'gak:kernel/store': {
      get: storeImport(host, (txn, table, key) => txn.get(table, key)),
      getMany: storeImport(host, (txn, keys) => txn.getMany(keys)),
      put: storeImport(host, (txn, table, key, value) => txn.put(table, key, value)),
      delete: storeImport(host, (txn, table, key) => txn.delete(table, key)),
      scan: storeImport(host, (txn, table, prefix, after, limit) => txn.scan(table, prefix, after, limit)),
    },
    'gak:kernel/clock': { now: clockImport(host) },
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
const CONFLICT = Symbol('store conflict');
const TRAPPED = Symbol('trapped');

// One transaction at a time per thread: a call made while another's
// transaction is open (from inside a fenced sink's body) would need a second
// transaction — a deadlock on SQLite, a refusal on memory.
let inCall = false;

/**
 * Run `fn(exports, txn)` inside one transaction of `session`, re-running it
 * on conflicts. `fn` MUST be re-runnable. `ending: 'rollback'` answers what
 * the call would do and leaves the store as it was (a dry run).
 */
export function transact(component, session, clock, fn, ending = 'commit') {
  if (inCall) {
    throw new GakError('invalid-input', 'a kernel call cannot be made inside another call (e.g. from a writeFenced body)');
  }
  inCall = true;
  try {
    for (let attempt = 1; ; attempt++) {
      const instance = checkout(component);
      let trap;
      try {
        const value = session.transaction((txn) => {
          const host = instance.host;
          host.reset(clock, txn);
          let value;
          let signal;
          try {
            value = fn(instance.exports, txn);
          } catch (e) {
            if (e instanceof Rollback) signal = e;
            else if (e instanceof GakError) signal = new Rollback(e);
            else if (isRefusal(e)) signal = new Rollback(fromRefusal(e));
            else {
              trap = e;
              throw TRAPPED;
            }
          } finally {
            host.txn = null;
          }
          if (host.conflict || txn.conflict) throw CONFLICT;
          if (host.failure !== undefined) throw new Rollback(new GakError('storage', host.failure));
          if (signal) throw signal;
          if (ending === 'rollback') throw new Rollback(undefined, value);
          return value;
        });
        checkin(component, instance);
        return value;
      } catch (e) {
        if (e === TRAPPED) {
          // The instance is dropped; the transaction was rolled back.
          throw new GakError('storage', `component trapped: ${trap?.message ?? String(trap)}`, { cause: trap });
        }
        checkin(component, instance);
        if (e === CONFLICT || e instanceof StoreConflict) {
          if (attempt < MAX_ATTEMPTS) {
            backoff(attempt);
            continue;
          }
          throw new GakError('storage', `store conflicts persisted after ${attempt} attempts`);
        }
        if (e instanceof Rollback) {
          if (e.error) throw e.error;
          return e.value;
        }
        throw new GakError('storage', e instanceof Error ? e.message : String(e), { cause: e });
      }
    }
  } finally {
    inCall = false;
  }
}

/**
 * Call a pure export (one that MUST NOT touch the store, such as
 * `checkpoint.build-plan`) without a transaction. Should it touch the
 * store, the import refuses and the call fails with `storage`.
 */
export function pure(component, clock, fn) {
  if (inCall) {
    throw new GakError('invalid-input', 'a kernel call cannot be made inside another call (e.g. from a writeFenced body)');
  }
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
