// The calling convention under faults: conflicts re-run the whole call
// (bounded), a trap discards the instance, a broken clock fails the call;
// in every case a failed call leaves the store as it was. And what the
// store import hands over (gak:kernel@0.4.0 `store.read`): the clock read
// after the reads, fresh entropy for every read that asks.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { GakError, ManualClock, MemoryBackend, StoreConflict, openKernel } from '../src/index.js';
import { loadComponent } from '../src/component.js';
import { Kernel } from '../src/kernel.js';

/** A memory store whose transactions can be made to misbehave. */
class FaultyBackend extends MemoryBackend {
  transactions = 0;
  /** (op, args) -> a value to return instead, or throws; undefined: behave. op: read | write. */
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
        for (const op of ['read', 'write']) {
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
    if (op === 'write' && conflicts > 0) {
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
    if (op === 'read') throw new StoreConflict('busy');
  };
  assert.throws(() => kernel.taskboard.claim('a', 'w', 100n), (e) => e instanceof GakError && e.code === 'storage');
  assert.equal(store.transactions, 10);
  assert.deepEqual(store.dump(), before);
});

test('a store failure ends the call with storage and writes nothing', async () => {
  const { store, kernel } = await faulty();
  const before = store.dump();
  store.fault = (op) => {
    if (op === 'write') throw new Error('disk on fire');
  };
  assert.throws(() => kernel.taskboard.claim('a', 'w', 100n), (e) => e.code === 'storage' && /disk on fire/.test(e.message));
  assert.deepEqual(store.dump(), before);
  assert.equal(store.transactions, 1); // not retried
});

test('a trap discards the instance: the call fails, the next one runs on a fresh instance', async () => {
  const { store, kernel } = await faulty();
  const before = store.dump();
  // A binding that returns garbage (a value that is not a string) makes
  // jco's glue throw inside the import, which unwinds through the guest
  // (jco #405).
  store.fault = (op) => (op === 'read' ? { values: [42], pages: [] } : undefined);
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

test('a clock that throws fails the call with storage, and nothing is written', async () => {
  const store = new FaultyBackend();
  const clock = new ManualClock(1000n);
  const kernel = await openKernel(store, { clock });
  kernel.taskboard.seed([{ id: 'a' }]);
  const before = store.dump();
  const ops = [];
  store.fault = (op) => void ops.push(op);
  clock.now = () => {
    throw new Error('the clock fell off the wall');
  };
  assert.throws(
    () => kernel.taskboard.claim('a', 'w', 100n),
    (e) => e instanceof GakError && e.code === 'storage' && /reading the clock: the clock fell off the wall/.test(e.message),
  );
  assert.deepEqual(store.dump(), before);
  assert.ok(ops.includes('read'), ops.join());
  assert.ok(!ops.includes('write'), `a write set reached the store: ${ops.join()}`);
  delete clock.now; // the prototype's again
  assert.equal(kernel.taskboard.claim('a', 'w', 100n).until, 1100n);
});

test('the clock is read after the reads it is asked with', async () => {
  const store = new FaultyBackend();
  const events = [];
  const kernel = await openKernel(store, {
    clock: {
      now: () => {
        events.push('clock');
        return 1000n;
      },
    },
  });
  kernel.taskboard.seed([{ id: 'a' }]);
  store.fault = (op) => void events.push(op);
  events.length = 0;
  kernel.taskboard.claim('a', 'w', 100n);
  const clock = events.indexOf('clock');
  assert.ok(clock > 0, events.join());
  assert.equal(events[clock - 1], 'read', events.join());
});

/**
 * A kernel whose instances' store import is seen by `spy`: `read(reads,
 * real)` and `write(changes, real)` stand between the glue and the host's
 * functions (`real` is the host's), on the host's memory binding.
 */
async function spied(spy, clock = new ManualClock(1000n)) {
  const entry = await loadComponent();
  const component = {
    ...entry,
    instantiate(imports) {
      const real = imports['gak:kernel/store'];
      const store = {
        read: (reads) => (spy.read ? spy.read(reads, real.read) : real.read(reads)),
        tryRead: (keys) => real.tryRead(keys),
        write: (changes) => (spy.write ? spy.write(changes, real.write) : real.write(changes)),
      };
      const out = { ...imports };
      for (const name of Object.keys(imports)) if (name.split('@')[0] === 'gak:kernel/store') out[name] = store;
      return entry.instantiate(out);
    },
  };
  const backend = new MemoryBackend();
  return { kernel: new Kernel(component, backend, clock), backend };
}

const hex = (bytes) => Buffer.from(bytes).toString('hex');

// The spies only record: an assertion failing inside an import would
// surface as a trapped call, not as itself.

test('every read that asks for entropy gets that many fresh bytes, never handed out twice', async () => {
  const reads = [];
  const { kernel } = await spied({
    read(asked, real) {
      const answers = real(asked);
      reads.push({ asked: asked.entropy, answers, was: hex(answers.entropy ?? []) });
      return answers;
    },
  });
  const n = 40;
  kernel.taskboard.seed(Array.from({ length: n }, (_, i) => ({ id: `t${i}` })));
  for (let i = 0; i < n; i++) {
    kernel.taskboard.claim(`t${i}`, 'w', 60_000n);
    kernel.sideeffect.acquire({ key: `k${i}`, resource: `r${i}` }, 60_000n);
  }
  for (const r of reads) {
    assert.ok(!('tag' in r.answers), `an error answered: ${r.answers.val?.val}`);
    assert.equal(r.answers.entropy.length, r.asked);
  }
  const handed = reads.filter((r) => r.asked > 0);
  assert.ok(handed.length >= 2 * n, `${handed.length} reads asked for entropy`);
  // Still what was handed over (a copy, not a view of a pool that is
  // zeroed or refilled later), and no two alike.
  for (const r of handed) assert.equal(hex(r.answers.entropy), r.was);
  const all = handed.map((r) => r.was);
  assert.equal(new Set(all).size, all.length, 'two reads received the same bytes');
  for (const h of all) assert.notEqual(h, '0'.repeat(h.length), 'zeroed bytes handed out');
});

test('a read asking for more than 64 bytes of entropy fails the call with storage', async () => {
  const answers = [];
  const { kernel, backend } = await spied({
    read: (reads, real) => {
      const answer = real({ ...reads, entropy: 65 });
      answers.push(answer);
      return answer;
    },
  });
  assert.throws(() => kernel.taskboard.seed([{ id: 'a' }]), (e) => e.code === 'storage' && /at most 64/.test(e.message));
  assert.ok(answers.length > 0);
  for (const a of answers) assert.equal(a.val?.tag, 'failure');
  assert.deepEqual(backend.dump(), []);
});

test('a closed kernel refuses with storage', async () => {
  const kernel = await openKernel('memory:');
  kernel.close();
  assert.throws(() => kernel.taskboard.get('a'), (e) => e.code === 'storage');
});
