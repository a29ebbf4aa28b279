// HOSTS.md rules 3 and 4, the written retry rule every host follows (the
// shared cases in tests/host-protocol/transactions.json count the
// transactions; these time the pauses): at most 10 runs, pausing between
// them an exponentially growing, jittered time from 1 ms to ~0.5 s.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MAX_ATTEMPTS, RETRY_BASE_MS, RETRY_MAX_MS, retryDelay } from '../src/engine.js';
import { GakError, ManualClock, openKernel } from '../src/index.js';
import { ScriptedBackend } from './fixtures/scripted.mjs';

test('the pause after run n is half of min(2^(n-1) ms, 500 ms), plus up to as much again at random', () => {
  assert.deepEqual([MAX_ATTEMPTS, RETRY_BASE_MS, RETRY_MAX_MS], [10, 1, 500]);
  for (let n = 1; n <= 20; n++) {
    const step = Math.min(2 ** (n - 1), 500);
    assert.equal(retryDelay(n, () => 0), step / 2, `run ${n}, no jitter`);
    assert.equal(retryDelay(n, () => 0.999999), step / 2 + 0.999999 * (step / 2), `run ${n}, most jitter`);
  }
  assert.equal(retryDelay(1, () => 0), 0.5);
  assert.equal(retryDelay(9, () => 0), 128);
  assert.equal(retryDelay(10, () => 0), 250);
});

test('conflicts that persist: 10 runs, 9 pauses, ~0.26-0.5 s in all, then storage', async () => {
  const store = new ScriptedBackend();
  const kernel = await openKernel(store, { clock: new ManualClock(1000n) });
  kernel.taskboard.seed([{ id: 'a' }]);
  store.script([{ on: 'begin', answer: 'conflict', times: 'all' }]);
  const started = performance.now();
  assert.throws(
    () => kernel.taskboard.claim('a', 'w', 100n),
    (e) => e instanceof GakError && e.code === 'storage' && /10 attempts/.test(e.message),
  );
  const ms = performance.now() - started;
  const least = Array.from({ length: 9 }, (_, i) => retryDelay(i + 1, () => 0)).reduce((a, b) => a + b);
  assert.ok(ms >= least, `${ms} ms, at least ${least} expected`);
  assert.ok(ms < 2 * least + 1000, `${ms} ms`);
  assert.deepEqual(store.tx, { begin: 10, commit: 0, rollback: 0 });
});

test('a commit that failed, or whose acknowledgement was lost, leaves nothing open', async () => {
  for (const answer of ['failure', 'lost', 'conflict']) {
    const store = new ScriptedBackend();
    const kernel = await openKernel(store, { clock: new ManualClock(1000n) });
    store.script([{ on: 'commit', answer, times: answer === 'conflict' ? 'all' : 1 }]);
    assert.throws(() => kernel.taskboard.seed([{ id: 'a' }]), (e) => e.code === 'storage', answer);
    store.script();
    kernel.taskboard.seed([{ id: 'b' }]); // a new transaction opens at once
    assert.deepEqual(store.tx, { begin: 1, commit: 1, rollback: 0 }, answer);
  }
});
