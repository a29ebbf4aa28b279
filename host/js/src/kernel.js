// `openKernel` and `Kernel`: the typed API over the component, one property
// per WIT interface (`kernel.taskboard.claim(…)`), camelCase, u64 as bigint.
import { loadComponent } from './component.js';
import { SystemClock } from './clock.js';
import { GakError } from './errors.js';
import { Rollback, prepare, pure, transact } from './engine.js';
import { openStore } from './store/index.js';
import { runEffect } from './effects.js';
import * as v from './values.js';
import { StoreConflict, StoreFailure } from './store/errors.js';

/**
 * Open a kernel on a store URL (`memory:`, `sqlite:PATH`) or a binding.
 *
 * Options: `clock` (default `SystemClock`), `component` (path of gak.wasm;
 * default `$GAK_COMPONENT`, else the repository's build output, see
 * `componentPath`), `busyTimeout` (SQLite, ms).
 */
export async function openKernel(store, options = {}) {
  const component = await loadComponent(options.component);
  prepare(component);
  try {
    const backend = typeof store === 'string' ? openStore(store, options) : store;
    return new Kernel(component, backend, options.clock ?? new SystemClock());
  } catch (e) {
    if (e instanceof StoreFailure || e instanceof StoreConflict) throw new GakError('storage', e.message, { cause: e });
    throw e;
  }
}

/** The kernel over one store. Calls are synchronous; one at a time. */
export class Kernel {
  #component;
  #backend;
  #session;
  #clock;

  constructor(component, backend, clock) {
    this.#component = component;
    this.#backend = backend;
    this.#session = backend.session();
    this.#clock = clock;
    this.checkpoint = new Checkpoint(this);
    this.commitgate = new Commitgate(this);
    this.sideeffect = new Sideeffect(this);
    this.taskboard = new Taskboard(this);
    this.retention = new Retention(this);
  }

  /** The binding (e.g. `MemoryBackend`, `SqliteBackend`). */
  get store() {
    return this.#backend;
  }

  /** The clock judging expiry. */
  get clock() {
    return this.#clock;
  }

  /** Where the component came from. */
  get componentPath() {
    return this.#component.path;
  }

