// The typed API: refusals, argument checks before the call, results as
// JSON, runEffect, writeFenced, the Committer, lists, claim-next, prune.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  Committer,
  GakError,
  ManualClock,
  MemoryBackend,
  NotApplied,
  openKernel,
  stringify,
  toJSON,
} from '../src/index.js';

const text = (b) => new TextDecoder().decode(b);

async function fresh(at = 1000n) {
  const clock = new ManualClock(at);
  const store = new MemoryBackend();
  const kernel = await openKernel(store, { clock });
  return { kernel, clock, store };
}

function refused(fn, code) {
  assert.throws(fn, (e) => {
    assert.ok(e instanceof GakError, `not a GakError: ${e}`);
    assert.equal(e.code, code, e.message);
    return true;
  });
}

test('a refusal is a GakError with the kebab-case code and changes nothing', async () => {
  const { kernel, store } = await fresh();
  kernel.taskboard.seed([{ id: 'a' }]);
  kernel.taskboard.claim('a', 'w1', 100n);
  const before = store.dump();
  refused(() => kernel.taskboard.claim('a', 'w2', 100n), 'taken');
  refused(() => kernel.taskboard.release('a', '0'.repeat(32)), 'lease-lost');
  refused(() => kernel.checkpoint.load('never-ran'), 'not-found');
  assert.deepEqual(store.dump(), before);
  const e = new GakError('invalid-input', 'why');
  assert.deepEqual(JSON.parse(JSON.stringify(e)), { code: 'invalid-input', detail: 'why' });
});

test('bad arguments are refused before the call: nothing wraps, nothing is written', async () => {
  const { kernel, store } = await fresh();
  kernel.taskboard.seed([{ id: 'a' }]);
  const before = store.dump();
  // jco would turn 2^64 + 5 into 5 (a valid ttl) and 2^32 + 1 into 1 (a valid limit).
  refused(() => kernel.taskboard.claim('a', 'w', (1n << 64n) + 5n), 'invalid-input');
  refused(() => kernel.taskboard.claim('a', 'w', -1n), 'invalid-input');
  refused(() => kernel.taskboard.claim('a', 'w', 100), 'invalid-input');
  refused(() => kernel.taskboard.list({ limit: 2 ** 32 + 1 }), 'invalid-input');
  refused(() => kernel.taskboard.list({ limit: 1.5 }), 'invalid-input');
  // Two different JS strings that UTF-8 encoding would make one key.
  refused(() => kernel.sideeffect.acquire({ key: 'k\uD800', resource: 'r' }, 100n), 'invalid-input');
  refused(() => kernel.taskboard.claim(42, 'w', 100n), 'invalid-input');
  refused(() => kernel.sideeffect.acquire({ key: 'k', resource: 'r', retrySafety: 'maybe' }, 100n), 'invalid-input');
  refused(() => kernel.taskboard.seed([{ id: 'b', state: 'claimed' }]), 'invalid-input'); // the component's rule
  assert.deepEqual(store.dump(), before);
  // The instance is still good.
  assert.equal(kernel.taskboard.claim('a', 'w', 100n).fence, 1n);
});

test('numbers at or above 2^53 are the component\'s to refuse', async () => {
  const { kernel } = await fresh();
  refused(() => kernel.retention.prune(1n << 53n, 10), 'invalid-input');
  assert.deepEqual(kernel.retention.prune((1n << 53n) - 1n, 10), {
    removedKeys: 0,
    removedTasks: 0,
    removedRuns: 0,
    more: false,
  });
});

