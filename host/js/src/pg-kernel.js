// `PostgresKernel`: the kernel on PostgreSQL with an API of promises, so
// the event loop is never blocked by the server.
//
// The component's store import is synchronous and node-postgres is not, so
// something must wait synchronously for the server — never the main
// thread. Each call runs on a *kernel worker* (a worker thread with its own
// component instance and its own connection, `./pg-kernel-worker.js`), whose
// store import waits for the server — on its own socket when the
// connection is plain, else with `Atomics.wait` for the process's I/O thread
// (`./store/pg-io.js`) to answer. The main thread only posts the call and
// awaits its answer. At most `maxConnections` workers exist (default 16,
// HOSTS.md 15), started on demand and kept; a caller finding every one busy
// waits up to `connectionWait` (5 s) for one, then gets `storage`. An idle
// worker does not keep the process alive.
//
// Every call of the blocking `Kernel` is here, returning a promise (`await
// kernel.taskboard.claim(…)`); the queue `Worker` and the effect `Runner`
// take this kernel as they take a blocking one. A body that runs inside a
// call's transaction (`writeFenced`, `withDownstream`) runs on the caller's
// thread and may be async: its `down.get` / `put` / `query` are answered by
// the worker that holds the transaction (see `#withBody`).
import { AsyncLocalStorage } from 'node:async_hooks';
import { MessageChannel, Worker } from 'node:worker_threads';
import { runEffect } from './effects.js';
import { GakError } from './errors.js';
import * as calls from './interfaces.js';
import { CONNECTION_WAIT_MS, MAX_CONNECTIONS } from './store/facts.js';
import { ioControlPort } from './store/pg-io.js';
import { PostgresBackend } from './store/postgres.js';
import { hidePassword } from './store/secrets.js';

const INTERFACES = {
  checkpoint: calls.Checkpoint,
  commitgate: calls.Commitgate,
  sideeffect: calls.Sideeffect,
  taskboard: calls.Taskboard,
  retention: calls.Retention,
};
/** Calls the blocking kernel adds that take no function. */
const ADDED = { retention: ['pruneDryRun'] };

/** The call names of one interface, as the blocking kernel has them. */
export function callNames(iface) {
  const names = Object.getOwnPropertyNames(INTERFACES[iface].prototype).filter((n) => n !== 'constructor');
  return [...names, ...(ADDED[iface] ?? [])];
}

/** Which kernel's body the current async context runs in (HOSTS.md 13). */
const inBody = new AsyncLocalStorage();

function reentrant() {
  return new GakError('invalid-input', 'a kernel call cannot be made inside another call (e.g. from a writeFenced body)');
}

/** A body request's error, as the body sees it: a GakError, or the server's (`code` its SQLSTATE). */
function bodyError(e) {
  if (e.gak) return new GakError(e.code, e.detail);
  return Object.assign(new Error(e.message), { name: e.name ?? 'Error', code: e.code ?? undefined, severity: e.severity ?? undefined });
}

/**
 * What a body on this thread gets: the calls of `Downstream`, each a
 * promise answered in the worker's transaction (`await down.get(key)`,
 * `await down.query(sql, params)`); dead once the body returned.
 */
class RemoteDownstream {
  #request;
  #open = true;

  constructor(request) {
    this.#request = request;
    this.postgres = Object.freeze({ query: (sql, params) => this.query(sql, params) });
  }

  #send(op, fields) {
    if (!this.#open) return Promise.reject(new GakError('invalid-input', 'this downstream view belongs to a body that has returned'));
    return this.#request(op, fields);
  }

  get(key) {
    return this.#send('get', { key });
  }

  put(key, value) {
    return this.#send('put', { key, value });
  }

  query(sql, params = []) {
    return this.#send('query', { sql, params });
  }

  revoke() {
    this.#open = false;
  }
}

/** An error that crossed from a worker, as the caller's error. */
function revive(e) {
  if (e?.gak) {
    const err = new GakError(e.code, e.detail);
    if (e.stack) err.stack = `${err.name}: ${err.message}\n    (on a kernel worker)\n${e.stack.split('\n').slice(1).join('\n')}`;
    return err;
  }
  return new GakError('storage', `the kernel worker failed: ${e?.message ?? String(e)}`);
}

class KernelWorker {
  #worker;
  #pending = new Map();
  #next = 0;
  #dead;

