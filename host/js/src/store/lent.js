// The SQLite connection a fenced sink's body may use, inside the kernel's
// transaction (HOSTS.md rule 12: a body never ends the transaction the host
// opened; any store error it meets ends the call).
//
// Handing a body the better-sqlite3 `Database` itself let it run `COMMIT`
// in the middle of the call: the fence and the body's writes became durable,
// the kernel's own COMMIT then failed, and a caller that retried on that
// `storage` applied the effect twice. better-sqlite3 exposes no authorizer
// (which is how the Rust host refuses), so the body gets this stand-in:
// `prepare` / `exec` refuse transaction control by the statements' leading
// keywords (lexed by SQLite's rules), every error SQLite raises for a
// statement is reported to the call (as on PostgreSQL, where it aborts the
// transaction; what was refused before reaching SQLite — here or by
// better-sqlite3's own checks — is not), and the whole thing stops working
// when the body returns (a body cannot keep it for later; its unfinished
// iterators are closed). The engine still checks afterwards that the
// transaction is open.
import { GakError } from '../errors.js';
import { TRANSACTION_CONTROL } from './facts.js';

/**
 * The phrases (as word lists) that lead a statement beginning, ending or
 * splitting a transaction: every host's list (host/sql/store.json). SQLite
 * has no START, ABORT or PREPARE TRANSACTION statement, but refusing them
 * here too makes a body that writes one behave as on PostgreSQL (refused,
 * the call goes on) instead of meeting SQLite's syntax error (which ends
 * the call).
 */
const CONTROL = TRANSACTION_CONTROL.map((phrase) => phrase.split(' '));

