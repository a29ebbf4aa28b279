// The queue worker (src/worker.js; HOSTS.md "The queue worker"): its
// back-off and reasons, its options, the bound on handlers at once, the
// loop of `run` (idle polls, a stop cutting the wait short, store failures
// gone on after), a stop with handlers running, and lost results. The
// shared cases (tests/host-protocol/workers.json) are replayed by
// host-protocol.test.mjs.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { DEFAULT_BACKOFF, GakError, ManualClock, Worker, backoffDelay, failReason, openKernel } from '../src/index.js';
import { MAX_DELAY, reasonOf, unit } from '../src/worker.js';

const worked = (claimed, completed, failed, released, lost) => ({ claimed, completed, failed, released, lost });

test('back-off doubles, is capped, and jitter only shortens', () => {
  const b = { base: 1_000, max: 5_000, jitter: 0 };
  assert.deepEqual([1, 2, 3, 4, 5].map((n) => backoffDelay(b, n, 0.7)), [1_000, 2_000, 4_000, 5_000, 5_000]);
  assert.equal(backoffDelay(b, 0, 0), 1_000);
  assert.equal(backoffDelay(b, 2 ** 32 - 1, 0), 5_000);
  const j = { ...b, jitter: 0.5 };
  assert.equal(backoffDelay(j, 1, 0), 1_000);
  assert.equal(backoffDelay(j, 1, 0.5), 750);
  const d = backoffDelay(j, 3, 0.999_999);
  assert.ok(d >= 2_000 && d <= 4_000 && Number.isInteger(d), String(d));
  assert.equal(backoffDelay({ base: Number.MAX_SAFE_INTEGER, max: Number.MAX_SAFE_INTEGER, jitter: 0 }, 60, 0), MAX_DELAY);
  assert.equal(backoffDelay({ base: 0, max: 10, jitter: 1 }, 2_000, 0.9), 0);
  assert.deepEqual(DEFAULT_BACKOFF, { base: 1_000, max: 3_600_000, jitter: 0.2 });
});

test('CSPRNG draws stay in [0, 1)', () => {
  for (let i = 0; i < 1000; i++) {
    const u = unit();
    assert.ok(u >= 0 && u < 1, String(u));
  }
});

test('reasons are cut at a character boundary, without NUL or lone surrogates', () => {
  assert.equal(failReason('a\0b'), 'a\uFFFDb');
  assert.equal(failReason('é'.repeat(3_000)), 'é'.repeat(2_048));
  assert.equal(Buffer.byteLength(failReason('x'.repeat(5_000))), 4_096);
  assert.equal(Buffer.byteLength(failReason('\0'.repeat(2_000))), 4_095);
  assert.equal(failReason('😀'.repeat(1_025)), '😀'.repeat(1_024));
  assert.equal(failReason('a\uD800b\uDC00'), 'a\uFFFDb\uFFFD');
  assert.equal(failReason(''), '');
});

test('a thrown Error gives its message; any other thrown value is a panic', () => {
  assert.equal(reasonOf(new Error('boom')), 'boom');
  assert.equal(reasonOf(new GakError('taken')), 'taken');
  assert.equal(reasonOf('boom'), 'panicked: boom');
  assert.equal(reasonOf(undefined), 'panicked: undefined');
  assert.equal(reasonOf(42), 'panicked: 42');
  assert.equal(reasonOf({ message: 'not an Error' }), 'panicked: [object Object]');
  assert.equal(reasonOf(Object.create(null)), 'panicked: [object Object]');
  assert.equal(Buffer.byteLength(reasonOf(`x\0${'y'.repeat(5000)}`)), 4_096);
});

