// The lent SQLite connection's guard (src/store/lent.js) judged by SQLite
// itself: texts are sent through the guard to a real connection inside a
// transaction, and whatever the guard lets through must leave that
// transaction open (HOSTS.md rule 12). The guard lexes by SQLite's
// tokenizer rules; where it reads a text differently from SQLite, these
// find it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import Database from 'better-sqlite3';
import { LentConnection, transactionControl } from '../src/store/lent.js';

/** A connection inside a transaction, and `attempt(how, sql)`: did the transaction survive? */
function harness() {
  const db = new Database(':memory:');
  db.exec('CREATE TABLE base(begin, end, x); CREATE TABLE log(a)');
  const attempt = (how, sql) => {
    db.exec('BEGIN IMMEDIATE');
    const lent = new LentConnection(db, () => {});
    let refused = false;
    try {
      if (how === 'exec') lent.exec(sql);
      else {
        const statement = lent.prepare(sql);
        if (statement.reader) statement.all();
        else statement.run();
      }
    } catch (e) {
      refused = e.name === 'GakError';
    } finally {
      lent.revoke();
    }
    const open = db.inTransaction;
    if (open) db.exec('ROLLBACK');
    // What a text managed to create stays out of the next attempt.
    for (const { type, name } of db.prepare("SELECT type, name FROM sqlite_master WHERE name NOT IN ('base', 'log')").all()) {
      if (type === 'table' || type === 'trigger') db.exec(`DROP ${type} IF EXISTS "${name}"`);
    }
    return { open, refused };
  };
  return { db, attempt };
}

/** A deterministic stream (mulberry32): the same texts every run. */
function stream(seed) {
  let s = seed >>> 0;
  const below = (n) => {
    s = (s + 0x6d2b79f5) >>> 0;
    let z = s;
    z = Math.imul(z ^ (z >>> 15), z | 1);
    z ^= z + Math.imul(z ^ (z >>> 7), z | 61);
    return ((z ^ (z >>> 14)) >>> 0) % n;
  };
  return { below, pick: (xs) => xs[below(xs.length)] };
}

test('no character before a control word gets it past the guard (every code point of the BMP, a sample of the rest)', () => {
  const { attempt } = harness();
  const refusedBy = [];
  for (let cp = 0; cp <= 0x10ffff; cp += cp < 0x10000 ? 1 : 251) {
    if (cp >= 0xd800 && cp <= 0xdfff) continue;
    const c = String.fromCodePoint(cp);
    for (const [how, sql] of [
      ['prepare', `${c}ROLLBACK`],
      ['exec', `SELECT 1;${c}COMMIT`],
      ['exec', `/**/${c}${c}END`],
    ]) {
      const { open, refused } = attempt(how, sql);
      assert.ok(open, `${how} ${JSON.stringify(sql)} (U+${cp.toString(16)}) ended the transaction`);
      if (refused && how === 'prepare') refusedBy.push(cp);
    }
  }
  // SQLite's spaces, `;`, and a byte-order mark where a token starts; and
  // `\v`, which SQLite rejects but PostgreSQL takes for a space.
  assert.deepEqual(refusedBy, [0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x20, 0x3b, 0xfeff]);
});

test('trigger bodies and names that look like them: what the guard lets through never ends the transaction', (t) => {
  const { attempt } = harness();
  const r = stream(23);
  const names = ['begin', 'end', 'trigger', 'temp', 'x', '"end"', '[begin]', '`case`'];
  const expr = (d = 0) =>
    r.pick([
      '1',
      'begin',
      'end',
      'new.begin',
      d < 2 ? `CASE WHEN ${expr(d + 1)} THEN ${expr(d + 1)} ELSE ${expr(d + 1)} END` : '2',
      d < 2 ? `CASE ${expr(d + 1)} WHEN 1 THEN 1 END` : '3',
      d < 2 ? `(SELECT ${expr(d + 1)} FROM base)` : '4',
    ]);
  const statement = () =>
    r.pick([
      `INSERT INTO log VALUES(${expr()})`,
      `SELECT ${expr()} AS ${r.pick(names)} FROM base`,
      `UPDATE base SET begin = ${expr()}`,
      'SELECT end, begin FROM base',
    ]);
  const tails = ['; COMMIT', ';COMMIT;', '; END', '; ROLLBACK', ';\nBEGIN --x', '; SELECT 1; COMMIT', ''];
  let ran = 0;
  for (let n = 0; n < 3000; n++) {
    const head = r.below(3)
      ? `CREATE ${r.pick(['', 'TEMP ', 'TEMPORARY '])}TRIGGER ${r.pick(['', 'IF NOT EXISTS '])}${r.pick(names)} ` +
        `${r.pick(['AFTER', 'BEFORE'])} ${r.pick(['INSERT', 'DELETE', 'UPDATE OF begin, end', 'UPDATE'])} ON base` +
        `${r.below(2) ? ' FOR EACH ROW' : ''}${r.below(2) ? ` WHEN ${expr()}` : ''} BEGIN ` +
        `${Array.from({ length: 1 + r.below(3) }, () => `${statement()};`).join(' ')} END`
      : `CREATE ${r.pick(['', 'TEMP '])}TABLE ${r.pick(names)}(${r.pick(names)}${r.below(2) ? ` CHECK (${expr()})` : ''})`;
    const tail = r.pick(tails);
    const sql = `${head}${tail}`;
    const { open, refused } = attempt('exec', sql);
    assert.ok(open, `exec ${JSON.stringify(sql)} ended the transaction`);
    // The head is one statement: a control word in the tail leads a statement of its own.
    if (transactionControl(tail)) assert.ok(refused, `exec ${JSON.stringify(sql)} was not refused`);
    if (!refused) ran++;
  }
  assert.ok(ran > 0, 'some texts were let through to SQLite');
  t.diagnostic(`${ran} of 3000 texts let through to SQLite`);
});

test('a soup of tokens, comments, quotes and control words never ends the transaction', () => {
  const { attempt } = harness();
  const r = stream(7);
  const pieces = [
    'COMMIT', 'END', 'ROLLBACK', 'BEGIN', 'SAVEPOINT s', 'RELEASE s', 'ROLLBACK TO s', 'SELECT 1', 'INSERT INTO log VALUES(1)',
    ';', ' ', '\t', '\n', '\r', '\f', '\v', '\0', '\u00a0', '\ufeff', '--', '/*', '*/', "'", '"', '`', '[', ']', '$', '$$',
    'x', '1', '(', ')', 'E', '\\', 'CASE', 'WHEN 1 THEN 1', 'WITH', 'EXPLAIN', 'TRANSACTION', ':', '?', '@', '#', 'END;',
    'begin', 'Commit', 'CREATE TRIGGER t AFTER INSERT ON base BEGIN', 'CREATE TABLE trigger(begin)', 'TEMP', 'TRIGGER',
  ];
  for (let n = 0; n < 20000; n++) {
    let sql = '';
    for (let k = 1 + r.below(8); k > 0; k--) sql += r.pick(pieces) + (r.below(3) === 0 ? ' ' : '');
    for (const how of ['prepare', 'exec']) {
      assert.ok(attempt(how, sql).open, `${how} ${JSON.stringify(sql)} ended the transaction`);
    }
  }
});
