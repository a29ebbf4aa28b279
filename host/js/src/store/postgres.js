// The PostgreSQL binding (node-postgres's protocol code on the calling
// thread, `./pg-wire.js`, and a connection it opened on the I/O thread,
// `./pg-io.js`):
// the same tables, keys, server functions (`host/sql/postgres.sql`) and
// answers as the Rust and Python bindings, so hosts of every language share
// one schema (host/HOSTS.md, "PostgreSQL").
//
// Isolation is the shared protocol's: every key a transaction reads or
// writes is locked with a transaction-scoped advisory lock named
// '<schema>/<table>/<key>' and read after the lock is held (`gak_read_v1`),
// under READ COMMITTED; the range reads of the same `read` go on the wire
// after it, so their snapshots start after its locks are granted. Deadlocks
// (40P01), serialization failures (40001) and lock waits longer than the
// connection wait (55P03) are conflicts: the kernel re-runs the whole call.
//
// The session protocol is the one `./index.js` describes, synchronous: each
// request blocks the calling thread until the I/O thread answers (never the
// main thread in `PostgresKernel`, whose calls run on kernel workers).
// `BEGIN` goes out with the transaction's first read; the write set is
// deferred, coalesced (the last write of a key wins) and sent in front of
// the next read or with `COMMIT`: a claim is two requests, `BEGIN` +
// `gak_read_v1`, then `gak_write_v1` + `COMMIT`. The kernel's statements of
// one request share one Sync (`chain`, ./pg-wire.js), so the server answers
// each request at once: one read of the socket, not one per statement.
import { existsSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { StoreConflict, StoreFailure } from './errors.js';
import {
  CONNECTION_WAIT_MS,
  POSTGRES_DEFAULT_SCHEMA,
  POSTGRES_MANY_KEYS_FROM,
  POSTGRES_SETUP_LOCK,
  TABLES,
  prefixEnd,
  validSchema,
} from './facts.js';
import { compareKeys } from './keys.js';
import { GakError } from '../errors.js';
import { Line } from './pg-io.js';
import { refusal } from './pg-lex.js';
import { parsePostgresUrl, target } from './pg-url.js';
import { hidePassword } from './secrets.js';

/** The shared DDL and server functions. */
export const SQL_FILE = fileURLToPath(new URL('../../../sql/postgres.sql', import.meta.url));

/** How long connecting may take (seconds), unless `connect_timeout` says otherwise. */
export const CONNECT_TIMEOUT_S = 5;

const BEGIN = 'BEGIN ISOLATION LEVEL READ COMMITTED';
/** Unnamed, so every COMMIT's text is on the wire (parsed each time: a utility statement costs no plan). */
const COMMIT = { text: 'COMMIT', extended: true, chain: true };
const SSL_MODES = ['disable', 'prefer', 'require', 'verify-ca', 'verify-full'];
/** libpq keywords a URL may carry besides gak's own (`schema`, `clock`, `statement_timeout_ms`). */
const PASSED = ['host', 'port', 'user', 'password', 'dbname', 'application_name', 'connect_timeout', 'sslmode', 'sslrootcert'];

/** A server error (or a lost connection) as the kernel sees it. */
export function pgFault(error) {
  const code = error?.code ?? null;
  const text = code ? `${error.severity ?? 'ERROR'}: ${error.message} (${code})` : String(error?.message ?? error);
  if (code === '40001' || code === '40P01') return new StoreConflict(text);
  if (code === '55P03') return new StoreConflict(`waited longer than the lock timeout (the connection wait): ${text}`);
  return new StoreFailure(text);
}

/** The TLS wanted, as data for the I/O thread: {mode, ca?} (libpq's meaning of `sslmode`). */
function tlsOf(params) {
  const mode = params.sslmode ?? 'prefer';
  if (!SSL_MODES.includes(mode)) {
    throw new StoreFailure(`sslmode=${mode} (expected ${SSL_MODES.join(', ')})`);
  }
  let root = params.sslrootcert;
  const home = join(homedir(), '.postgresql', 'root.crt');
  if (root === undefined && mode.startsWith('verify') && existsSync(home)) root = home;
  if (mode.startsWith('verify') && root === undefined) {
    throw new StoreFailure(
      `sslmode=${mode} needs the roots to trust: sslrootcert=FILE (or sslrootcert=system), or ~/.postgresql/root.crt`,
    );
  }
  if (root === undefined || mode === 'disable' || mode === 'prefer') return { mode };
  // As libpq: with a root given, `require` verifies the chain as `verify-ca` does.
  const verified = mode === 'require' ? 'verify-ca' : mode;
  if (root === 'system') return { mode: verified, system: true };
  try {
    return { mode: verified, ca: readFileSync(root, 'utf8') };
  } catch (e) {
    throw new StoreFailure(`sslrootcert: cannot read ${JSON.stringify(root)} (${e.code ?? e.message})`);
  }
}

function millis(name, text) {
  if (!/^[0-9]{1,9}$/.test(text)) throw new StoreFailure(`${name}=${text} (expected ms)`);
  return Number(text);
}

/**
 * A schema of a PostgreSQL database:
 * `postgres://user@host:port/db?schema=NAME[&clock=db][&statement_timeout_ms=N][&sslmode=…]`.
 */
export class PostgresBackend {
  #url;

  constructor(url, options = {}) {
    this.#url = url;
    try {
      this.#parse(url, options);
      if (options.create !== false) this.ensureSchema();
    } catch (e) {
      if (e instanceof StoreFailure || e instanceof StoreConflict) {
        e.message = `cannot open ${JSON.stringify(hidePassword(url))}: ${scrub(e.message, url)}`;
      }
      throw e;
    }
  }

  #parse(url, options) {
    const parts = parsePostgresUrl(url);
    this.target = target(parts);
    const params = { ...parts.params };
    this.schema = params.schema ?? POSTGRES_DEFAULT_SCHEMA;
    if (!validSchema(this.schema)) {
      throw new StoreFailure(
        `schema ${JSON.stringify(this.schema)}: expected a lowercase identifier ([a-z_][a-z0-9_]*, at most 63 bytes, not pg_*)`,
      );
    }
    const clock = params.clock ?? 'host';
    if (!['db', 'database', 'host'].includes(clock)) throw new StoreFailure(`clock=${clock} (expected db or host)`);
    this.databaseClock = clock !== 'host';
    this.statementTimeout = params.statement_timeout_ms === undefined ? undefined : millis('statement_timeout_ms', params.statement_timeout_ms);
    this.connectionWait = options.connectionWait ?? CONNECTION_WAIT_MS;
    for (const name of Object.keys(params)) {
      if (!['schema', 'clock', 'statement_timeout_ms', ...PASSED].includes(name)) {
        throw new StoreFailure(`unknown PostgreSQL option ${JSON.stringify(name)} (gak takes schema, clock, statement_timeout_ms and ${PASSED.join(', ')})`);
      }
    }
    const hosts = params.host !== undefined ? params.host.split(',').map((h) => [h, null]) : parts.hosts;
    if (hosts.length > 1) throw new StoreFailure('the JavaScript host connects to one host (the URL names several)');
    const [host, port] = hosts[0] ?? ['localhost', null];
    const connectTimeout = params.connect_timeout === undefined ? CONNECT_TIMEOUT_S : Number(params.connect_timeout);
    if (!Number.isFinite(connectTimeout) || connectTimeout < 0) throw new StoreFailure(`connect_timeout=${params.connect_timeout} (expected seconds)`);
    const portText = params.port ?? (port === null ? undefined : String(port));
    this.config = {
      host,
      port: portText === undefined ? 5432 : Number(portText),
      user: params.user ?? parts.user ?? process.env.PGUSER ?? process.env.USER,
      password: params.password ?? parts.password ?? undefined,
      database: params.dbname ?? parts.dbname ?? undefined,
      application_name: params.application_name ?? 'gak-js',
      connectionTimeoutMillis: connectTimeout * 1000,
      // HOSTS.md 15: a lock another transaction holds is waited for at most
      // the connection wait; then the store is busy (55P03, a conflict).
      lock_timeout: this.connectionWait,
      statement_timeout: this.statementTimeout,
      tls: tlsOf(params),
    };
    /** How long a thread waits for one request's answer before it gives the connection up. */
    this.answerWait = connectTimeout * 1000 + (this.statementTimeout ?? 60_000) + 10_000;
    this.lastNow = 0n;
  }

  /** Where it points, never the user information. */
  describe() {
    return `postgres://${this.target} (schema ${this.schema})`;
  }

  /** A new connection on a line of its own. */
  connect() {
    const line = new Line();
    let answer;
    try {
      answer = line.call({ op: 'connect', config: this.config }, this.config.connectionTimeoutMillis + 10_000);
    } catch (e) {
      line.close();
      throw e;
    }
    if (answer.error) {
      line.close();
      throw new StoreFailure(`cannot connect to PostgreSQL at ${this.target}: ${scrub(answer.error.message, this.#url)}`);
    }
    return line;
  }

  /** Run `sql` (no parameters; several statements allowed) in a transaction of its own. */
  #admin(sql) {
    const line = this.connect();
    try {
      const { results, error } = line.call({ op: 'run', statements: [{ text: 'BEGIN' }, { text: sql }, { text: 'COMMIT' }] }, this.answerWait);
      const failed = error ?? results.find((r) => r.error)?.error;
      if (failed) throw pgFault(failed);
    } finally {
      line.close();
    }
  }

  /**
   * Create the schema, its tables and functions if missing: the shared
   * file, after the set-up lock every host takes (idempotent, safe to race).
   */
  ensureSchema() {
    let text;
    try {
      text = readFileSync(SQL_FILE, 'utf8');
    } catch (e) {
      throw new StoreFailure(`cannot read ${SQL_FILE}: ${e.message}`);
    }
    this.#admin(`SELECT pg_advisory_xact_lock(${POSTGRES_SETUP_LOCK});${text.replaceAll('@schema@', this.schema)}`);
  }

  /** Drop the schema and everything in it. */
  dropSchema() {
    this.#admin(`DROP SCHEMA IF EXISTS "${this.schema}" CASCADE`);
  }

  session() {
    return new PostgresSession(this);
  }

  /** The database clock, made monotonic per backend. */
  monotonic(ms) {
    if (ms > this.lastNow) this.lastNow = ms;
    return this.lastNow;
  }

  /** `message` without the URL's password or user information. */
  scrub(message) {
    return scrub(message, this.#url);
  }
}

