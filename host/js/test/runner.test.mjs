// The side-effect runner beyond the shared cases (tests/host-protocol/runner.json):
// the heartbeat's surface, what the renewals present and when they stop, a
// renewal failing with `storage`, an answer the runner does not know, and
// what a synchronous body gives up.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { GakError, Heartbeat, Runner, SystemClock, openKernel } from '../src/index.js';

const action = (key) => ({ key, resource: `res-${key}` });

/** A kernel on the system clock whose `sideeffect` calls are recorded. */
async function watched() {
  const kernel = await openKernel('memory:', { clock: new SystemClock() });
  const se = kernel.sideeffect;
  const calls = [];
  for (const name of ['renew', 'complete', 'markUncertain', 'release', 'abandon']) {
    const real = se[name].bind(se);
    se[name] = (...args) => {
      const call = { name, at: Date.now(), lease: args[1] };
      calls.push(call);
      call.result = real(...args);
      return call.result;
    };
  }
  return { kernel, calls };
}

async function waitFor(heartbeat, ready) {
  const deadline = Date.now() + 10_000;
  while (!ready()) {
    assert.ok(Date.now() < deadline, 'the heartbeat never changed');
    await Promise.race([heartbeat.changed(), sleep(50)]);
  }
}

test('the hold is renewed while an async body runs; complete presents the last renewed lease', async () => {
  const { kernel, calls } = await watched();
  let seen;
  const ran = await kernel.runEffect(action('k1'), 150n, async (lease, heartbeat) => {
    assert.ok(heartbeat instanceof Heartbeat);
    assert.deepEqual(heartbeat.lease, lease);
    await waitFor(heartbeat, () => heartbeat.renewals >= 2);
    heartbeat.check(); // not lost: does not throw
    seen = heartbeat.lease;
    return 'done';
  });
  assert.equal(ran.tag, 'applied');
  assert.deepEqual(seen, calls.findLast((c) => c.name === 'renew').result);
  assert.ok(seen.until > calls.find((c) => c.name === 'renew').lease.until, 'a renewal moved the lease on');
  const complete = calls.find((c) => c.name === 'complete');
  assert.deepEqual(complete.lease, seen);
  // No renewal after the verdict, even long after.
  await sleep(200);
  assert.ok(calls.filter((c) => c.name === 'renew').every((c) => c.at <= complete.at));
  assert.equal(calls.at(-1).name, 'complete');
  assert.equal(kernel.sideeffect.get('k1').state, 'completed');
});

test('renewals stop before mark-uncertain when the body fails', async () => {
  const { kernel, calls } = await watched();
  const boom = new Error('reset after sending');
  const ran = await kernel.runEffect(action('k2'), 90n, async (lease, heartbeat) => {
    await waitFor(heartbeat, () => heartbeat.renewals >= 1);
    throw boom;
  });
  assert.deepEqual([ran.tag, ran.reason, ran.error], ['uncertain', 'body failed', boom]);
  await sleep(150);
  const names = calls.map((c) => c.name);
  assert.deepEqual(names.slice(names.indexOf('markUncertain')), ['markUncertain', 'release']);
  // The verdict presented the renewed lease, not the first.
  assert.deepEqual(calls.find((c) => c.name === 'markUncertain').lease, calls.findLast((c) => c.name === 'renew').result);
});

test('a renewal failing with storage is retried at the next tick; a refusal is the loss', async () => {
  const { kernel } = await watched();
  const se = kernel.sideeffect;
  const renew = se.renew;
  let failures = 1;
  se.renew = (...args) => {
    if (failures > 0) {
      failures--;
      throw new GakError('storage', 'the database went away for a moment');
    }
    return renew(...args);
  };
  const run = kernel.runEffect(action('k3'), 300n, async (lease, heartbeat) => {
    await waitFor(heartbeat, () => heartbeat.renewals >= 1);
    assert.equal(failures, 0, 'the first renewal failed');
    assert.equal(heartbeat.refusal, undefined, 'a storage failure is not a loss');
    // Another verdict ends the attempt: the next renewal is refused.
    se.markUncertain(action('k3'), heartbeat.lease, 'taken away');
    await waitFor(heartbeat, () => heartbeat.refusal !== undefined);
    assert.throws(() => heartbeat.check(), (e) => e instanceof GakError && e.code === 'lease-lost');
    const renewals = heartbeat.renewals;
    await sleep(250);
    assert.equal(heartbeat.renewals, renewals, 'no renewal after the loss');
    await heartbeat.changed(); // resolves at once once lost
    return 'late'; // returned anyway: complete is refused, and that is the answer
  });
  await assert.rejects(run, (e) => e instanceof GakError && e.code !== 'storage');
  assert.deepEqual(kernel.sideeffect.get('k3').reason, 'taken away');
});

test('an acquire answer the runner does not know is an error; the body is not called', async () => {
  const kernel = await openKernel('memory:');
  kernel.sideeffect.acquire = () => ({ tag: 'postponed' });
  let called = false;
  await assert.rejects(
    kernel.runEffect(action('k5'), 1000n, () => (called = true)),
    (e) => e instanceof GakError && e.code === 'storage',
  );
  assert.equal(called, false);
});

test('Runner: a custom interval, no renewals, and argument checks', async () => {
  const { kernel, calls } = await watched();
  const fast = new Runner(kernel, 60_000n, { every: 20 });
  const ran = await fast.run(action('k6'), async (lease, heartbeat) => {
    await waitFor(heartbeat, () => heartbeat.renewals >= 2);
    return 'ok';
  });
  assert.equal(ran.tag, 'applied');
  const never = new Runner(kernel, 60_000n, { every: null });
  await never.run(action('k7'), async () => {
    await sleep(60);
    return 'ok';
  });
  assert.equal(calls.filter((c) => c.name === 'renew' && c.lease.key === 'k7').length, 0);
  assert.throws(() => new Runner(kernel, 100), (e) => e.code === 'invalid-input');
  assert.throws(() => new Runner(kernel, 100n, { every: 0 }), (e) => e.code === 'invalid-input');
  await assert.rejects(kernel.runEffect(action('k8'), 100, () => 'x'), (e) => e.code === 'invalid-input');
});

test('a synchronous body cannot be renewed (it holds the event loop)', async () => {
  const { kernel, calls } = await watched();
  let renewals;
  const run = kernel.runEffect(action('k9'), 30n, (lease, heartbeat) => {
    const until = Date.now() + 100; // more than 3 intervals, never yielding
    while (Date.now() < until);
    renewals = heartbeat.renewals;
    return 'sync';
  });
  // Its lease expired meanwhile, unrenewed; what `complete` answers then is
  // the kernel's judgement, not the runner's.
  await run.catch(() => {});
  assert.equal(renewals, 0);
  assert.equal(calls.filter((c) => c.name === 'renew').length, 0);
});