test('bad options are refused with invalid-input', async () => {
  const kernel = await openKernel('memory:');
  try {
    const bad = (options) =>
      assert.throws(() => new Worker(kernel, options), (e) => e instanceof GakError && e.code === 'invalid-input', String(Object.entries(options)));
    bad({});
    bad({ agent: 1 });
    for (const batch of [0, 1001, 1.5, '10', 10n]) bad({ agent: 'w', batch });
    for (const concurrency of [0, -1, 2.5]) bad({ agent: 'w', concurrency });
    for (const ttl of [-1, 1.5, -1n, 2n ** 53n, '30000']) bad({ agent: 'w', ttl });
    for (const backoff of [null, 5, { jitter: 2 }, { jitter: -0.1 }, { base: -1 }, { max: 0.5 }]) bad({ agent: 'w', backoff });
    bad({ agent: 'w', onError: 'log' });
    assert.throws(() => new Worker(undefined, { agent: 'w' }), /invalid-input/);
    const w = new Worker(kernel, { agent: 'w', batch: 4, ttl: 9_000n, backoff: { max: 10 } });
    assert.deepEqual(w.options, { agent: 'w', batch: 4, ttl: 9_000, concurrency: 4, idle: 1_000, backoff: { base: 1_000, max: 10, jitter: 0.2 } });
    await assert.rejects(w.runUntilIdle('not a function'), /invalid-input/);
  } finally {
    kernel.close();
  }
});

test('handlers run in claim order, at most `concurrency` at once, each with its task and token', async () => {
  const kernel = await openKernel('memory:');
  try {
    kernel.taskboard.seed(['a', 'b', 'c', 'd', 'e', 'f', 'g'].map((id) => ({ id })));
    const order = [];
    let running = 0;
    let most = 0;
    const worker = new Worker(kernel, { agent: 'w', batch: 5, concurrency: 2 });
    const got = await worker.runUntilIdle(async (task) => {
      assert.equal(task.owner, 'w');
      assert.match(task.token, /^[0-9a-f]{32}$/);
      order.push(task.id);
      running += 1;
      most = Math.max(most, running);
      await sleep(task.id === 'a' ? 30 : 5);
      running -= 1;
    });
    assert.deepEqual(got, worked(7, 7, 0, 0, 0));
    assert.deepEqual(order, ['a', 'b', 'c', 'd', 'e', 'f', 'g']);
    assert.equal(most, 2);
    assert.equal(kernel.taskboard.list({ state: 'done', limit: 10 }).items.length, 7);
  } finally {
    kernel.close();
  }
});

test('a failure is due again after a jittered back-off that only shortens', async () => {
  const clock = new ManualClock(10_000n);
  const kernel = await openKernel('memory:', { clock });
  try {
    kernel.taskboard.seed([{ id: 'x' }]);
    const worker = new Worker(kernel, { agent: 'w', backoff: { base: 1_000, max: 8_000, jitter: 0.5 } });
    assert.deepEqual(await worker.runUntilIdle(() => Promise.reject(new Error('no'))), worked(1, 0, 1, 0, 0));
    const x = kernel.taskboard.get('x');
    assert.equal(x.state, 'failed');
    assert.equal(x.lastError, 'no');
    assert.ok(x.notBefore > 10_500n && x.notBefore <= 11_000n, String(x.notBefore));
  } finally {
    kernel.close();
  }
});

test('a stop with handlers running lets them finish, reports them, and releases the unstarted', async () => {
  const kernel = await openKernel('memory:');
  try {
    kernel.taskboard.seed(['a', 'b', 'c', 'd', 'e'].map((id) => ({ id })));
    const worker = new Worker(kernel, { agent: 'w', batch: 5, concurrency: 2 });
    const called = [];
    const got = await worker.runUntilIdle(async (task) => {
      called.push(task.id);
      if (task.id === 'a') {
        await sleep(5); // b starts meanwhile
        worker.stop();
        return;
      }
      await sleep(30); // b is running when a stops the worker
      throw new Error('b fails after the stop');
    });
    assert.deepEqual(called, ['a', 'b']);
    assert.deepEqual(got, worked(5, 1, 1, 3, 0));
    assert.equal(kernel.taskboard.get('b').state, 'failed');
    for (const id of ['c', 'd', 'e']) {
      const t = kernel.taskboard.get(id);
      assert.equal(t.state, 'open');
      assert.equal(t.attempts, 0);
    }
    assert.ok(worker.stopped);
    assert.deepEqual(await worker.run(() => {}), worked(0, 0, 0, 0, 0));
  } finally {
    kernel.close();
  }
});