test('results hold bigint and bytes; toJSON makes them JSON', async () => {
  const { kernel } = await fresh();
  kernel.taskboard.seed([{ id: 'a', title: 'A' }]);
  const task = kernel.taskboard.claim('a', 'w', 100n);
  assert.equal(typeof task.fence, 'bigint');
  assert.equal(task.until, 1100n);
  assert.throws(() => JSON.stringify(task), TypeError);
  assert.deepEqual(JSON.parse(stringify(task)), { ...toJSON(task), fence: 1, until: 1100 });
  const a = kernel.sideeffect.acquire({ key: 'k', resource: 'r' }, 100n);
  kernel.sideeffect.complete({ key: 'k', resource: 'r' }, a.lease, 'hi');
  const replayed = kernel.sideeffect.acquire({ key: 'k', resource: 'r' }, 100n);
  assert.deepEqual(toJSON(replayed), { tag: 'replayed', result: Buffer.from('hi').toString('base64') });
});

test('runEffect: applied, then replayed without calling the body', async () => {
  const { kernel } = await fresh();
  const action = { key: 'mail/1', resource: 'smtp' };
  let calls = 0;
  const first = await kernel.runEffect(action, 100n, async (lease) => {
    calls++;
    assert.equal(lease.key, 'mail/1');
    return 'sent';
  });
  const second = await kernel.runEffect(action, 100n, () => {
    calls++;
    return 'again';
  });
  assert.equal(first.tag, 'applied');
  assert.equal(second.tag, 'replayed');
  assert.equal(text(second.result), 'sent');
  assert.equal(calls, 1);
});

test('runEffect: a failed body makes the key uncertain and releases the hold', async () => {
  const { kernel } = await fresh();
  const action = { key: 'pay/1', resource: 'card' };
  const boom = new Error('reset after sending');
  const ran = await kernel.runEffect(action, 100n, () => {
    throw boom;
  });
  assert.equal(ran.tag, 'uncertain');
  assert.equal(ran.error, boom);
  assert.equal(kernel.sideeffect.get('pay/1').state, 'uncertain');
  let called = false;
  const retry = await kernel.runEffect(action, 100n, () => (called = true));
  assert.deepEqual([retry.tag, called], ['uncertain', false]);
  // The hold was released: another key gets the resource.
  assert.equal(kernel.sideeffect.acquire({ key: 'pay/2', resource: 'card' }, 100n).tag, 'granted');
});

test('runEffect: NotApplied abandons the key, which runs again', async () => {
  const { kernel } = await fresh();
  const action = { key: 'pay/3', resource: 'card' };
  const ran = await kernel.runEffect(action, 100n, () => {
    throw new NotApplied('card declined before sending');
  });
  assert.equal(ran.tag, 'not-applied');
  assert.equal(kernel.sideeffect.get('pay/3').state, 'cleared');
  const again = await kernel.runEffect(action, 100n, () => 'charged');
  assert.equal(again.tag, 'applied');
});

test('runEffect: in-flight and contended do not call the body', async () => {
  const { kernel } = await fresh();
  kernel.sideeffect.acquire({ key: 'k1', resource: 'r' }, 100n);
  const body = () => assert.fail('must not run');
  assert.equal((await kernel.runEffect({ key: 'k1', resource: 'r' }, 100n, body)).tag, 'in-flight');
  const c = await kernel.runEffect({ key: 'k2', resource: 'r' }, 100n, body);
  assert.deepEqual(c, { tag: 'contended', until: 1100n });
});

test('writeFenced: the body writes in the fence compare\'s transaction', async () => {
  const { kernel } = await fresh();
  const se = kernel.sideeffect;
  se.writeFenced('ledger', 3n, (down) => down.put('row', 'one'));
  assert.equal(se.sinkSeen('ledger'), 3n);
  let ran = false;
  refused(() => se.writeFenced('ledger', 2n, () => (ran = true)), 'fence-stale');
  assert.equal(ran, false);
  const boom = new Error('downstream said no');
  assert.throws(
    () =>
      se.writeFenced('ledger', 4n, (down) => {
        down.put('row', 'two');
        throw boom;
      }),
    (e) => e instanceof GakError && e.code === 'write-failed' && e.cause === boom,
  );
  refused(() => se.writeFenced('ledger', 5n, async (down) => down.put('row', 'three')), 'write-failed');
  assert.equal(se.sinkSeen('ledger'), 3n);
  assert.equal(kernel.withDownstream((down) => down.get('row')), 'one');
});