  /** @internal Run an export in one transaction. */
  _transact(fn, ending) {
    if (!this.#session) throw new GakError('storage', 'the kernel is closed');
    return transact(this.#component, this.#session, this.#clock, fn, ending);
  }

  /** @internal Run an export on checked `args` in one transaction, sizes checked first (HOSTS.md 16). */
  _call(args, fn, ending) {
    v.checkSizes(args);
    return this._transact(fn, ending);
  }

  /** @internal Run a pure export on checked `args` (build-plan: only the call's total is bounded, rule 16). */
  _pure(args, fn) {
    v.checkSizes(args, false);
    return pure(this.#component, this.#clock, fn);
  }

  /**
   * Run `fn(downstream)` in a transaction of its own, without the component:
   * to read (or seed) what fenced sink bodies wrote. `fn` must be synchronous.
   */
  withDownstream(fn) {
    return this._transact((_, host) => callBody(fn, host, false));
  }

  /**
   * acquire → `await body(lease, heartbeat)` (the hold renewed every ttl/3
   * meanwhile) → complete: `new Runner(kernel, ttl).run(action, body)`.
   */
  runEffect(action, ttl, body) {
    return runEffect(this, action, ttl, body);
  }

  /** Close the store connection. */
  close() {
    this.#session?.close();
    this.#session = undefined;
  }
}

const NOTHING = Object.freeze([]);

/**
 * A sink body's view of the call's open transaction: the `downstream` table
 * and, on SQLite, the connection (guarded: see `store/lent.js`). Every store
 * error the body meets here is recorded on the call (`host.fault`): the call
 * ends with `storage`, or re-runs on a conflict, even if the body catches
 * the error and returns normally (HOSTS.md 12). Works only while the body
 * runs. `get` and `put` speak the bindings' one read and write protocol
 * (a one-key read, a one-entry write set), as the Rust host's `Downstream`
 * does, so a test binding counts and faults them as the cases say.
 */
class Downstream {
  #host;
  #txn;
  #lent;
  #open = true;

  constructor(host) {
    this.#host = host;
    this.#txn = host.txn;
  }

  #store(op) {
    if (!this.#open) throw new GakError('invalid-input', 'this downstream view belongs to a body that has returned');
    try {
      return op(this.#txn);
    } catch (e) {
      this.#host.fault(e);
      throw new GakError('storage', e?.message ?? String(e), { cause: e });
    }
  }

  get(key) {
    const k = v.str('key', key);
    return this.#store((txn) => txn.read([['downstream', k]], NOTHING).values[0]);
  }

  put(key, value) {
    const [k, x] = [v.str('key', key), v.str('value', value)];
    this.#store((txn) => txn.write([{ table: 'downstream', key: k, value: x }]));
  }

  /**
   * SQLite only: the connection inside the same transaction (write your own
   * tables and they commit with the fence compare). Transaction control is
   * refused; undefined on other bindings.
   */
  get sqlite() {
    if (!this.#open) return undefined;
    this.#lent ??= this.#txn.lend((e) => this.#host.fault(e));
    return this.#lent;
  }

  /** @internal The body returned: nothing here works any more. */
  revoke() {
    this.#open = false;
    this.#lent?.revoke();
  }
}

/**
 * Run a user body on the open transaction. A body that throws rolls the
 * transaction back: as `write-failed` (with the body's error as `cause`)
 * for a sink, or rethrowing the body's own error for `withDownstream`. A
 * store error the body met ends the call first (the engine checks it).
 */
function callBody(fn, host, sink = true) {
  const down = new Downstream(host);
  let out;
  try {
    out = fn(down);
  } catch (e) {
    throw new Rollback(sink ? new GakError('write-failed', e?.message ?? String(e), { cause: e }) : e);
  } finally {
    down.revoke();
  }
  if (out && typeof out.then === 'function') {
    out.then(
      () => {},
      () => {},
    );
    const why = 'the body returned a promise; it must be synchronous (it runs inside the transaction)';
    throw new Rollback(sink ? new GakError('write-failed', why) : new GakError('invalid-input', why));
  }
  return out;
}

class Interface {
  constructor(kernel) {
    this.kernel = kernel;
  }
}

/** Checkpoint: snapshots and resume plans (SPEC 3). */
class Checkpoint extends Interface {
  saveIfNewer(snap) {
    const s = v.snapshot(snap);
    this.kernel._call([s], (x) => x.checkpoint.saveIfNewer(s));
  }

  load(runId) {
    const id = v.str('runId', runId);
    return this.kernel._call([id], (x) => x.checkpoint.load(id));
  }

  /** Validate the DAG and plan a resume. Pure: no store transaction. */
  buildPlan(steps, snap) {
    const s = v.stepDefs(steps);
    const sn = snap === undefined || snap === null ? undefined : v.snapshot(snap);
    return this.kernel._pure([s, sn], (x) => x.checkpoint.buildPlan(s, sn));
  }
}

/** Commitgate: terminal outcomes (SPEC 4). */
class Commitgate extends Interface {
  commit(runId, step, fence, outcome) {
    const a = [v.str('runId', runId), v.optStr('step', step), v.u64('fence', fence), v.outcome(outcome)];
    return this.kernel._call(a, (x) => x.commitgate.commit(...a));
  }

  read(runId, step) {
    const a = [v.str('runId', runId), v.optStr('step', step)];
    return this.kernel._call(a, (x) => x.commitgate.read(...a));
  }
}

/** Side effects: the idempotency gate and fenced sinks (SPEC 5). */
class Sideeffect extends Interface {
  acquire(action, ttl) {
    const a = [v.action(action), v.u64('ttl', ttl)];
    return v.acquiredOut(this.kernel._call(a, (x) => x.sideeffect.acquire(...a)));
  }

  complete(action, lease, result) {
    const a = [v.action(action), v.lease(lease), v.bytes('result', result)];
    return this.kernel._call(a, (x) => x.sideeffect.complete(...a));
  }

  release(action, lease) {
    const a = [v.action(action), v.lease(lease)];
    this.kernel._call(a, (x) => x.sideeffect.release(...a));
  }

  abandon(action, lease, reason) {
    const a = [v.action(action), v.lease(lease), v.str('reason', reason)];
    this.kernel._call(a, (x) => x.sideeffect.abandon(...a));
  }

  renew(action, lease, ttl) {
    const a = [v.action(action), v.lease(lease), v.u64('ttl', ttl)];
    return this.kernel._call(a, (x) => x.sideeffect.renew(...a));
  }

  markUncertain(action, lease, reason) {
    const a = [v.action(action), v.lease(lease), v.str('reason', reason)];
    this.kernel._call(a, (x) => x.sideeffect.markUncertain(...a));
  }

  beginReconcile(action, ttl) {
    const a = [v.action(action), v.u64('ttl', ttl)];
    return this.kernel._call(a, (x) => x.sideeffect.beginReconcile(...a));
  }

  resolveUncertain(action, resolution) {
    const a = [v.action(action), v.resolution(resolution)];
    return v.resolvedOut(this.kernel._call(a, (x) => x.sideeffect.resolveUncertain(...a)));
  }

  /**
   * A fenced downstream write: `body(downstream)` runs in the same
   * transaction as the fence compare, after it passed. `presented` below the
   * highest fence the sink has seen is `fence-stale` and the body does not
   * run; a body that throws rolls everything back (seen fence included) and
   * the call throws `write-failed` with the body's error as `cause`. A
   * store error the body met ends the call with `storage` even if the body
   * caught it, and the body cannot end the transaction (HOSTS.md 12). The
   * body must be synchronous, and may run more than once if the store
   * reports a conflict (only the last run's writes can commit).
   */
  writeFenced(resource, presented, body) {
    const r = v.str('resource', resource);
    const p = v.u64('presented', presented);
    if (typeof body !== 'function') throw new GakError('invalid-input', 'body: expected a function');
    this.kernel._call([r], (x, host) => {
      x.sideeffect.sinkAdvance(r, p);
      callBody(body, host);
    });
  }

  /** The highest fence the sink has seen (0n when never written). */
  sinkSeen(resource) {
    const r = v.str('resource', resource);
    return this.kernel._call([r], (x) => x.sideeffect.sinkSeen(r));
  }

  /** One page of keys by key, optionally of one state: `{state?, after?, limit}`. */
  list(options) {
    const { after, limit } = v.page('options', options);
    const state = v.keyState('options.state', options?.state);
    return this.kernel._call([state, after], (x) => x.sideeffect.list(state, after, limit));
  }

  /** The key as `list` shows it, or `not-found`. */
  get(key) {
    const k = v.str('key', key);
    return this.kernel._call([k], (x) => x.sideeffect.get(k));
  }
}

/** Taskboard: claims by token (SPEC 6, 9). */
class Taskboard extends Interface {
  seed(tasks) {
    const t = v.taskSeeds(tasks);
    this.kernel._call([t], (x) => x.taskboard.seed(t));
  }

  /** One page of the board by id, optionally of one state: `{state?, after?, limit}`. */
  list(options) {
    const { after, limit } = v.page('options', options);
    const state = v.taskState('options.state', options?.state);
    return this.kernel._call([state, after], (x) => x.taskboard.list(state, after, limit));
  }

  get(id) {
    const i = v.str('id', id);
    return this.kernel._call([i], (x) => x.taskboard.get(i));
  }

  claim(id, agent, ttl) {
    const a = [v.str('id', id), v.str('agent', agent), v.u64('ttl', ttl)];
    return this.kernel._call(a, (x) => x.taskboard.claim(...a));
  }

  /** Claim the first-seeded ready task; `undefined` when none is ready. */
  claimNext(agent, ttl) {
    const a = [v.str('agent', agent), v.u64('ttl', ttl)];
    return this.kernel._call(a, (x) => x.taskboard.claimNext(...a)) ?? undefined;
  }

  release(id, token) {
    const a = [v.str('id', id), v.str('token', token)];
    this.kernel._call(a, (x) => x.taskboard.release(...a));
  }

  complete(id, token) {
    const a = [v.str('id', id), v.str('token', token)];
    this.kernel._call(a, (x) => x.taskboard.complete(...a));
  }

  renew(id, token, ttl) {
    const a = [v.str('id', id), v.str('token', token), v.u64('ttl', ttl)];
    return this.kernel._call(a, (x) => x.taskboard.renew(...a));
  }
}

/** Retention: bounded pruning of finished records (SPEC 9). */
class Retention extends Interface {
  /**
   * Remove at most `limit` (1-1000) records finished before `before`.
   * A retry of a pruned key runs its body again; a pruned run id starts over.
   */
  prune(before, limit) {
    const a = [v.u64('before', before), v.u32('limit', limit)];
    return this.kernel._call(a, (x) => x.retention.prune(...a));
  }

  /** What `prune` would remove now, without removing it. */
  pruneDryRun(before, limit) {
    const a = [v.u64('before', before), v.u32('limit', limit)];
    return this.kernel._call(a, (x) => x.retention.prune(...a), 'rollback');
  }
}
