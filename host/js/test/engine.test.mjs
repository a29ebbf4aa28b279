// The calling convention under faults: conflicts re-run the whole call
// (bounded), a trap discards the instance, a broken clock fails the call;
// in every case a failed call leaves the store as it was.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { GakError, ManualClock, MemoryBackend, StoreConflict, openKernel } from '../src/index.js';

/** A memory store whose transactions can be made to misbehave. */
class FaultyBackend extends MemoryBackend {
  transactions = 0;
  /** (op, args) -> a value to return instead, or throws; undefined: behave. */
  fault = () => undefined;

  session() {
    const inner = super.session();
    return {
      begin: () => {
        const txn = inner.begin();
        this.transactions++;
        const faulty = {
          commit: () => txn.commit(),
          rollback: () => txn.rollback(),
          isOpen: () => txn.isOpen(),
          lend: (report) => txn.lend(report),
        };
        for (const op of ['get', 'getMany', 'put', 'delete', 'scan']) {
          faulty[op] = (...args) => {
            const r = this.fault(op, args);
            return r === undefined ? txn[op](...args) : r;
          };
        }
        return faulty;
      },
      close: () => inner.close(),
    };
  }
}

async function faulty() {
  const store = new FaultyBackend();
  const kernel = await openKernel(store, { clock: new ManualClock(1000n) });
  kernel.taskboard.seed([{ id: 'a' }]);
  store.transactions = 0;
  return { store, kernel };
}

test('a conflict re-runs the whole call, which then commits once', async () => {
  const { store, kernel } = await faulty();
  let conflicts = 2;
  store.fault = (op) => {
    if (op === 'put' && conflicts > 0) {
      conflicts--;
      throw new StoreConflict('busy');
    }
  };
  const task = kernel.taskboard.claim('a', 'w', 100n);
  assert.equal(task.fence, 1n); // one grant, not three
  assert.equal(store.transactions, 3);
});

test('conflicts that persist end the call with storage after a bounded number of runs', async () => {
  const { store, kernel } = await faulty();
  const before = store.dump();
  store.fault = (op) => {
    if (op === 'get') throw new StoreConflict('busy');
  };
  assert.throws(() => kernel.taskboard.claim('a', 'w', 100n), (e) => e instanceof GakError && e.code === 'storage');
  assert.equal(store.transactions, 10);
  assert.deepEqual(store.dump(), before);
});

test('a store failure ends the call with storage and writes nothing', async () => {
  const { store, kernel } = await faulty();
  const before = store.dump();
  store.fault = (op) => {
    if (op === 'put') throw new Error('disk on fire');
  };
  assert.throws(() => kernel.taskboard.claim('a', 'w', 100n), (e) => e.code === 'storage' && /disk on fire/.test(e.message));
  assert.deepEqual(store.dump(), before);
  assert.equal(store.transactions, 1); // not retried
});

test('a trap discards the instance: the call fails, the next one runs on a fresh instance', async () => {
  const { store, kernel } = await faulty();
  const before = store.dump();
  // A binding that returns garbage makes jco's glue throw inside the
  // import, which unwinds through the guest (jco #405).
  store.fault = (op) => (op === 'get' ? 42 : undefined);
  assert.throws(() => kernel.taskboard.claim('a', 'w', 100n), (e) => e.code === 'storage' && /trapped/.test(e.message));
  assert.deepEqual(store.dump(), before);
  store.fault = () => undefined;
  assert.equal(kernel.taskboard.claim('a', 'w', 100n).fence, 1n);
});

test('a clock that is not an integer, or past 2^53, fails the call', async () => {
  for (const now of [1.5, 2 ** 60, -1, 'soon']) {
    const store = new MemoryBackend();
    const kernel = await openKernel(store, { clock: { now: () => now } });
    assert.throws(() => kernel.taskboard.seed([{ id: 'a' }]), (e) => e.code === 'storage', String(now));
    assert.deepEqual(store.dump(), [], String(now));
  }
  const ok = await openKernel('memory:', { clock: { now: () => 5000 } });
  ok.taskboard.seed([{ id: 'a' }]);
  assert.equal(ok.taskboard.claim('a', 'w', 100n).until, 5100n);
});

test('a closed kernel refuses with storage', async () => {
  const kernel = await openKernel('memory:');
  kernel.close();
  assert.throws(() => kernel.taskboard.get('a'), (e) => e.code === 'storage');
});