test('no kernel call from inside a transaction (it would need a second one)', async () => {
  const { kernel } = await fresh();
  kernel.taskboard.seed([{ id: 'a' }]);
  assert.throws(
    () => kernel.sideeffect.writeFenced('s', 1n, () => kernel.taskboard.claim('a', 'w', 100n)),
    (e) => e.code === 'write-failed' && e.cause?.code === 'invalid-input',
  );
  assert.equal(kernel.taskboard.get('a').state, 'open');
  assert.equal(kernel.sideeffect.sinkSeen('s'), 0n);
});

test('Committer and buildPlan: resume skips only the trusted steps', async () => {
  const { kernel } = await fresh();
  const steps = [
    { id: 'a', dependsOn: [] },
    { id: 'b', dependsOn: ['a'] },
    { id: 'c', dependsOn: ['b'] },
  ];
  const c = Committer.resume(kernel, 'run-1', 1n);
  c.stepDone('a');
  c.stepDone('b');
  const resumed = Committer.resume(kernel, 'run-1', 2n);
  assert.equal(resumed.snapshot.seq, 2n);
  assert.deepEqual(kernel.checkpoint.buildPlan(steps, resumed.snapshot), { skip: ['a', 'b'], run: ['c'], untrusted: [] });
  resumed.stepDone('c');
  assert.throws(() => c.stepDone('c'), (e) => e.code === 'fence-stale');
  refused(() => kernel.checkpoint.buildPlan([{ id: 'x', dependsOn: ['x'] }]), 'invalid-plan');
  kernel.checkpoint.saveIfNewer({ runId: 'run-2', seq: 1n, status: 's', done: [], fields: { b: '2', a: '1', é: '3' } });
  assert.deepEqual(kernel.checkpoint.load('run-2').fields, [['a', '1'], ['b', '2'], ['é', '3']]);
});

test('lists page in byte order; claimNext takes the first-seeded ready task', async () => {
  const { kernel } = await fresh();
  // Byte order of UTF-8, not JavaScript's UTF-16 order (which puts the astral 😀 before U+FFFD).
  const ids = ['b', 'a', '\uFFFD', '😀', 'é'];
  kernel.taskboard.seed(ids.map((id) => ({ id })));
  const first = kernel.taskboard.list({ limit: 3 });
  assert.deepEqual(first.items.map((t) => t.id), ['a', 'b', 'é']);
  assert.equal(first.next, 'é');
  const rest = kernel.taskboard.list({ after: first.next, limit: 3 });
  assert.deepEqual(rest.items.map((t) => t.id), ['\uFFFD', '😀']);
  assert.equal(rest.next, undefined);
  assert.equal(kernel.taskboard.claimNext('w', 100n).id, 'b');
  assert.equal(kernel.taskboard.list({ state: 'claimed', limit: 10 }).items[0].token, undefined);
  assert.equal(kernel.taskboard.get('b').owner, 'w');
});

test('prune removes completed keys; the dry run removes nothing', async () => {
  const { kernel, clock } = await fresh();
  const a = kernel.sideeffect.acquire({ key: 'k', resource: 'r' }, 100n);
  kernel.sideeffect.complete({ key: 'k', resource: 'r' }, a.lease, 'x');
  clock.advance(10n);
  assert.equal(kernel.retention.pruneDryRun(1_005n, 10).removedKeys, 1);
  assert.equal(kernel.sideeffect.get('k').state, 'completed');
  assert.equal(kernel.retention.prune(1_005n, 10).removedKeys, 1);
  refused(() => kernel.sideeffect.get('k'), 'not-found');
});