const ASCII = /^[\x00-\x7f]*$/;
const TEMP = new Set(['TEMP', 'TEMPORARY']);
const isWordStart = (c) => (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c === '_' || c > '\x7f';
const isWord = (c) => isWordStart(c) || (c >= '0' && c <= '9') || c === '$';

/**
 * The first keywords (upper case, up to 3; '' for a token that is not a
 * keyword) of every statement of `sql`, in order: SQLite's lexical rules
 * for comments (`--` to the end of the line, `/* *\/` not nested), quoted
 * strings and identifiers (`'…'`, `"…"`, `` `…` ``, `[…]`) and `;`,
 * including the semicolons inside a `CREATE TRIGGER … BEGIN … END` body
 * (and the `CASE … END` expressions in it), which do not end the statement.
 */
export function statementWords(sql) {
  const out = [];
  let words = []; // the statement's first keywords, up to 3
  let trigger = false; // a CREATE [TEMP] TRIGGER statement
  let body = false; // inside its BEGIN … END
  let cases = 0;
  const n = sql.length;
  let i = 0;
  const word = (w) => {
    // Keywords are ASCII, and SQLite folds only ASCII letters: `commıt`
    // (dotless i) is an identifier there, not COMMIT.
    const upper = ASCII.test(w) ? w.toUpperCase() : w;
    if (words.length === 0) out.push(words);
    if (words.length < 3) {
      words.push(upper);
      // Exactly SQLite's `CREATE [TEMP|TEMPORARY] TRIGGER`: a TRIGGER
      // anywhere else (`CREATE TABLE trigger(begin); COMMIT; END`) is a
      // name, and taking it for a trigger hid the COMMIT behind a "body".
      if (upper === 'TRIGGER' && words[0] === 'CREATE' && (words.length === 2 || TEMP.has(words[1]))) trigger = true;
    }
    if (!trigger) return;
    if (!body) {
      if (upper === 'BEGIN') body = true;
    } else if (upper === 'CASE') cases++;
    else if (upper === 'END') {
      if (cases > 0) cases--;
      else body = false;
    }
  };
  while (i < n) {
    const c = sql[i];
    if (c === '-' && sql[i + 1] === '-') {
      const eol = sql.indexOf('\n', i);
      i = eol < 0 ? n : eol + 1;
    } else if (c === '/' && sql[i + 1] === '*') {
      const end = sql.indexOf('*/', i + 2);
      i = end < 0 ? n : end + 2;
    } else if (c === "'" || c === '"' || c === '`' || c === '[') {
      const close = c === '[' ? ']' : c;
      let j = i + 1;
      for (;;) {
        j = sql.indexOf(close, j);
        if (j < 0) {
          j = n;
          break;
        }
        if (close !== ']' && sql[j + 1] === close) j += 2; // '' inside '…'
        else break;
      }
      // A quoted token is not a keyword but starts a statement all the same.
      if (words.length === 0) out.push(words);
      if (words.length < 3) words.push('');
      i = j + 1;
    } else if (c === '\ufeff') {
      // A byte-order mark where a token starts is a space to SQLite's
      // tokenizer (`\ufeffROLLBACK` runs ROLLBACK); inside a name it is a
      // letter like any non-ASCII character.
      i++;
    } else if (c === ';') {
      if (!body) {
        words = [];
        trigger = false;
        cases = 0;
      }
      i++;
    } else if (isWordStart(c)) {
      let j = i + 1;
      while (j < n && isWord(sql[j])) j++;
      word(sql.slice(i, j));
      i = j;
    } else if (c === ' ' || c === '\t' || c === '\n' || c === '\r' || c === '\f' || c === '\v') {
      // SQLite's spaces, and `\v`, which its tokenizer rejects as illegal:
      // taken as a space here, a control word after it is refused up front
      // (as PostgreSQL 16+, where `\v` is a space, would) rather than
      // reaching SQLite's syntax error, which would end the call.
      i++;
    } else {
      if (words.length === 0) out.push(words);
      if (words.length < 3) words.push('');
      i++;
    }
  }
  return out;
}

/** The leading keyword (upper case; '' for none) of every statement of `sql`, in order. */
export function leadingKeywords(sql) {
  return statementWords(sql).map((words) => words[0]);
}

/** The first transaction-control phrase (`COMMIT`, `PREPARE TRANSACTION`) leading a statement of `sql`, or undefined. */
export function transactionControl(sql) {
  for (const words of statementWords(sql)) {
    const phrase = CONTROL.find((p) => p.every((w, k) => words[k] === w));
    if (phrase) return phrase.join(' ');
  }
  return undefined;
}

function refuseControl(sql) {
  if (typeof sql !== 'string') return;
  const keyword = transactionControl(sql);
  if (keyword !== undefined) {
    throw new GakError(
      'invalid-input',
      `${keyword} is refused inside a fenced sink body: the kernel owns the transaction (HOSTS.md rule 12)`,
    );
  }
}

/**
 * A better-sqlite3 connection lent to one body: `prepare(sql)` and
 * `exec(sql)` as better-sqlite3's, minus transaction control. Every error
 * SQLite raises through it is thrown to the body AND passed to `report`,
 * so the call ends with `storage` (or re-runs on a busy database) even if the
 * body catches it.
 */
export class LentConnection {
  #db;
  #report;
  #open = true;
  // better-sqlite3 iterators the body started and has not finished. One left
  // open keeps the connection busy: the kernel's own COMMIT and every later
  // BEGIN would fail ("busy executing a query") with the write lock held.
  #iterators = new Set();

  constructor(db, report) {
    this.#db = db;
    this.#report = report;
  }

  /** @internal Called when the body returns: the handle stops working, its iterators are closed. */
  revoke() {
    this.#open = false;
    for (const it of this.#iterators) {
      try {
        it.return();
      } catch {
        // closing resets the statement; nothing the call depends on
      }
    }
    this.#iterators.clear();
  }

  /** @internal An iterator of this connection's statements, closed at `revoke` unless `untrack`ed first. */
  track(it) {
    this.#iterators.add(it);
    return () => this.#iterators.delete(it);
  }

  /** @internal */
  guard(fn) {
    if (!this.#open) {
      throw new GakError('invalid-input', 'this connection was lent to a fenced sink body that has returned');
    }
    try {
      return fn();
    } catch (e) {
      // SQLite's own errors (SqliteError, code SQLITE_*); better-sqlite3's
      // argument checks (TypeError, RangeError) never reached the database.
      if (typeof e?.code === 'string' && e.code.startsWith('SQLITE_')) this.#report(e);
      throw e;
    }
  }

  /** True while the body runs (the kernel's transaction is open). */
  get inTransaction() {
    return this.#open && this.#db.inTransaction;
  }

  /** A prepared statement on the kernel's transaction (one statement; no transaction control). */
  prepare(sql) {
    refuseControl(sql);
    return new LentStatement(this, this.guard(() => this.#db.prepare(sql)));
  }

  /** Run every statement of `sql` (none of them transaction control). */
  exec(sql) {
    refuseControl(sql);
    this.guard(() => this.#db.exec(sql));
    return this;
  }
}

/** A better-sqlite3 `Statement` through its lent connection (no `.database`). */
class LentStatement {
  #lent;
  #stmt;

  constructor(lent, stmt) {
    this.#lent = lent;
    this.#stmt = stmt;
  }

  get source() {
    return this.#stmt.source;
  }

  get reader() {
    return this.#stmt.reader;
  }

  get readonly() {
    return this.#stmt.readonly;
  }

  run(...params) {
    return this.#lent.guard(() => this.#stmt.run(...params));
  }

  get(...params) {
    return this.#lent.guard(() => this.#stmt.get(...params));
  }

  all(...params) {
    return this.#lent.guard(() => this.#stmt.all(...params));
  }

  *iterate(...params) {
    const it = this.#lent.guard(() => this.#stmt.iterate(...params));
    const untrack = this.#lent.track(it);
    try {
      for (;;) {
        const step = this.#lent.guard(() => it.next());
        if (step.done) return;
        yield step.value;
      }
    } finally {
      untrack();
      it.return?.();
    }
  }

  columns() {
    return this.#lent.guard(() => this.#stmt.columns());
  }

  pluck(...on) {
    this.#lent.guard(() => this.#stmt.pluck(...on));
    return this;
  }

  expand(...on) {
    this.#lent.guard(() => this.#stmt.expand(...on));
    return this;
  }

  raw(...on) {
    this.#lent.guard(() => this.#stmt.raw(...on));
    return this;
  }

  safeIntegers(...on) {
    this.#lent.guard(() => this.#stmt.safeIntegers(...on));
    return this;
  }

  bind(...params) {
    this.#lent.guard(() => this.#stmt.bind(...params));
    return this;
  }
}
