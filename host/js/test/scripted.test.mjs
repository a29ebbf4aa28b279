// The scripted store of the host-protocol cases counts what the Rust host's
// does (host/rust/cli/src/conformance/protocol.rs), so a case's `tx` counts and
// `nth` faults mean the same on every host: one `store.read` crossing is
// one read operation however many keys and ranges it carries; a whole
// write set is one write operation, on every table one of its changes
// touches; a sink body's downstream get / put are operations of their own.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { GakError, ManualClock, openKernel } from '../src/index.js';
import { ScriptedBackend } from './fixtures/scripted.mjs';

async function scripted() {
  const store = new ScriptedBackend();
  const kernel = await openKernel(store, { clock: new ManualClock(1000n) });
  return { store, kernel };
}

const storage = (e) => e instanceof GakError && e.code === 'storage';

test('a read of several keys is one read, a write set of several changes one write', async () => {
  const { store, kernel } = await scripted();
  // (A new board's first seed also decides, once per store, whether every
  // side-effect key is counted, and stamps the count records with it.)
  kernel.taskboard.seed([{ id: 'first' }]);
  store.script();
  kernel.taskboard.seed([{ id: 'a' }, { id: 'b', deps: ['a'] }, { id: 'c' }]);
  assert.deepEqual(store.ops, { read: 1, write: 1 });
  const [read, write] = store.log;
  assert.ok(read.tables.length >= 3, `the seed read ${read.tables.join()}`);
  assert.ok(write.tables.length >= 3, `the seed wrote ${write.tables.join()}`);
  store.script();
  kernel.taskboard.claim('a', 'w', 100n);
  assert.deepEqual(store.ops, { read: 1, write: 1 });
  assert.ok(store.log[1].tables.includes('tasks') && store.log[1].tables.includes('indexes'), store.log[1].tables.join());
  // A refusal hands over no write set.
  store.script();
  assert.throws(() => kernel.taskboard.claim('a', 'w', 100n), (e) => e.code === 'taken');
  assert.deepEqual(store.ops, { read: 1, write: 0 });
  assert.deepEqual(store.tx, { begin: 1, commit: 0, rollback: 1 });
});

test('a fault on a table strikes the write set that touches it; nth counts write sets, not changes', async () => {
  const { store, kernel } = await scripted();
  kernel.taskboard.seed([{ id: 'a' }]);
  // The claim's one write set touches tasks and indexes: a second write
  // on either never comes.
  store.script([{ on: 'write', table: 'indexes', nth: 2, answer: 'failure' }]);
  assert.equal(kernel.taskboard.claim('a', 'w', 100n).fence, 1n);
  const writes = store.log.filter((o) => o.on === 'write');
  assert.equal(writes.length, 1);
  assert.ok(writes[0].tables.filter((t) => t === 'tasks' || t === 'indexes').length >= 2, writes[0].tables.join());
});

test('a write set failing on one of its tables ends the call with storage, nothing written', async () => {
  const { store, kernel } = await scripted();
  kernel.taskboard.seed([{ id: 'a' }]);
  const before = store.dump();
  store.script([{ on: 'write', table: 'indexes', answer: 'failure' }]);
  assert.throws(() => kernel.taskboard.claim('a', 'w', 100n), storage);
  assert.deepEqual(store.tx, { begin: 1, commit: 0, rollback: 1 });
  assert.deepEqual(store.dump(), before);
  // A table no change names is not struck.
  store.script([{ on: 'write', table: 'actions', answer: 'failure' }]);
  assert.equal(kernel.taskboard.claim('a', 'w', 100n).fence, 1n);
});

test('a conflict on the write set re-runs the whole call: two reads, two write sets', async () => {
  const { store, kernel } = await scripted();
  kernel.taskboard.seed([{ id: 'a' }]);
  store.script([{ on: 'write', answer: 'conflict' }]);
  assert.equal(kernel.taskboard.claim('a', 'w', 100n).fence, 1n);
  assert.deepEqual(store.ops, { read: 2, write: 2 });
  assert.deepEqual(store.tx, { begin: 2, commit: 1, rollback: 1 });
});

test('a read is struck by a fault on a table it names, not on another', async () => {
  const { store, kernel } = await scripted();
  kernel.taskboard.seed([{ id: 'a' }]);
  store.script([{ on: 'read', table: 'actions', answer: 'failure' }]);
  assert.equal(kernel.taskboard.get('a').state, 'open');
  store.script([{ on: 'read', table: 'tasks', answer: 'failure' }]);
  assert.throws(() => kernel.taskboard.get('a'), storage);
  assert.deepEqual(store.ops, { read: 1, write: 0 });
});

test("a sink body's put is a write of its own, on downstream", async () => {
  const { store, kernel } = await scripted();
  store.script();
  kernel.sideeffect.writeFenced('r', 1n, (down) => down.put('x', 'y'));
  assert.deepEqual(store.log.filter((o) => o.tables.includes('downstream')), [{ on: 'write', tables: ['downstream'] }]);
  store.script([{ on: 'write', table: 'downstream', answer: 'failure' }]);
  assert.throws(() => kernel.sideeffect.writeFenced('r', 2n, (down) => down.put('x', 'z')), storage);
  assert.equal(kernel.sideeffect.sinkSeen('r'), 1n);
});