/** `message` with every piece of `url`'s user information replaced by `***`. */
function scrub(message, url) {
  let out = String(message);
  const start = url.indexOf('://') + 3;
  const at = url.lastIndexOf('@');
  if (start >= 3 && at >= start) {
    const info = url.slice(start, at);
    const colon = info.indexOf(':');
    for (const secret of [info, colon < 0 ? '' : info.slice(colon + 1)]) {
      if (secret.length >= 3) out = out.split(secret).join('***');
    }
  }
  return out;
}

/** Prepared statements' texts for one schema (names are per connection). */
function statementsOf(schema) {
  const range = {};
  for (const t of TABLES) {
    for (const strict of [false, true]) {
      for (const bounded of [false, true]) {
        range[`${t}/${strict}/${bounded}`] = {
          name: `gak_range_${t}_${strict ? 'gt' : 'ge'}_${bounded ? 'lt' : 'open'}`,
          text:
            `SELECT key, value::text FROM "${schema}"."${t}" WHERE key COLLATE "C" ${strict ? '>' : '>='} $1` +
            (bounded ? ' AND key COLLATE "C" < $2' : '') +
            ` ORDER BY key COLLATE "C" LIMIT ${bounded ? '$3' : '$2'}`,
        };
      }
    }
  }
  return {
    // BEGIN on the extended protocol, so it shares the first statement's
    // Sync (as the kernel's statements do: `chain`, ./pg-wire.js).
    begin: { name: 'gak_begin', text: BEGIN, extended: true, chain: true },
    read: { name: 'gak_read', text: `SELECT "${schema}".gak_read_v1($1::text[], $2::text[], $3)` },
    tryRead: { name: 'gak_try_read', text: `SELECT held, vals FROM "${schema}".gak_try_read_v1($1::text[], $2::text[])` },
    write: { name: 'gak_write', text: `SELECT "${schema}".gak_write_v1($1::text[], $2::text[], $3::text[])` },
    // From POSTGRES_MANY_KEYS_FROM keys (a batch's): one statement per table
    // instead of one per key, the same locks and answers.
    readMany: { name: 'gak_read_many', text: `SELECT "${schema}".gak_read_many_v1($1::text[], $2::text[], $3)` },
    writeMany: { name: 'gak_write_many', text: `SELECT "${schema}".gak_write_many_v1($1::text[], $2::text[], $3::text[])` },
    range,
  };
}