  constructor(worker) {
    this.#worker = worker;
    worker.on('message', (m) => {
      const waiter = this.#pending.get(m.id);
      if (!waiter) return;
      this.#pending.delete(m.id);
      if (m.error) waiter.reject(revive(m.error));
      else waiter.resolve(m.value);
    });
    const die = (why) => {
      this.#dead = why;
      for (const w of this.#pending.values()) w.reject(new GakError('storage', why));
      this.#pending.clear();
    };
    worker.on('error', (e) => die(`the kernel worker failed: ${e?.message ?? e}`));
    worker.on('exit', (code) => die(`the kernel worker exited (${code})`));
  }

  get dead() {
    return this.#dead;
  }

  call(iface, name, args, body, transfer) {
    if (this.#dead) return Promise.reject(new GakError('storage', this.#dead));
    const id = this.#next++;
    return new Promise((resolve, reject) => {
      this.#pending.set(id, { resolve, reject });
      try {
        this.#worker.postMessage({ id, iface, name, args, body }, transfer);
      } catch (e) {
        this.#pending.delete(id);
        reject(new GakError('invalid-input', `the arguments cannot be sent to a kernel worker: ${e.message}`));
      }
    });
  }

  ref(on) {
    if (on) this.#worker.ref();
    else this.#worker.unref();
  }

  terminate() {
    return this.#worker.terminate();
  }
}

/** The kernel on PostgreSQL: every call returns a promise (see the module docs). */
export class PostgresKernel {
  #url;
  #options;
  #idle = [];
  #all = [];
  #starting = 0;
  #waiters = [];
  #closed = false;
  #description;

  /** Open: checks the URL and the schema on a first worker (errors as `storage`). */
  static async open(url, options = {}) {
    if (options.clock !== undefined) {
      throw new GakError('invalid-input', 'clock: a PostgresKernel judges by the system clock or the database\'s (clock=db in the URL); a clock object cannot reach its workers');
    }
    // The URL's errors on this thread, before any worker starts (nothing
    // connects here: the first worker does).
    try {
      new PostgresBackend(url, { create: false });
    } catch (e) {
      throw new GakError('storage', e.message, { cause: e });
    }
    const kernel = new PostgresKernel(url, options);
    const first = await kernel.#start();
    kernel.#idle.push(first);
    return kernel;
  }

  constructor(url, options) {
    this.#url = url;
    this.#options = {
      component: options.component,
      maxConnections: options.maxConnections ?? MAX_CONNECTIONS,
      connectionWait: options.connectionWait ?? CONNECTION_WAIT_MS,
    };
    if (!Number.isInteger(this.#options.maxConnections) || this.#options.maxConnections < 1) {
      throw new GakError('invalid-input', 'maxConnections: expected a positive integer');
    }
    for (const iface of Object.keys(INTERFACES)) {
      const api = {};
      for (const name of callNames(iface)) api[name] = (...args) => this.#call(iface, name, args);
      if (iface === 'sideeffect') {
        api.writeFenced = (resource, presented, body) => this.#withBody('sideeffect', 'writeFenced', [resource, presented], body);
      }
      this[iface] = Object.freeze(api);
    }
  }

  /**
   * Run `fn(downstream)` in a transaction of its own, without the
   * component (to read or seed what sink bodies wrote), as
   * `Kernel.withDownstream`; `fn` may be async, its value must be one
   * structured clone can copy.
   */
  withDownstream(fn) {
    return this.#withBody(undefined, 'withDownstream', [], fn);
  }

  /**
   * A call whose body runs inside its transaction (`writeFenced`,
   * `withDownstream`): the transaction is a kernel worker's, the body runs
   * here. The worker announces each run of the body (one per attempt) on a
   * port of the call's own; the body's `down.get` / `put` / `query` go to
   * the worker, which answers them in the transaction, blocked on a shared
   * flag in between; the body's end goes back the same way. A kernel call
   * made from inside the body is refused (HOSTS.md 13): it would need a
   * second transaction while this one holds its keys.
   */
  async #withBody(iface, name, args, body) {
    if (inBody.getStore() === this) throw reentrant();
    if (typeof body !== 'function') throw new GakError('invalid-input', 'body: expected a function');
    const kw = await this.#checkout();
    kw.ref(true);
    const { port1, port2 } = new MessageChannel();
    const shared = new SharedArrayBuffer(4);
    const flag = new Int32Array(shared);
    const send = (m) => {
      port1.postMessage(m);
      Atomics.store(flag, 0, 1);
      Atomics.notify(flag, 0);
    };
    const waiting = new Map();
    let seq = 0;
    const request = (op, fields) =>
      new Promise((resolve, reject) => {
        seq += 1;
        waiting.set(seq, { resolve, reject });
        try {
          send({ op, seq, ...fields });
        } catch (e) {
          waiting.delete(seq);
          reject(new GakError('invalid-input', `a value that cannot be sent to the kernel worker: ${e.message}`));
        }
      });
    let current;
    let thrown;
    port1.on('message', (m) => {
      if ('run' in m) {
        current?.revoke();
        thrown = undefined;
        const down = new RemoteDownstream(request);
        current = down;
        inBody.run(this, async () => {
          try {
            const value = await body(down);
            down.revoke();
            send({ done: value });
          } catch (e) {
            down.revoke();
            thrown = e;
            send({ threw: { name: e?.name, message: String(e?.message ?? e) } });
          }
        });
        return;
      }
      const w = waiting.get(m.seq);
      waiting.delete(m.seq);
      if (m.error) w?.reject(bodyError(m.error));
      else w?.resolve(m.value);
    });
    try {
      return await kw.call(iface, name, args, { port: port2, flag: shared }, [port2]);
    } catch (e) {
      if (thrown !== undefined) {
        // The last run's own error: thrown as is by withDownstream, the
        // cause of `write-failed` for a sink.
        if (name === 'withDownstream') throw thrown;
        if (e instanceof GakError && e.code === 'write-failed') e.cause = thrown;
      }
      throw e;
    } finally {
      current?.revoke();
      port1.close();
      this.#checkin(kw);
    }
  }

  /** Where it points (never the password). */
  get store() {
    const description = this.#description ?? hidePassword(this.#url);
    return { describe: () => description };
  }

  /** Kernel workers started so far (at most `maxConnections`). */
  get workers() {
    return this.#all.length;
  }

  async #start() {
    this.#starting++;
    try {
      const io = ioControlPort();
      const worker = new Worker(new URL('./pg-kernel-worker.js', import.meta.url), {
        workerData: { url: this.#url, io, component: this.#options.component, connectionWait: this.#options.connectionWait },
        transferList: [io],
      });
      const ready = await new Promise((resolve) => {
        worker.once('message', resolve);
        worker.once('error', (e) => resolve({ error: { message: e?.message ?? String(e) } }));
      });
      if (ready.error) {
        await worker.terminate();
        throw revive(ready.error);
      }
      this.#description = ready.describe;
      const kw = new KernelWorker(worker);
      kw.ref(false);
      this.#all.push(kw);
      return kw;
    } finally {
      this.#starting--;
    }
  }

  /** An idle worker, a new one, or one freed within the connection wait. */
  async #checkout() {
    if (this.#closed) throw new GakError('storage', 'the kernel is closed');
    for (;;) {
      const kw = this.#idle.pop();
      if (!kw) break;
      if (!kw.dead) return kw;
      this.#all = this.#all.filter((w) => w !== kw);
    }
    if (this.#all.length + this.#starting < this.#options.maxConnections) return this.#start();
    return new Promise((resolve, reject) => {
      const waiter = { resolve };
      const timer = setTimeout(() => {
        this.#waiters = this.#waiters.filter((w) => w !== waiter);
        reject(
          new GakError(
            'storage',
            `no connection free within ${this.#options.connectionWait} ms (all ${this.#options.maxConnections} are busy)`,
          ),
        );
      }, this.#options.connectionWait);
      waiter.resolve = (kw) => {
        clearTimeout(timer);
        resolve(kw);
      };
      this.#waiters.push(waiter);
    });
  }

  #checkin(kw) {
    if (kw.dead) {
      this.#all = this.#all.filter((w) => w !== kw);
      return;
    }
    const waiter = this.#waiters.shift();
    if (waiter) return waiter.resolve(kw);
    kw.ref(false);
    this.#idle.push(kw);
  }

  async #call(iface, name, args) {
    if (inBody.getStore() === this) throw reentrant();
    const kw = await this.#checkout();
    kw.ref(true);
    try {
      return await kw.call(iface, name, args);
    } finally {
      this.#checkin(kw);
    }
  }

  /**
   * acquire → `await body(lease, heartbeat)` (the hold renewed every ttl/3
   * meanwhile) → complete, as `Kernel.runEffect`: the body runs on this
   * thread, the calls on kernel workers.
   */
  runEffect(action, ttl, body) {
    return runEffect(this, action, ttl, body);
  }

  /** Stop every worker (their connections close with them). */
  async close() {
    this.#closed = true;
    const all = this.#all;
    this.#all = [];
    this.#idle = [];
    await Promise.all(all.map((w) => w.terminate()));
  }
}
