// The SQLite binding: the Rust host's schema byte for byte, WAL, two
// kernels on one file, a busy database ending in `storage` after bounded
// re-runs, and key order by UTF-8 bytes (what the B-tree serves).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { TABLES, openKernel } from '../src/index.js';

function tempDb(t) {
  const dir = mkdtempSync(join(tmpdir(), 'gak-js-sqlite-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return join(dir, 'k.db');
}

test('tables, DDL and journal mode are the Rust binding\'s', async (t) => {
  const path = tempDb(t);
  (await openKernel(`sqlite:${path}`)).close();
  const db = new Database(path, { readonly: true });
  try {
    const rows = db.prepare("SELECT name, sql FROM sqlite_master WHERE type = 'table' ORDER BY name").all();
    // host/rust/src/store/sqlite/, ensure_tables.
    const rust = TABLES.map((name) => ({
      name: `gak_${name}`,
      sql: `CREATE TABLE gak_${name} (key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL) WITHOUT ROWID`,
    })).sort((a, b) => (a.name < b.name ? -1 : 1));
    assert.deepEqual(rows, rust);
    assert.equal(db.pragma('journal_mode', { simple: true }), 'wal');
  } finally {
    db.close();
  }
});

test('two kernels on one file: one wins, the other sees taken', async (t) => {
  const url = `sqlite:${tempDb(t)}`;
  const a = await openKernel(url);
  const b = await openKernel(url);
  try {
    a.taskboard.seed([{ id: 'x' }]);
    const won = a.taskboard.claim('x', 'a', 60_000n);
    assert.throws(() => b.taskboard.claim('x', 'b', 60_000n), (e) => e.code === 'taken');
    b.taskboard.release('x', won.token); // a token is a capability, whoever holds it
    assert.equal(b.taskboard.claim('x', 'b', 60_000n).fence, 2n);
  } finally {
    a.close();
    b.close();
  }
});

test('a database held busy ends the call with storage after bounded re-runs, writing nothing', async (t) => {
  const path = tempDb(t);
  const kernel = await openKernel(`sqlite:${path}`, { busyTimeout: 1 });
  const holder = new Database(path);
  try {
    kernel.taskboard.seed([{ id: 'x' }]);
    holder.exec('BEGIN IMMEDIATE');
    assert.throws(
      () => kernel.taskboard.claim('x', 'w', 60_000n),
      (e) => e.code === 'storage' && /conflicts persisted after 10 attempts/.test(e.message),
    );
    holder.exec('ROLLBACK');
    assert.equal(kernel.taskboard.get('x').state, 'open');
    assert.equal(kernel.taskboard.claim('x', 'w', 60_000n).fence, 1n);
  } finally {
    holder.close();
    kernel.close();
  }
});

test('scans come back in UTF-8 byte order on SQLite, as on memory', async (t) => {
  const ids = ['b', 'a', '\uFFFD', '😀', 'é', 'ab'];
  for (const url of ['memory:', `sqlite:${tempDb(t)}`]) {
    const kernel = await openKernel(url);
    kernel.taskboard.seed(ids.map((id) => ({ id })));
    const got = kernel.taskboard.list({ limit: 10 }).items.map((x) => x.id);
    assert.deepEqual(got, ['a', 'ab', 'b', 'é', '\uFFFD', '😀'], url);
    kernel.close();
  }
});

test('writeFenced bodies can write their own tables on the same SQLite transaction', async (t) => {
  const path = tempDb(t);
  const kernel = await openKernel(`sqlite:${path}`);
  try {
    kernel.withDownstream((down) => down.sqlite.prepare('CREATE TABLE IF NOT EXISTS mail (id TEXT)').run());
    kernel.sideeffect.writeFenced('mailer', 1n, (down) => down.sqlite.prepare('INSERT INTO mail VALUES (?)').run('m1'));
    assert.throws(() =>
      kernel.sideeffect.writeFenced('mailer', 2n, (down) => {
        down.sqlite.prepare('INSERT INTO mail VALUES (?)').run('m2');
        throw new Error('no');
      }),
    );
    const rows = kernel.withDownstream((down) => down.sqlite.prepare('SELECT id FROM mail').all());
    assert.deepEqual(rows, [{ id: 'm1' }]);
    assert.equal(kernel.sideeffect.sinkSeen('mailer'), 1n);
  } finally {
    kernel.close();
  }
});