function checkedTable(table) {
  if (!TABLES.includes(table)) throw new StoreFailure(`unknown table ${JSON.stringify(table)}`);
  return table;
}

/** One connection; one READ COMMITTED transaction at a time (see the module docs). */
class PostgresSession {
  constructor(backend) {
    this.backend = backend;
    this.sql = statementsOf(backend.schema);
    this.line = undefined;
    this.current = undefined;
    /** What this session sent: statements (BEGIN and COMMIT included) and requests. */
    this.statements = 0;
    this.requests = 0;
  }

  begin() {
    if (this.current?.open) throw new StoreFailure('a transaction is already open on this connection');
    if (!this.line || this.line.broken) {
      this.line = undefined;
      this.line = this.backend.connect();
    }
    this.current = new PostgresTxn(this);
    return this.current;
  }

  /** Send `statements` on the line; the answer ({results, status}), or throw a `StoreFailure` (connection gone). */
  send(statements) {
    this.statements += statements.length;
    this.requests += 1;
    let answer;
    try {
      answer = this.line.call({ op: 'run', statements }, this.backend.answerWait);
    } catch (e) {
      this.drop();
      throw e;
    }
    if (answer.error) {
      this.drop();
      throw new StoreFailure(this.backend.scrub(answer.error.message));
    }
    if (answer.status === null) this.drop();
    return answer;
  }

