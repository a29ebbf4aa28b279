// The SQLite binding (better-sqlite3), byte-compatible with the Rust host's
// (`host/rust/src/store/sqlite/`): same file, same tables, same DDL, same
// key order, so Rust, Python and JavaScript hosts can share one database.
//
// Every exported call is one `BEGIN IMMEDIATE` transaction: the write lock
// is taken up front, so two calls — in threads or in separate processes —
// never interleave their read-decide-write. (A deferred BEGIN would let two
// claimers both read "open" and race to upgrade; one would fail late,
// mid-decision.) A busy database surfaces as `StoreConflict` and the kernel
// re-runs the whole call.
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import Database from 'better-sqlite3';
import { StoreConflict, StoreFailure } from './errors.js';
import {
  SQLITE_BUSY_TIMEOUT_MS,
  SQLITE_JOURNAL_MODE,
  SQLITE_SCHEMA,
  SQLITE_TABLE_PREFIX,
  TABLES,
  prefixEnd,
} from './facts.js';
import { compareKeys } from './keys.js';
import { LentConnection } from './lent.js';
import { hidePassword } from './secrets.js';

/** How long one BEGIN IMMEDIATE waits for another writer (ms), as in Rust. */
export const BUSY_TIMEOUT_MS = SQLITE_BUSY_TIMEOUT_MS;

/** A SQLite error as the kernel sees it: busy/locked is a conflict. */
export function storeFault(e) {
  if (e instanceof StoreConflict || e instanceof StoreFailure) return e;
  const code = typeof e?.code === 'string' ? e.code : '';
  if (code.startsWith('SQLITE_BUSY') || code.startsWith('SQLITE_LOCKED')) {
    return new StoreConflict(`${code}: ${e.message}`, { cause: e });
  }
  return new StoreFailure(code ? `${code}: ${e.message}` : String(e?.message ?? e), { cause: e });
}

const DDL = `BEGIN IMMEDIATE;${SQLITE_SCHEMA}COMMIT;`;

/**
 * Parse `PATH[?synchronous=full|normal]` (the part after `sqlite:`), as the
 * Rust host does.
 */
export function parseSqliteSpec(spec) {
  const q = spec.indexOf('?');
  const path = q < 0 ? spec : spec.slice(0, q);
  const query = q < 0 ? '' : spec.slice(q + 1);
  let synchronous = 'FULL';
  for (const pair of query.split('&').filter((p) => p !== '')) {
    if (pair === 'synchronous=full') synchronous = 'FULL';
    else if (pair === 'synchronous=normal') synchronous = 'NORMAL';
    else throw new StoreFailure(`bad store option ${JSON.stringify(hidePassword(pair))}`);
  }
  if (path === '') throw new StoreFailure('empty sqlite path');
  return { path, synchronous };
}

/** A SQLite database file. */
export class SqliteBackend {
  constructor(spec, { busyTimeout = BUSY_TIMEOUT_MS } = {}) {
    const { path, synchronous } = parseSqliteSpec(spec);
    this.path = path;
    this.synchronous = synchronous;
    this.busyTimeout = busyTimeout;
    const dir = dirname(path);
    if (dir && dir !== '.') mkdirSync(dir, { recursive: true });
    const db = this.connect();
    try {
      ensureTables(db);
    } finally {
      db.close();
    }
  }

  describe() {
    return `sqlite:${this.path}`;
  }

  connect() {
    let db;
    try {
      db = new Database(this.path, { timeout: this.busyTimeout });
      db.pragma(`journal_mode = ${SQLITE_JOURNAL_MODE}`);
      db.pragma(`synchronous = ${this.synchronous}`);
      return db;
    } catch (e) {
      db?.close();
      throw storeFault(e);
    }
  }

  session() {
    return new SqliteSession(this.connect());
  }
}

function ensureTables(db) {
  // A database that has every table needs no write lock: opening one that
  // busy writers share would otherwise wait in SQLite's busy handler, which
  // is not fair and can starve a newcomer for seconds.
  const present = db
    .prepare(`SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN (${TABLES.map(() => '?').join(', ')})`)
    .pluck()
    .get(...TABLES.map((t) => `${SQLITE_TABLE_PREFIX}${t}`));
  if (present === TABLES.length) return;
  // Busy can be returned without waiting (WAL recovery): a few more tries.
  for (let attempt = 0; ; attempt++) {
    try {
      db.exec(DDL);
      return;
    } catch (e) {
      if (db.inTransaction) db.exec('ROLLBACK');
      const fault = storeFault(e);
      if (!(fault instanceof StoreConflict) || attempt >= 5) throw fault;
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1 << (attempt + 1));
    }
  }
}

