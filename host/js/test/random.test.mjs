// HOSTS.md rule 7: tokens and holders come from the operating system's
// CSPRNG (gak:kernel@0.4.0: the entropy `store.read` hands over), and no
// two processes or threads ever hand out the same bytes (a zombie's
// `complete` would otherwise be accepted under its successor's token). Node cannot fork a live process; what can share memory is worker
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
import { MAX_ENTROPY, entropy, poolBytes, poolState, randomU64 } from '../src/wasi.js';

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

/** Stand in a copy of this process's memory: the same pool, another pid. */
function anotherPid(t) {
  const pid = Object.getOwnPropertyDescriptor(process, 'pid');
  t.after(() => Object.defineProperty(process, 'pid', pid));
  Object.defineProperty(process, 'pid', { ...pid, value: process.pid + 1 });
}

test('a pool filled in another process is never drawn from: a new pid refills it', (t) => {
  randomU64();
  while (poolState().next > 4000) randomU64(); // not about to refill anyway
  const { owner, next } = poolState();
  assert.equal(owner, process.pid);
  anotherPid(t);
  randomU64();
  assert.deepEqual(poolState(), { owner: process.pid, next: 8 }, `refilled (was at ${next})`);
});

test('entropy: a new pid refills the pool before the next bytes are handed out', (t) => {
  entropy(16);
  while (poolState().next > 4000) entropy(16);
  anotherPid(t);
  entropy(16);
  assert.deepEqual(poolState(), { owner: process.pid, next: 16 });
});

test('entropy hands out each byte once, as a copy, and zeroes it in the pool', () => {
  const seen = new Set();
  // Several refills of the 4 KiB pool, in sizes that do not divide it.
  for (let i = 0; i < 1000; i++) {
    const n = [16, 32, 7, MAX_ENTROPY][i % 4];
    const from = poolState().next;
    const bytes = entropy(n);
    assert.ok(bytes instanceof Uint8Array && bytes.length === n);
    assert.equal(bytes.buffer.byteLength, n, 'a view of the pool, not a copy');
    const to = poolState().next;
    const at = to - n === from ? from : 0; // or the pool was refilled first
    assert.equal(to, at + n);
    assert.ok(poolBytes().subarray(at, to).every((b) => b === 0), 'handed-out bytes left in the pool');
    const h = Buffer.from(bytes).toString('hex');
    if (n >= 16) {
      assert.ok(!seen.has(h), 'the same bytes twice');
      seen.add(h);
    }
  }
  assert.equal(entropy(0).length, 0);
  for (const n of [MAX_ENTROPY + 1, 255, -1, 1.5]) assert.throws(() => entropy(n), RangeError, String(n));
});

test('u64 draws and entropy share the pool without overlapping', () => {
  // Interleaved: a u64 after an odd-sized slice starts on the next word.
  const words = new Set();
  for (let i = 0; i < 2000; i++) {
    entropy(7);
    const w = randomU64();
    assert.ok(!words.has(w));
    words.add(w);
    assert.ok(poolState().next % 8 === 0);
  }
});