  /** Send `statements` and do not wait: the line runs them before its next request. */
  post(statements) {
    this.statements += statements.length;
    this.requests += 1;
    this.line.post({ op: 'run', statements, quiet: true });
  }

  /** Forget the connection: the server rolls back whatever it held open. */
  drop() {
    const line = this.line;
    this.line = undefined;
    line?.close();
  }

  close() {
    this.current?.rollback();
    this.drop();
  }
}

class PostgresTxn {
  open = true;
  /** What `lend` hands a body (`down.postgres`). */
  driver = 'postgres';
  /** BEGIN is still to be sent, with the first statement. */
  #beginPending = true;
  /** The write set not sent yet, by table and key: the last write wins. */
  #deferred = new Map();
  /** The connection's transaction status after the last request ('T', 'E', 'I', or null). */
  #status = null;
  /** A write set or a body's statement went out: the end of the transaction matters. */
  #wrote = false;
  /**
   * A read or a probe locked a task's key: the end is waited for even when
   * nothing was written, since a claimer that skips held keys would pass
   * over the task while the lock outlived the call (SPEC 10 allows a
   * pass-over only of what an overlapping call holds).
   */
  #lockedTasks = false;

  constructor(session) {
    this.session = session;
    /** `read` answers the database clock (clock=db). */
    this.clocked = session.backend.databaseClock;
  }

