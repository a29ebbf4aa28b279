// HOSTS.md rule 16: a call whose string or bytes argument is longer than
// 1 MiB, whose list holds more than 10,000 items, or whose strings and bytes
// total more than 64 MiB is refused with `invalid-input` before anything is
// lowered into the component and before a transaction opens. The shared
// case (tests/host-protocol/inputs.json) replays in host-protocol.test.mjs;
// these watch the component's exports directly, and take each bound apart.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { GakError, Kernel, ManualClock, loadComponent } from '../src/index.js';
import { ScriptedBackend } from './fixtures/scripted.mjs';

const MiB = 1 << 20;

/** A kernel on the scripted store whose component records every export it is called with. */
async function watched() {
  const component = await loadComponent();
  const exported = [];
  const watch = (iface, obj) =>
    new Proxy(obj, {
      get(target, name) {
        const f = target[name];
        return typeof f === 'function' ? (...args) => (exported.push(`${iface}.${String(name)}`), f.apply(target, args)) : f;
      },
    });
  const counted = {
    ...component,
    instantiate(imports) {
      const ex = component.instantiate(imports);
      return Object.fromEntries(Object.entries(ex).map(([iface, obj]) => [iface, watch(iface, obj)]));
    },
  };
  const store = new ScriptedBackend();
  const kernel = new Kernel(counted, store, new ManualClock(1000n));
  return { kernel, store, exported };
}

/** `fn` is refused as invalid-input with no export called and no transaction begun. */
function refusedBeforeLowering({ store, exported }, fn, what) {
  store.script();
  exported.length = 0;
  assert.throws(fn, (e) => e instanceof GakError && e.code === 'invalid-input', what);
  assert.deepEqual(exported, [], `${what}: an export was called`);
  assert.deepEqual(store.tx, { begin: 0, commit: 0, rollback: 0 }, what);
}

/** `fn` reaches the component (whatever it then answers). */
function reachesTheComponent({ store, exported }, fn, what) {
  store.script();
  exported.length = 0;
  try {
    fn();
  } catch (e) {
    assert.ok(e instanceof GakError, `${what}: ${e}`);
  }
  assert.ok(exported.length > 0, `${what}: no export was called`);
}

test('a string or bytes argument over 1 MiB is refused before lowering; 1 MiB is the component\'s', async () => {
  const w = await watched();
  const { kernel } = w;
  const action = { key: 'k', resource: 'r' };
  const { lease } = kernel.sideeffect.acquire(action, 60_000n);
  refusedBeforeLowering(w, () => kernel.sideeffect.complete(action, lease, new Uint8Array(MiB + 1)), 'bytes');
  refusedBeforeLowering(w, () => kernel.sideeffect.complete(action, lease, 'x'.repeat(MiB + 1)), 'bytes as a string');
  refusedBeforeLowering(w, () => kernel.sideeffect.complete(action, lease, 'x'.repeat(48 * MiB)), '48 MiB');
  // 349,526 three-byte characters: under 1 Mi UTF-16 units, over 1 MiB of UTF-8.
  refusedBeforeLowering(w, () => kernel.sideeffect.markUncertain(action, lease, '€'.repeat(349_526)), 'UTF-8 length');
  refusedBeforeLowering(w, () => kernel.taskboard.get('t'.repeat(2 * MiB)), 'an id');
  // build-plan is pure and an overlong step id is its invalid-plan (SPEC 8).
  reachesTheComponent(w, () => kernel.checkpoint.buildPlan([{ id: 's'.repeat(MiB + 1) }]), 'a step id (pure)');
  reachesTheComponent(w, () => kernel.sideeffect.markUncertain(action, lease, '€'.repeat(349_525)), '1 MiB - 1 of UTF-8');
  reachesTheComponent(w, () => kernel.sideeffect.complete(action, lease, new Uint8Array(MiB)), 'exactly 1 MiB');
});

test('a list over 10,000 items is refused before lowering; 10,000 is the component\'s', async () => {
  const w = await watched();
  const { kernel } = w;
  const tasks = (n) => Array.from({ length: n }, (_, i) => ({ id: `t${i}` }));
  refusedBeforeLowering(w, () => kernel.taskboard.seed(tasks(10_001)), 'tasks');
  refusedBeforeLowering(w, () => kernel.taskboard.seed([{ id: 'a', deps: Array(10_001).fill('b') }]), 'deps');
  reachesTheComponent(w, () => kernel.checkpoint.buildPlan(tasks(10_001)), 'steps (pure: the component judges)');
  refusedBeforeLowering(
    w,
    () => kernel.checkpoint.saveIfNewer({ runId: 'r', seq: 1n, status: 's', done: Array(10_001).fill('d'), fields: [] }),
    'done',
  );
  reachesTheComponent(w, () => kernel.taskboard.seed(tasks(10_000)), '10,000 tasks');
});

test('more than 64 MiB of strings and bytes in one call is refused before lowering', async () => {
  const w = await watched();
  const { kernel } = w;
  const title = 't'.repeat(MiB); // each within the 1 MiB bound
  const seeds = (n) => Array.from({ length: n }, (_, i) => ({ id: `t${i}`, title }));
  refusedBeforeLowering(w, () => kernel.taskboard.seed(seeds(65)), '65 MiB');
  // build-plan bounds only the total: 65 steps of 1 MiB ids are refused here.
  refusedBeforeLowering(w, () => kernel.checkpoint.buildPlan(seeds(65).map((s, i) => ({ id: `${i}${title}` }))), '65 MiB of step ids');
  reachesTheComponent(w, () => kernel.taskboard.seed(seeds(63)), '63 MiB');
});
