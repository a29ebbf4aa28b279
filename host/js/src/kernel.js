// `openKernel` and `Kernel`: the typed API over the component, one property
// per WIT interface (`kernel.taskboard.claim(…)`), camelCase, u64 as bigint.
// The interfaces' calls are generated from the WIT (interfaces.js); the
// calls the API adds around them (`writeFenced`, `pruneDryRun`) are here.
import { loadComponent } from './component.js';
import { SystemClock } from './clock.js';
import { GakError } from './errors.js';
import { Rollback, prepare, pure, transact } from './engine.js';
import { isPostgresUrl, openStore } from './store/index.js';
import { PostgresKernel } from './pg-kernel.js';
import { runEffect } from './effects.js';
import * as calls from './interfaces.js';
import * as v from './values.js';
import { StoreConflict, StoreFailure } from './store/errors.js';

/**
 * Open a kernel on a store URL (`memory:`, `sqlite:PATH`, `postgres://…`)
 * or a binding.
 *
 * Memory and SQLite answer synchronously (a `Kernel`). PostgreSQL answers
 * with promises (a `PostgresKernel`: calls run on worker threads, the event
 * loop is never blocked), unless `blocking: true` asks for a `Kernel` whose
 * calls block the calling thread on the server (for worker threads and
 * tools).
 *
 * Options: `clock` (default `SystemClock`), `component` (path of gak.wasm;
 * default `$GAK_COMPONENT`, else the repository's build output, see
 * `componentPath`), `busyTimeout` (SQLite, ms), `maxConnections` and
 * `connectionWait` (PostgreSQL: workers at most, and how long a call waits
 * for one, ms).
 */
export async function openKernel(store, options = {}) {
  if (typeof store === 'string' && isPostgresUrl(store) && !options.blocking) return PostgresKernel.open(store, options);
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
    this.checkpoint = new calls.Checkpoint(this);
    this.commitgate = new calls.Commitgate(this);
    this.sideeffect = new Sideeffect(this);
    this.taskboard = new calls.Taskboard(this);
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

  /** A key holding U+0000 is refused as in `put` (no host's `downstream` holds one). */
  get(key) {
    const k = withoutNul('key', v.str('key', key));
    return this.#store((txn) => txn.read([['downstream', k]], NOTHING).values[0]);
  }

  /**
   * A key or value holding U+0000 is refused with `invalid-input` before
   * anything is written, and the call goes on (the body may catch it):
   * PostgreSQL cannot store NUL in text, so no host's `downstream` takes one
   * and a body behaves alike on every binding.
   */
  put(key, value) {
    const [k, x] = [withoutNul('key', v.str('key', key)), withoutNul('value', v.str('value', value))];
    this.#store((txn) => txn.write([{ table: 'downstream', key: k, value: x }]));
  }

  /**
   * SQLite only: the connection inside the same transaction (write your own
   * tables and they commit with the fence compare). Transaction control is
   * refused; undefined on other bindings.
   */
  get sqlite() {
    return this.#driver('sqlite');
  }

  /**
   * PostgreSQL only: `query(sql, params)` runs one statement in the same
   * transaction and answers `{rows, rowCount, command}` (parameters only:
   * never splice data into SQL). Transaction control and texts of more
   * than one statement are refused; undefined on other bindings.
   */
  get postgres() {
    return this.#driver('postgres');
  }

  /** `down.postgres.query(sql, params)`; `invalid-input` on a store that lends no PostgreSQL handle. */
  query(sql, params) {
    const handle = this.postgres;
    if (handle === undefined) throw new GakError('invalid-input', 'query: this store lends sink bodies no PostgreSQL handle');
    return handle.query(sql, params);
  }

  #driver(kind) {
    if (!this.#open || (this.#txn.driver ?? 'sqlite') !== kind) return undefined;
    this.#lent ??= this.#txn.lend((e) => this.#host.fault(e));
    return this.#lent;
  }

  /** @internal The body returned: nothing here works any more. */
  revoke() {
    this.#open = false;
    this.#lent?.revoke();
  }
}

function withoutNul(what, s) {
  if (s.includes('\0')) throw new GakError('invalid-input', `${what}: holds a NUL character (U+0000), which PostgreSQL cannot store: refused on every binding`);
  return s;
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

/** The side-effect calls, and fenced downstream writes. */
class Sideeffect extends calls.Sideeffect {
  /**
   * A fenced downstream write: `body(downstream)` runs in the same
   * transaction as the fence compare (`sink-advance`), after it passed.
   * `presented` below the highest fence the sink has seen is `fence-stale`
   * and the body does not run; a body that throws rolls everything back
   * (seen fence included) and the call throws `write-failed` with the
   * body's error as `cause`. A store error the body met ends the call with
   * `storage` even if the body caught it, and the body cannot end the
   * transaction (HOSTS.md 12). The body must be synchronous, and may run
   * more than once if the store reports a conflict (only the last run's
   * writes can commit).
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
}

/** The retention calls, and a dry run of `prune`. */
class Retention extends calls.Retention {
  /** What `prune` would remove now, without removing it. */
  pruneDryRun(before, limit) {
    const a = [v.u64('before', before), v.u32('limit', limit)];
    return this.kernel._call(a, (x) => x.retention.prune(...a), 'rollback');
  }
}