/** Prepared statements of one table. Table names come only from TABLES. */
function statements(db, table) {
  const t = `${SQLITE_TABLE_PREFIX}${table}`;
  return {
    get: db.prepare(`SELECT value FROM ${t} WHERE key = ?`).pluck(),
    put: db.prepare(
      `INSERT INTO ${t} (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value`,
    ),
    delete: db.prepare(`DELETE FROM ${t} WHERE key = ?`),
    // A range on the primary key (BINARY collation: byte order), so the
    // B-tree serves it: O(limit) rows, never a table scan.
    scan: {
      '>': db.prepare(`SELECT key, value FROM ${t} WHERE key > ? AND key < ? ORDER BY key LIMIT ?`).raw(),
      '>=': db.prepare(`SELECT key, value FROM ${t} WHERE key >= ? AND key < ? ORDER BY key LIMIT ?`).raw(),
      '>open': db.prepare(`SELECT key, value FROM ${t} WHERE key > ? ORDER BY key LIMIT ?`).raw(),
      '>=open': db.prepare(`SELECT key, value FROM ${t} WHERE key >= ? ORDER BY key LIMIT ?`).raw(),
    },
  };
}

/** The session protocol every binding speaks (see `./index.js`). */
class SqliteSession {
  constructor(db) {
    this.db = db;
    this.tables = new Map(TABLES.map((t) => [t, statements(db, t)]));
    this.begins = db.prepare('BEGIN IMMEDIATE');
    this.commits = db.prepare('COMMIT');
    this.rollbacks = db.prepare('ROLLBACK');
    this.current = undefined;
  }

  begin() {
    const db = this.db;
    if (!db.open) throw new StoreFailure('the SQLite connection is closed');
    if (this.current?.open) throw new StoreFailure('a transaction is already open on this connection');
    try {
      // Left open by a ROLLBACK that failed: nothing of it can commit now.
      if (db.inTransaction) this.rollbacks.run();
      this.begins.run();
    } catch (e) {
      // A failed BEGIN leaves nothing open (no rollback follows it).
      if (db.inTransaction) {
        try {
          this.rollbacks.run();
        } catch {
          // rolled back by the next begin, or when the connection closes
        }
      }
      throw storeFault(e);
    }
    this.current = new SqliteTxn(this);
    return this.current;
  }

  close() {
    if (this.db.open) this.db.close();
  }
}

class SqliteTxn {
  open = true;

  constructor(session) {
    this.session = session;
  }

  /** Open, as far as the binding and SQLite both know. */
  isOpen() {
    return this.open && this.session.db.inTransaction;
  }

  /** The connection, guarded, for one sink body (see `./lent.js`). */
  lend(report) {
    return new LentConnection(this.session.db, (e) => report(storeFault(e)));
  }

  /**
   * COMMIT. Busy: SQLite did not commit; rolled back here and thrown as
   * `StoreConflict` (safe to re-run). Anything else: `StoreFailure`, and
   * nothing is left open.
   */
  commit() {
    const s = this.#end();
    try {
      s.commits.run();
    } catch (e) {
      if (s.db.inTransaction) {
        try {
          s.rollbacks.run();
        } catch {
          // the connection is unusable; its next BEGIN fails as storage
        }
      }
      throw storeFault(e);
    }
  }

  rollback() {
    if (!this.open) return;
    const s = this.#end();
    try {
      if (s.db.inTransaction) s.rollbacks.run();
    } catch {
      // SQLite rolls back a transaction whose ROLLBACK failed when the
      // connection closes; until then the next BEGIN fails as storage.
    }
  }

  #end() {
    if (!this.open) throw new StoreFailure('no open transaction');
    this.open = false;
    return this.session;
  }

  #table(table) {
    if (!this.open) throw new StoreFailure('no open transaction');
    const s = this.session.tables.get(table);
    if (!s) throw new StoreFailure(`unknown table ${JSON.stringify(table)}`);
    return s;
  }

  /**
   * What one `store.read` asks for: `keys` as [table, key] pairs and
   * `ranges` as {table, prefix, after, limit}, answered in order from the
   * cached statements. BEGIN IMMEDIATE already holds the write lock, so
   * the point reads are serialized against every other writer.
   */
  read(keys, ranges) {
    try {
      const values = new Array(keys.length);
      for (let i = 0; i < keys.length; i++) {
        const [table, key] = keys[i];
        values[i] = this.#table(table).get.get(key) ?? undefined;
      }
      const pages = new Array(ranges.length);
      for (let i = 0; i < ranges.length; i++) {
        const r = ranges[i];
        pages[i] = this.#scan(this.#table(r.table), r.prefix, r.after, r.limit);
      }
      return { values, pages };
    } catch (e) {
      throw storeFault(e);
    }
  }

  /**
   * The call's write set ({table, key, value}; value undefined or null
   * removes the key): one cached statement per entry, in one loop, inside
   * the transaction (so a failure part-way is rolled back with it).
   */
  write(changes) {
    try {
      for (const c of changes) {
        const s = this.#table(c.table);
        if (c.value === undefined || c.value === null) s.delete.run(c.key);
        else s.put.run(c.key, c.value);
      }
    } catch (e) {
      throw storeFault(e);
    }
  }

  #scan(s, prefix, after, limit) {
    const strict = after !== undefined && compareKeys(after, prefix) >= 0;
    const lower = strict ? after : prefix;
    const end = prefixEnd(prefix);
    const op = strict ? '>' : '>=';
    return end === undefined ? s.scan[`${op}open`].all(lower, limit) : s.scan[op].all(lower, end, limit);
  }
}