  isOpen() {
    if (this.#foreign) return false;
    return this.open && (this.#beginPending || this.#status === 'T' || this.#status === 'E');
  }

  /**
   * The handle a fenced sink's body gets (`down.postgres`): `query(sql,
   * params)` runs one statement in the kernel's transaction and answers
   * `{rows, rowCount, command}`. Three defences keep the body from ending
   * the transaction (HOSTS.md rule 12), each enough for what the others
   * miss: the text is lexed as the server lexes it and refused before
   * anything is sent when a statement of it begins, ends or splits a
   * transaction, or when it holds more than one (`./pg-lex.js`); it goes
   * out on the extended protocol, where the server refuses several
   * statements; and `txid_current()`, read before the body's first
   * statement and after each, must still name the kernel's transaction —
   * otherwise nothing more is sent (neither the deferred writes nor the
   * COMMIT) and the call ends with `storage`. A statement that failed in
   * the database is reported (`report`): the call ends with `storage` (a
   * conflict re-runs it) however the body handled the error.
   */
  lend(report) {
    let open = true;
    return {
      query: (sql, params = []) => {
        if (!open) throw new GakError('invalid-input', 'this handle was lent to a fenced sink body that has returned');
        if (typeof sql !== 'string') throw new GakError('invalid-input', 'sql: expected a string');
        if (!Array.isArray(params)) throw new GakError('invalid-input', 'params: expected an array');
        if (sql.includes('\0')) throw new GakError('invalid-input', 'a statement holding a NUL character cannot be sent');
        const why = refusal(sql);
        if (why !== undefined) throw new GakError('invalid-input', why);
        return this.#runLent(sql, params.map((p) => (typeof p === 'bigint' ? p.toString() : p)), report);
      },
      revoke: () => {
        open = false;
      },
    };
  }

  /** The kernel's transaction id, read with a body's first statement. */
  #xid;
  /** Why the connection no longer runs the kernel's transaction (a body ended it). */
  #foreign;

  #runLent(sql, params, report) {
    if (!this.open) throw new GakError('invalid-input', 'no open transaction');
    if (this.#foreign) {
      report(new StoreFailure(this.#foreign));
      throw new GakError('storage', `${this.#foreign}; nothing more is sent`);
    }
    this.#wrote = true;
    const XID = { text: 'SELECT txid_current()::text' };
    const statements = [];
    const first = this.#xid === undefined;
    if (first) statements.push(XID);
    statements.push({ text: sql, values: params, extended: true, objects: true });
    statements.push(XID);
    let batch;
    let answer;
    try {
      batch = this.#pending();
      const ours = batch.length;
      batch.push(...statements);
      answer = this.session.send(batch);
      answer.ours = ours;
    } catch (e) {
      if (e?.name === 'DataCloneError') {
        // Refused on this side: nothing reached the server.
        throw new GakError('invalid-input', `params: a value that cannot be sent (${e.message})`);
      }
      this.#status = null;
      report(e instanceof StoreFailure || e instanceof StoreConflict ? e : new StoreFailure(String(e?.message ?? e)));
      throw new GakError('storage', e?.message ?? String(e));
    }
    this.#status = answer.status;
    const results = answer.results;
    const failed = results.find((r) => r.error);
    if (failed) {
      const err = failed.error;
      // Refused by the client before sending (no SQLSTATE, the transaction
      // still open): nothing changed. Anything else ends the call.
      if (err.code !== null || answer.status !== 'T') report(pgFault(err));
      throw Object.assign(new Error(err.message), { name: 'PostgresError', code: err.code ?? undefined, severity: err.severity ?? undefined });
    }
    const mine = results.slice(answer.ours);
    if (first) this.#xid = mine[0]?.rows[0]?.[0];
    const body = mine[first ? 1 : 0];
    const now = mine[first ? 2 : 1]?.rows[0]?.[0];
    if (this.#xid === undefined || now !== this.#xid) {
      this.#foreign = "a body's statement ended the kernel's transaction (another transaction runs now)";
      report(new StoreFailure(this.#foreign));
      throw new GakError('storage', this.#foreign);
    }
    if (answer.status !== 'T') {
      report(new StoreFailure(`a body's statement left the transaction (connection ${answer.status})`));
    }
    return { rows: body.rows, rowCount: body.rowCount, command: body.command };
  }

  #pending() {
    const batch = [];
    if (this.#beginPending) batch.push(this.session.sql.begin);
    if (this.#deferred.size > 0) {
      const tables = [];
      const keys = [];
      const values = [];
      for (const [table, key, value] of this.#deferred.values()) {
        tables.push(table);
        keys.push(key);
        values.push(value ?? null);
      }
      this.#deferred = new Map();
      this.#wrote = true;
      const write = keys.length >= POSTGRES_MANY_KEYS_FROM ? this.session.sql.writeMany : this.session.sql.write;
      batch.push({ ...write, values: [tables, keys, values], chain: true });
    }
    this.#beginPending = false;
    return batch;
  }

  /** Send what is pending and `statements`; the answers of `statements`, or the first error as a fault. */
  #send(statements) {
    if (!this.open) throw new StoreFailure('no open transaction');
    // Whatever runs on the connection now is not the kernel's transaction:
    // none of the kernel's writes may land in it.
    if (this.#foreign) throw new StoreFailure(`${this.#foreign}; nothing more is sent`);
    const batch = this.#pending();
    const ours = batch.length;
    batch.push(...statements);
    let answer;
    try {
      answer = this.session.send(batch);
    } catch (e) {
      this.#status = null;
      throw e;
    }
    this.#status = answer.status;
    const failed = answer.results.find((r) => r.error);
    if (failed) throw pgFault(failed.error);
    return answer.results.slice(ours);
  }

  /**
   * One `store.read`: the point reads first (their locks taken, then the
   * database clock when `clock`), then the range reads, each snapshot
   * taken after the locks were granted (HOSTS.md 1).
   */
  read(keys, ranges, clock = false) {
    this.#noteLocks(keys);
    const statements = [];
    const point = keys.length > 0 || clock;
    if (point) {
      const read = keys.length >= POSTGRES_MANY_KEYS_FROM ? this.session.sql.readMany : this.session.sql.read;
      statements.push({
        ...read,
        values: [keys.map(([t]) => checkedTable(t)), keys.map(([, k]) => k), clock],
        chain: true,
      });
    }
    for (const r of ranges) {
      const strict = r.after !== undefined && compareKeys(r.after, r.prefix) >= 0;
      const end = prefixEnd(r.prefix);
      const lower = strict ? r.after : r.prefix;
      const limit = Number(r.limit);
      statements.push({
        ...this.session.sql.range[`${checkedTable(r.table)}/${strict}/${end !== undefined}`],
        values: end === undefined ? [lower, limit] : [lower, end, limit],
        chain: true,
      });
    }
    if (statements.length === 0) return { values: [], pages: [] };
    const results = this.#send(statements);
    let values = [];
    let now;
    if (point) {
      const found = [...(results[0].rows[0]?.[0] ?? [])];
      if (clock) now = this.session.backend.monotonic(BigInt(Math.max(Number(found.pop()), 0)));
      values = found.map((v) => v ?? undefined);
      if (values.length !== keys.length) throw new StoreFailure(`gak_read_v1 answered ${values.length} values for ${keys.length} keys`);
    }
    const pages = results.slice(point ? 1 : 0).map((r) => r.rows);
    return { values, pages, now };
  }

  /**
   * One `store.try-read`: point reads that pass over the keys another
   * transaction holds (SPEC 10's skip-locked claiming); `{held: true}` for
   * such a key, `{held: false, value}` for the others, read and locked as
   * `read` does.
   */
  tryRead(keys) {
    if (keys.length === 0) return [];
    this.#noteLocks(keys);
    const [result] = this.#send([
      { ...this.session.sql.tryRead, values: [keys.map(([t]) => checkedTable(t)), keys.map(([, k]) => k)], chain: true },
    ]);
    const row = result.rows[0] ?? [];
    const held = [...(row[0] ?? [])];
    const vals = [...(row[1] ?? [])];
    if (held.length !== keys.length || vals.length !== keys.length) {
      throw new StoreFailure(`gak_try_read_v1 answered ${vals.length} values for ${keys.length} keys`);
    }
    return held.map((h, i) => (h ? { held: true } : { held: false, value: vals[i] ?? undefined }));
  }

  #noteLocks(keys) {
    if (!this.#lockedTasks) this.#lockedTasks = keys.some(([t]) => t === 'tasks');
  }

  write(changes) {
    if (!this.open) throw new StoreFailure('no open transaction');
    for (const c of changes) {
      this.#deferred.set(`${checkedTable(c.table)}\u0000${c.key}`, [c.table, c.key, c.value ?? null]);
    }
  }

  /**
   * COMMIT, with the deferred write set. A server error (a deadlock: a
   * conflict) means nothing committed; a lost connection or no answer may
   * have committed: `StoreFailure`, never re-run (HOSTS.md 4).
   */
  commit() {
    if (!this.open) throw new StoreFailure('no open transaction');
    if (this.#beginPending && this.#deferred.size === 0) {
      this.open = false; // nothing was ever sent: nothing to end
      return;
    }
    if (this.#foreign) {
      // Never report committed what is not the kernel's transaction.
      this.rollback();
      throw new StoreFailure(`${this.#foreign}; the kernel committed nothing`);
    }
    if (!this.#beginPending && this.#status !== 'T') {
      const failed = this.#status === 'E';
      this.rollback();
      throw new StoreFailure(
        failed
          ? 'a statement of the transaction failed; it was rolled back, nothing committed'
          : 'no transaction to commit: it was ended inside the call',
      );
    }
    if (!this.#wrote && this.#deferred.size === 0 && !this.#lockedTasks) {
      // Wrote nothing and locked no task: the end only releases locks that
      // other calls wait for, so it is sent and not waited for (a
      // read-only call costs one round trip); the line runs requests in
      // order, so the next transaction starts after it, and a connection
      // it broke is found then.
      this.open = false;
      this.#endUnwaited('COMMIT');
      return;
    }
    let results;
    try {
      // On the extended protocol, sharing the write set's Sync: the write's
      // answer and COMMIT's come back together (an error in the write
      // skips the COMMIT, and the transaction is rolled back below).
      results = this.#send([COMMIT]);
    } catch (e) {
      this.open = false;
      if (this.#status !== null && this.#status !== 'I') this.#rollbackSent();
      throw e;
    }
    this.open = false;
    const said = results[0]?.command;
    if (said !== 'COMMIT') throw new StoreFailure(`COMMIT answered ${JSON.stringify(said)}: nothing was committed`);
  }

  rollback() {
    if (!this.open) return;
    const sent = !this.#beginPending;
    this.open = false;
    this.#deferred = new Map();
    if (sent && this.#status !== null && this.#status !== 'I') {
      if (this.#wrote || this.#lockedTasks || this.#status !== 'T') this.#rollbackSent();
      else this.#endUnwaited('ROLLBACK');
    }
  }

  #endUnwaited(sql) {
    const s = this.session;
    if (!s.line) return;
    try {
      s.post([{ text: sql }]);
    } catch {
      s.drop();
    }
    this.#status = 'I';
  }

  #rollbackSent() {
    const s = this.session;
    if (!s.line) return;
    try {
      const answer = s.send([{ text: 'ROLLBACK' }]);
      if (answer.results[0]?.error || answer.status !== 'I') s.drop();
    } catch {
      s.drop();
    }
    this.#status = 'I';
  }
}
