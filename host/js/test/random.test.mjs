// HOSTS.md rule 7: tokens and holders come from the operating system's
// CSPRNG, and no two processes or threads ever hand out the same ones (a
// zombie's `complete` would otherwise be accepted under its successor's
// token). Node cannot fork a live process; what can share memory is worker
// threads (each loads its own copy of src/wasi.js and its pool) and,
// conceivably, a process started from a copy of another's memory (a startup
// snapshot): the pool is refilled when the process id changes.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { openKernel } from '../src/index.js';
import { poolState, randomU64 } from '../src/wasi.js';

const MINT = fileURLToPath(new URL('./fixtures/tokens.mjs', import.meta.url));
const COUNT = 50;

function inWorker() {
  return new Promise((resolve, reject) => {
    const worker = new Worker(MINT, { workerData: { count: COUNT } });
    worker.once('message', resolve);
    worker.once('error', reject);
  });
}

async function inChild() {
  const { stdout } = await promisify(execFile)(process.execPath, [MINT, String(COUNT)]);
  return JSON.parse(stdout);
}

function assertDistinct(batches) {
  const all = batches.flat();
  assert.equal(all.length, batches.length * COUNT * 2);
  for (const t of all) assert.match(t, /^[0-9a-f]{32}$/);
  assert.equal(new Set(all).size, all.length, 'two tokens or holders repeat');
}

test('tokens minted in several worker threads, and in this one, are all distinct', async () => {
  const batches = await Promise.all([inWorker(), inWorker(), inWorker(), inWorker()]);
  const kernel = await openKernel('memory:');
  kernel.taskboard.seed([{ id: 'here' }]);
  const here = [kernel.taskboard.claim('here', 'w', 60_000n).token];
  assertDistinct(batches);
  for (const t of here) assert.ok(!batches.flat().includes(t));
});

test('tokens minted in several child processes of one parent are all distinct', async () => {
  assertDistinct(await Promise.all([inChild(), inChild(), inChild()]));
});

test('a pool filled in another process is never drawn from: a new pid refills it', (t) => {
  randomU64();
  while (poolState().next > 500) randomU64(); // not about to refill anyway
  const { owner, next } = poolState();
  assert.equal(owner, process.pid);
  const pid = Object.getOwnPropertyDescriptor(process, 'pid');
  t.after(() => Object.defineProperty(process, 'pid', pid));
  // What a copy of this process's memory would see: the same pool, another pid.
  Object.defineProperty(process, 'pid', { ...pid, value: process.pid + 1 });
  randomU64();
  assert.deepEqual(poolState(), { owner: process.pid, next: 1 }, `refilled (was at ${next})`);
});
