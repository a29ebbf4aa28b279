// HOSTS.md rules 12 and 13 beyond the shared cases (tests/host-protocol/sinks.json):
// the SQLite connection lent to a sink body refuses transaction control
// however it is written and keeps working for ordinary statements; an error
// the body met through it ends the call; it dies with the body; a
// transaction that ended under the call is never reported committed; a
// re-entrant call touches neither a worker nor the store.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { GakError, Kernel, ManualClock, SqliteBackend, loadComponent, openKernel } from '../src/index.js';
import { leadingKeywords, transactionControl } from '../src/store/lent.js';
import { ScriptedBackend } from './fixtures/scripted.mjs';

function tempDb(t) {
  const dir = mkdtempSync(join(tmpdir(), 'gak-js-sinks-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return join(dir, 'k.db');
}

async function sqliteKernel(t) {
  const kernel = await openKernel(`sqlite:${tempDb(t)}`, { clock: new ManualClock(1000n) });
  t.after(() => kernel.close());
  kernel.withDownstream((down) => down.sqlite.exec('CREATE TABLE mail (id TEXT PRIMARY KEY)'));
  return kernel;
}

const code = (c) => (e) => e instanceof GakError && e.code === c;
const mail = (kernel) => kernel.withDownstream((down) => down.sqlite.prepare('SELECT id FROM mail ORDER BY id').pluck().all());

test('leading keywords: comments, quotes, case, several statements, trigger bodies', () => {
  assert.deepEqual(leadingKeywords('  commit'), ['COMMIT']);
  assert.deepEqual(leadingKeywords('/* a */ -- b\n\tEnd Transaction;'), ['END']);
  assert.deepEqual(leadingKeywords("INSERT INTO t VALUES ('; COMMIT'); rollback to x"), ['INSERT', 'ROLLBACK']);
  assert.deepEqual(leadingKeywords('SELECT "a;b", [c;d], `e;f` FROM t;SAVEPOINT s;;RELEASE s'), ['SELECT', 'SAVEPOINT', 'RELEASE']);
  const trigger =
    'CREATE TEMP TRIGGER tr AFTER INSERT ON mail BEGIN ' +
    "INSERT INTO log VALUES (CASE WHEN new.id = 'x' THEN 1 ELSE 2 END); DELETE FROM log; END; SELECT 1";
  assert.deepEqual(leadingKeywords(trigger), ['CREATE', 'SELECT']);
  assert.equal(transactionControl(trigger), undefined);
  // Only CREATE [TEMP|TEMPORARY] TRIGGER has a body: elsewhere TRIGGER and BEGIN are names.
  assert.deepEqual(leadingKeywords('CREATE TABLE trigger(begin); COMMIT; END'), ['CREATE', 'COMMIT', 'END']);
  assert.deepEqual(leadingKeywords('create temporary trigger t after insert on x begin select 1; end; commit'), ['CREATE', 'COMMIT']);
  // SQLite folds ASCII letters only: these are identifiers there.
  assert.equal(transactionControl('commıt'), undefined);
  assert.equal(transactionControl('ſavepoint x'), undefined);
  const control = {
    BEGIN: 'BEGIN',
    'begin immediate': 'BEGIN',
    COMMIT: 'COMMIT',
    END: 'END',
    ROLLBACK: 'ROLLBACK',
    'SAVEPOINT a': 'SAVEPOINT',
    'RELEASE a': 'RELEASE',
    // Not SQLite statements, refused all the same: as on PostgreSQL.
    ABORT: 'ABORT',
    'start transaction': 'START',
    'PREPARE TRANSACTION x': 'PREPARE TRANSACTION',
    "prepare/* c */--d\ntransaction 'x'": 'PREPARE TRANSACTION',
  };
  for (const [sql, phrase] of Object.entries(control)) {
    assert.equal(transactionControl(`/* x */ ${sql}`), phrase, sql);
    assert.equal(transactionControl(`SELECT 1; ${sql}`), phrase, sql);
  }
  assert.equal(transactionControl('PREPARE q AS SELECT 1'), undefined);
  assert.equal(transactionControl("PREPARE 'transaction'"), undefined);
});

test('a body cannot end the transaction through the lent connection, however it writes it', async (t) => {
  const kernel = await sqliteKernel(t);
  const ways = [
    (db) => db.exec('COMMIT'),
    (db) => db.exec('  -- the kernel is done, surely\n  commit transaction'),
    (db) => db.exec("INSERT INTO mail VALUES ('sneaky'); END"),
    (db) => db.prepare('/**/ROLLBACK').run(),
    (db) => db.prepare('SAVEPOINT mine').run(),
    (db) => db.prepare('release mine').run(),
    (db) => db.exec('BEGIN'),
    // No SQLite statement, but refused before SQLite's syntax error (which
    // would end the call): the body goes on, as on PostgreSQL.
    (db) => db.prepare('START TRANSACTION').run(),
    // A table named trigger, a column named begin: no trigger body hides the COMMIT.
    (db) => db.exec('CREATE TABLE trigger(begin); COMMIT; END'),
  ];
  for (const [i, way] of ways.entries()) {
    let refusal;
    kernel.sideeffect.writeFenced('mailer', BigInt(i + 1), (down) => {
      down.sqlite.prepare('INSERT INTO mail VALUES (?)').run(`m${i}`);
      try {
        way(down.sqlite);
      } catch (e) {
        refusal = e; // seen by the body; the transaction goes on
      }
    });
    assert.ok(refusal instanceof GakError && refusal.code === 'invalid-input', `${i}: ${refusal}`);
  }
  // Every write landed with its fence, none twice, and "sneaky" never ran.
  assert.deepEqual(mail(kernel), ['m0', 'm1', 'm2', 'm3', 'm4', 'm5', 'm6', 'm7', 'm8']);
  assert.equal(kernel.sideeffect.sinkSeen('mailer'), 9n);
});

test('ordinary statements work through the lent connection; its handles die with the body', async (t) => {
  const kernel = await sqliteKernel(t);
  let kept;
  let statement;
  kernel.sideeffect.writeFenced('mailer', 1n, (down) => {
    const db = down.sqlite;
    assert.equal(db.inTransaction, true);
    db.exec("INSERT INTO mail VALUES ('a'); INSERT INTO mail VALUES ('b')");
    statement = db.prepare('SELECT id FROM mail WHERE id > ? ORDER BY id');
    assert.deepEqual(statement.all('a'), [{ id: 'b' }]);
    assert.deepEqual([...statement.pluck().iterate('')], ['a', 'b']);
    assert.equal(statement.database, undefined, 'no way back to the raw connection');
    kept = db;
  });
  assert.deepEqual(mail(kernel), ['a', 'b']);
  // Kept past the body: refused, so nothing can run outside the transaction.
  assert.equal(kept.inTransaction, false);
  assert.throws(() => kept.exec("INSERT INTO mail VALUES ('late')"), code('invalid-input'));
  assert.throws(() => statement.all(''), code('invalid-input'));
  assert.deepEqual(mail(kernel), ['a', 'b']);
});

test('an SQL error the body caught still ends the call with storage, and nothing lands', async (t) => {
  const kernel = await sqliteKernel(t);
  kernel.sideeffect.writeFenced('mailer', 1n, (down) => down.sqlite.prepare("INSERT INTO mail VALUES ('a')").run());
  // The "insert if absent" pattern, done by catching the constraint error.
  assert.throws(
    () =>
      kernel.sideeffect.writeFenced('mailer', 2n, (down) => {
        down.put('note', 'written before the error');
        try {
          down.sqlite.prepare("INSERT INTO mail VALUES ('a')").run();
        } catch {
          // already there
        }
      }),
    code('storage'),
  );
  assert.equal(kernel.sideeffect.sinkSeen('mailer'), 1n);
  assert.equal(kernel.withDownstream((down) => down.get('note')), undefined);
  // A statement SQLite cannot even prepare is the same.
  assert.throws(
    () =>
      kernel.sideeffect.writeFenced('mailer', 2n, (down) => {
        try {
          down.sqlite.prepare('SELECT * FROM gak_no_such_table').all();
        } catch {
          // ignored
        }
      }),
    code('storage'),
  );
  // A mistake better-sqlite3 catches before SQLite runs anything is the body's own.
  kernel.sideeffect.writeFenced('mailer', 2n, (down) => {
    assert.throws(() => down.sqlite.prepare('INSERT INTO mail VALUES (?)').run(), RangeError);
  });
  assert.equal(kernel.sideeffect.sinkSeen('mailer'), 2n);
});

test('a transaction that ended under the call is storage, never ok, and not re-run', async (t) => {
  // A binding whose raw connection a body could reach (a bug, or the
  // database rolling back on its own): the engine checks it is still open.
  const path = tempDb(t);
  let session;
  class Leaky extends SqliteBackend {
    session() {
      session = super.session();
      return session;
    }
  }
  const kernel = new Kernel(await loadComponent(), new Leaky(path), new ManualClock(1000n));
  t.after(() => kernel.close());
  for (const end of ['COMMIT', 'ROLLBACK']) {
    let runs = 0;
    assert.throws(
      () =>
        kernel.sideeffect.writeFenced(`sink-${end}`, 1n, (down) => {
          runs++;
          down.put(`row-${end}`, 'x');
          session.db.exec(end);
        }),
      (e) => e instanceof GakError && e.code === 'storage' && /transaction ended/.test(e.message),
    );
    assert.equal(runs, 1, end);
  }
  // Committed, then failed: the writes are durable, so `write-failed` (which
  // says nothing landed) would be a lie a caller acts on by retrying.
  assert.throws(
    () =>
      kernel.sideeffect.writeFenced('sink-then-fail', 1n, (down) => {
        down.put('row-then-fail', 'x');
        session.db.exec('COMMIT');
        throw new Error('the body fails after the commit');
      }),
    (e) => e instanceof GakError && e.code === 'storage',
  );
  // The connection is usable afterwards.
  kernel.sideeffect.writeFenced('after', 1n, (down) => down.put('k', 'v'));
  assert.equal(kernel.withDownstream((down) => down.get('k')), 'v');
});

test('a re-entrant call is refused before a worker is checked out or a transaction begun', async () => {
  const component = await loadComponent();
  let instances = 0;
  const counted = { ...component, instantiate: (imports) => (instances++, component.instantiate(imports)) };
  const store = new ScriptedBackend();
  const kernel = new Kernel(counted, store, new ManualClock(1000n));
  kernel.taskboard.seed([{ id: 'a' }]);
  store.script();
  const before = instances;
  let inner;
  kernel.sideeffect.writeFenced('s', 1n, () => {
    const at = { ...store.tx, instances };
    try {
      kernel.taskboard.claim('a', 'w', 100n);
    } catch (e) {
      inner = e;
    }
    assert.deepEqual({ ...store.tx, instances }, at, 'the inner call touched nothing');
  });
  assert.ok(inner instanceof GakError && inner.code === 'invalid-input', String(inner));
  assert.equal(instances, before);
  assert.deepEqual(store.tx, { begin: 1, commit: 1, rollback: 0 });
  // A second kernel of this thread is refused the same way (on one SQLite
  // file it would wait for the write lock the first one holds).
  const other = await openKernel('memory:');
  kernel.sideeffect.writeFenced('s', 2n, () => {
    assert.throws(() => other.taskboard.get('x'), code('invalid-input'));
    assert.throws(() => other.checkpoint.buildPlan([]), code('invalid-input'));
  });
});

test('a downstream failure the body rethrew is storage, not write-failed', async () => {
  const store = new ScriptedBackend();
  const kernel = await openKernel(store, { clock: new ManualClock(1000n) });
  store.script([{ on: 'write', table: 'downstream', answer: 'failure' }]);
  assert.throws(() => kernel.sideeffect.writeFenced('s', 1n, (down) => down.put('k', 'v')), code('storage'));
  assert.deepEqual(store.tx, { begin: 1, commit: 0, rollback: 1 });
  // And a view kept past its body refuses.
  let kept;
  kernel.sideeffect.writeFenced('s', 1n, (down) => (kept = down));
  assert.throws(() => kept.put('k', 'late'), code('invalid-input'));
  assert.equal(kept.sqlite, undefined);
});

test('a NUL in a downstream key or value is refused up front, and the call goes on', async (t) => {
  const scripted = new ScriptedBackend();
  const stores = [
    ['scripted', await openKernel(scripted, { clock: new ManualClock(1000n) })],
    ['sqlite', await sqliteKernel(t)],
  ];
  for (const [name, kernel] of stores) {
    scripted.script();
    const refusals = [];
    kernel.sideeffect.writeFenced('nul', 1n, (down) => {
      for (const [key, value] of [['a\0b', 'v'], ['k', 'x\0'], ['\0', '\0']]) {
        try {
          down.put(key, value);
        } catch (e) {
          refusals.push(e);
        }
      }
      // A read of such a key too (PostgreSQL would fail it and end the call).
      try {
        down.get('a\0b');
      } catch (e) {
        refusals.push(e);
      }
      down.put('k', 'after the refusals');
    });
    assert.equal(refusals.length, 4, name);
    for (const e of refusals) assert.ok(e instanceof GakError && e.code === 'invalid-input', `${name}: ${e}`);
    if (name === 'scripted') {
      // Refused before the binding saw them: one downstream write reached it, no read.
      const downstream = scripted.log.filter((op) => op.tables.includes('downstream'));
      assert.deepEqual(downstream.map((op) => op.on), ['write']);
    }
    // The call committed: the fence and the one good write, nothing else.
    assert.equal(kernel.sideeffect.sinkSeen('nul'), 1n, name);
    const rows = kernel.withDownstream((down) => ({ k: down.get('k'), a: down.get('a'), b: down.get('b') }));
    assert.deepEqual(rows, { k: 'after the refusals', a: undefined, b: undefined }, name);
    if (name === 'sqlite') {
      const nuls = kernel.withDownstream((down) =>
        down.sqlite.prepare("SELECT count(*) FROM gak_downstream WHERE instr(key, char(0)) OR instr(value, char(0))").pluck().get(),
      );
      assert.equal(nuls, 0);
    }
    // A body that lets the refusal through fails as any body error does.
    assert.throws(() => kernel.sideeffect.writeFenced('nul', 2n, (down) => down.put('k\0', 'v')), code('write-failed'), name);
    assert.equal(kernel.sideeffect.sinkSeen('nul'), 1n, name);
  }
});

test('rule 12 on both sides: what the database raised ends the call; what was refused before it changes nothing', async (t) => {
  const kernel = await sqliteKernel(t);
  kernel.sideeffect.writeFenced('mailer', 1n, (down) => down.sqlite.prepare("INSERT INTO mail VALUES ('taken')").run());
  // SQLite raised these (its parser, a constraint, a statement failing as
  // it steps): on PostgreSQL each would abort the transaction, so here too
  // the call ends with storage although the body swallowed the error.
  const raised = {
    'a syntax error': (db) => db.prepare('SELEC 1'),
    'a missing table': (db) => db.prepare('SELECT * FROM gak_no_such_table'),
    'a constraint': (db) => db.prepare("INSERT INTO mail VALUES ('taken')").run(),
    'an error while stepping (get)': (db) => db.prepare('SELECT abs(-9223372036854775808)').get(),
    'an error while stepping (iterate)': (db) => [...db.prepare('SELECT abs(-9223372036854775808)').iterate()],
    'the second statement of exec': (db) => db.exec("INSERT INTO mail VALUES ('fresh'); INSERT INTO gak_no_such_table VALUES (1)"),
  };
  // Refused before anything reached the database (the guard, better-sqlite3's
  // own checks): the body sees the error, the call goes on and commits.
  const refused = {
    'transaction control': (db) => db.prepare('COMMIT'),
    'two statements in prepare': (db) => db.prepare("INSERT INTO mail VALUES ('y'); INSERT INTO mail VALUES ('z')"),
    'no statement': (db) => db.prepare('  -- nothing\n'),
    'not a string': (db) => db.prepare(42),
    'all() on a statement that returns nothing': (db) => db.prepare("INSERT INTO mail VALUES ('w')").all(),
    'pluck() on a statement that returns nothing': (db) => db.prepare("INSERT INTO mail VALUES ('w')").pluck(),
    'a missing parameter': (db) => db.prepare('INSERT INTO mail VALUES (?)').run(),
    'too many parameters': (db) => db.prepare('INSERT INTO mail VALUES (?)').run('a', 'b'),
    'a parameter of no SQL type': (db) => db.prepare('INSERT INTO mail VALUES (?)').run({ not: 'bindable' }),
  };
  let fence = 1n;
  for (const [what, mistake] of [...Object.entries(raised), ...Object.entries(refused)]) {
    fence += 1n;
    const key = `note-${fence}`;
    let caught;
    const call = () =>
      kernel.sideeffect.writeFenced('mailer', fence, (down) => {
        down.put(key, what);
        try {
          mistake(down.sqlite);
        } catch (e) {
          caught = e;
        }
      });
    if (what in raised) {
      assert.throws(call, code('storage'), what);
      assert.equal(caught?.code?.startsWith('SQLITE_'), true, `${what}: the body saw ${caught}`);
      assert.equal(kernel.sideeffect.sinkSeen('mailer'), fence - 1n, what);
      assert.equal(kernel.withDownstream((down) => down.get(key)), undefined, what);
      fence -= 1n;
    } else {
      call();
      assert.ok(caught instanceof Error && !String(caught.code).startsWith('SQLITE_'), `${what}: the body saw ${caught}`);
      assert.equal(kernel.sideeffect.sinkSeen('mailer'), fence, what);
      assert.equal(kernel.withDownstream((down) => down.get(key)), what, what);
    }
  }
  assert.deepEqual(mail(kernel), ['taken']);
});

test('an iterator the body left open is closed when it returns: the call commits, the connection stays usable', async (t) => {
  const kernel = await sqliteKernel(t);
  kernel.sideeffect.writeFenced('mailer', 1n, (down) => {
    down.sqlite.exec("INSERT INTO mail VALUES ('a'); INSERT INTO mail VALUES ('b')");
    const rows = down.sqlite.prepare('SELECT id FROM mail ORDER BY id').pluck().iterate();
    assert.deepEqual(rows.next(), { value: 'a', done: false }); // and never finished
  });
  assert.equal(kernel.sideeffect.sinkSeen('mailer'), 1n);
  kernel.sideeffect.writeFenced('mailer', 2n, (down) => down.sqlite.prepare("INSERT INTO mail VALUES ('c')").run());
  assert.deepEqual(mail(kernel), ['a', 'b', 'c']);
});