test('a failure whose claim was lost is counted lost, not failed', async () => {
  const clock = new ManualClock(1_000n);
  const kernel = await openKernel('memory:', { clock });
  try {
    kernel.taskboard.seed([{ id: 'a' }]);
    const worker = new Worker(kernel, { agent: 'w', ttl: 1_000 });
    const got = await worker.runUntilIdle(async (task) => {
      clock.advance(1_000);
      kernel.taskboard.claim(task.id, 'thief', 1_000n);
      throw new Error('too late');
    });
    assert.deepEqual(got, worked(1, 0, 0, 0, 1));
    const a = kernel.taskboard.get('a');
    assert.equal(a.owner, 'thief');
    assert.equal(a.lastError, undefined);
  } finally {
    kernel.close();
  }
});

test('a long handler keeps its claim: renewed by a timer every ttl / 3', async () => {
  const kernel = await openKernel('memory:');
  try {
    kernel.taskboard.seed([{ id: 'slow' }]);
    // Renewals every 200 ms of a 600 ms claim: a tick may come 400 ms late.
    const worker = new Worker(kernel, { agent: 'w', ttl: 600 });
    let first;
    let later;
    const got = await worker.runUntilIdle(async (task) => {
      first = task.until;
      await sleep(1_300);
      later = kernel.taskboard.get('slow').until;
    });
    assert.deepEqual(got, worked(1, 1, 0, 0, 0));
    assert.ok(later > first + 300n, `until ${first} -> ${later}`);
  } finally {
    kernel.close();
  }
});

test('run polls an idle board until stopped, and a stop cuts the idle wait short', async () => {
  const kernel = await openKernel('memory:');
  try {
    const worker = new Worker(kernel, { agent: 'w', idle: 20 });
    const seen = [];
    const running = worker.run(async (task) => {
      seen.push(task.id);
    });
    await sleep(50);
    kernel.taskboard.seed([{ id: 'late' }]);
    const deadline = Date.now() + 5_000;
    while (seen.length === 0 && Date.now() < deadline) await sleep(10);
    assert.deepEqual(seen, ['late']);
    const slow = new Worker(kernel, { agent: 'v', idle: 60_000 });
    const waiting = slow.run(() => {});
    await sleep(20);
    const stopAt = Date.now();
    slow.stop();
    worker.stop();
    assert.deepEqual(await waiting, worked(0, 0, 0, 0, 0));
    assert.ok(Date.now() - stopAt < 1_000);
    assert.deepEqual(await running, worked(1, 1, 0, 0, 0));
  } finally {
    kernel.close();
  }
});

/** A kernel stand-in whose claim-batch fails with `storage` the first `n` times. */
function flaky(kernel, n) {
  let left = n;
  const board = kernel.taskboard;
  return {
    taskboard: {
      claimBatch(...a) {
        if (left > 0) {
          left -= 1;
          throw new GakError('storage', 'the disk is away');
        }
        return board.claimBatch(...a);
      },
      completeBatch: (...a) => board.completeBatch(...a),
      fail: (...a) => board.fail(...a),
      release: (...a) => board.release(...a),
      renew: (...a) => board.renew(...a),
    },
  };
}

test('run goes on after a store failure (told to onError); runUntilIdle rejects with it', async () => {
  const kernel = await openKernel('memory:');
  try {
    kernel.taskboard.seed([{ id: 'a' }]);
    await assert.rejects(new Worker(flaky(kernel, 1), { agent: 'w' }).runUntilIdle(() => {}), (e) => e instanceof GakError && e.code === 'storage');
    const errors = [];
    const worker = new Worker(flaky(kernel, 2), { agent: 'w', idle: 5, onError: (e) => errors.push(e.code) });
    const running = worker.run(() => worker.stop());
    assert.deepEqual(await running, worked(1, 1, 0, 0, 0));
    assert.deepEqual(errors, ['storage', 'storage']);
    // Anything but storage ends `run` too.
    const broken = { taskboard: { claimBatch: () => { throw new GakError('invalid-input', 'agent'); } } };
    await assert.rejects(new Worker(broken, { agent: 'w' }).run(() => {}), /invalid-input/);
  } finally {
    kernel.close();
  }
});
