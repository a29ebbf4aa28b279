// `PostgresKernel`: the kernel on PostgreSQL with an API of promises, so
// the event loop is never blocked by the server.
//
// The component's store import is synchronous and node-postgres is not, so
// something must wait synchronously for the server — never the main
// thread. Each call runs on a *kernel worker* (a worker thread with its own
// component instance and its own connection, `./pg-kernel-worker.js`), whose
// store import waits with `Atomics.wait` for the process's I/O thread
// (`./store/pg-io.js`) to answer. The main thread only posts the call and
// awaits its answer. At most `maxConnections` workers exist (default 16,
// HOSTS.md 15), started on demand and kept; a caller finding every one busy
// waits up to `connectionWait` (5 s) for one, then gets `storage`. An idle
// worker does not keep the process alive.
//
// Every interface call of the blocking `Kernel` is here, returning a
// promise (`await kernel.taskboard.claim(…)`), and `runEffect`; the queue
// `Worker` and the effect `Runner` take this kernel as they take a blocking
// one. Calls whose body runs inside the transaction (`writeFenced`,
// `withDownstream`) are not: a function cannot cross to a worker thread
// (open a blocking kernel on a worker of your own for those:
// `openKernel(url, { blocking: true })`).
import { Worker } from 'node:worker_threads';
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

  call(iface, name, args) {
    if (this.#dead) return Promise.reject(new GakError('storage', this.#dead));
    const id = this.#next++;
    return new Promise((resolve, reject) => {
      this.#pending.set(id, { resolve, reject });
      try {
        this.#worker.postMessage({ id, iface, name, args });
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
      this[iface] = Object.freeze(api);
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
