// One kernel worker of `PostgresKernel` (./pg-kernel.js): a blocking kernel
// on its own connection, answering the calls the main thread posts, one at a
// time. Its store requests wait for the server on its own socket (a plain
// connection) or for the I/O thread (TLS, ./store/pg-io.js) with
// `Atomics.wait`: this thread blocks, the main thread never does.
import { setPriority } from 'node:os';
import { parentPort, receiveMessageOnPort, workerData } from 'node:worker_threads';
import { GakError } from './errors.js';
import { openKernel } from './kernel.js';
import { openStore } from './store/index.js';
import { useIoPort } from './store/pg-io.js';

/** How much nicer than the process a kernel worker thread is. */
const WORKER_NICE = 10;

/** An error as data that crosses back to the caller. */
function crossing(e) {
  if (e instanceof GakError) return { gak: true, code: e.code, detail: e.detail, stack: e.stack };
  return { gak: true, code: 'storage', detail: `unexpected: ${e?.message ?? String(e)}`, stack: e?.stack };
}

useIoPort(workerData.io);
// The event loop's thread goes first: this worker yields a core to it when
// both want one (on Linux a thread's nice value is its own; elsewhere, where
// it is the process's, nothing is changed).
if (process.platform === 'linux') {
  try {
    setPriority(0, WORKER_NICE);
  } catch {
    // not permitted: the worker runs at the process's priority
  }
}
let kernel;
try {
  // The server first (connect, schema): an unreachable one fails before
  // the component is loaded.
  let backend;
  try {
    backend = openStore(workerData.url, { connectionWait: workerData.connectionWait });
  } catch (e) {
    throw new GakError('storage', e.message, { cause: e });
  }
  kernel = await openKernel(backend, { component: workerData.component });
  parentPort.postMessage({ describe: kernel.store.describe() });
} catch (e) {
  parentPort.postMessage({ error: crossing(e) });
}

/**
 * A body that runs on the caller's thread while this one holds the
 * transaction (`writeFenced`, `withDownstream`): each run of the body (one
 * per attempt) is announced on the conversation's port; then this thread
 * serves the body's `get` / `put` / `query` requests, blocked on the shared
 * flag between them, until the body's end arrives ({done} or {threw}).
 */
function conversation({ port, flag: shared }) {
  const flag = new Int32Array(shared);
  let attempt = 0;
  const next = () => {
    for (;;) {
      const got = receiveMessageOnPort(port);
      if (got) return got.message;
      Atomics.store(flag, 0, 0);
      const again = receiveMessageOnPort(port);
      if (again) return again.message;
      Atomics.wait(flag, 0, 0);
    }
  };
  return (down) => {
    attempt += 1;
    port.postMessage({ run: attempt });
    for (;;) {
      const m = next();
      if ('done' in m) return m.done;
      if ('threw' in m) throw Object.assign(new Error(m.threw.message), { name: m.threw.name });
      let answer;
      try {
        if (m.op === 'get') answer = { value: down.get(m.key) };
        else if (m.op === 'put') answer = { value: down.put(m.key, m.value) };
        else if (m.op === 'query') answer = { value: down.query(m.sql, m.params) };
        else answer = { error: crossing(new GakError('invalid-input', `unknown body request ${JSON.stringify(m.op)}`)) };
      } catch (e) {
        answer = { error: e instanceof GakError ? crossing(e) : { code: e?.code, name: e?.name, message: String(e?.message ?? e), severity: e?.severity } };
      }
      port.postMessage({ seq: m.seq, ...answer });
    }
  };
}

if (kernel) {
  parentPort.on('message', ({ id, iface, name, args, body }) => {
    let reply;
    try {
      if (body) {
        const run = conversation(body);
        const value = name === 'withDownstream' ? kernel.withDownstream(run) : kernel.sideeffect.writeFenced(...args, run);
        body.port.close();
        reply = { id, value };
      } else {
        reply = { id, value: kernel[iface][name](...args) };
      }
    } catch (e) {
      body?.port.close();
      reply = { id, error: crossing(e) };
    }
    try {
      parentPort.postMessage(reply);
    } catch (e) {
      parentPort.postMessage({ id, error: crossing(new GakError('storage', `the answer cannot be sent back: ${e.message}`)) });
    }
  });
}
