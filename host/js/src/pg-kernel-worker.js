// One kernel worker of `PostgresKernel` (./pg-kernel.js): a blocking kernel
// on its own connection, answering the calls the main thread posts, one at a
// time. Its store requests wait for the I/O thread (./store/pg-io.js) with
// `Atomics.wait`: this thread blocks, the main thread never does.
import { setPriority } from 'node:os';
import { parentPort, workerData } from 'node:worker_threads';
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

if (kernel) {
  parentPort.on('message', ({ id, iface, name, args }) => {
    let reply;
    try {
      reply = { id, value: kernel[iface][name](...args) };
    } catch (e) {
      reply = { id, error: crossing(e) };
    }
    try {
      parentPort.postMessage(reply);
    } catch (e) {
      parentPort.postMessage({ id, error: crossing(new GakError('storage', `the answer cannot be sent back: ${e.message}`)) });
    }
  });
}
