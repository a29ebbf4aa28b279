// The in-memory binding: one ordered map per table, one writer at a time.
//
// A transaction keeps its writes in an overlay until it commits, so it is
// all-or-nothing. JavaScript runs one call at a time and a transaction never
// spans an `await` (the API is synchronous), so transactions on one store
// cannot interleave; a second `transaction` while one is open can only come
// from re-entrancy, and is refused.
import { StoreFailure } from './errors.js';
import { TABLES, compareKeys } from './keys.js';

/** One table: keys kept sorted in byte order, values by key. */
class SortedTable {
  keys = [];
  values = new Map();

  /** Index of the first key >= `key` (or > `key` when `strict`). */
  lowerBound(key, strict) {
    let lo = 0;
    let hi = this.keys.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      const c = compareKeys(this.keys[mid], key);
      if (c < 0 || (strict && c === 0)) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  set(key, value) {
    if (!this.values.has(key)) this.keys.splice(this.lowerBound(key, false), 0, key);
    this.values.set(key, value);
  }

  delete(key) {
    if (this.values.delete(key)) this.keys.splice(this.lowerBound(key, false), 1);
  }
}

function checkedTable(tables, table) {
  const t = tables.get(table);
  if (!t) throw new StoreFailure(`unknown table ${JSON.stringify(table)}`);
  return t;
}

/** An in-memory store shared by every session (kernel) made from it. */
export class MemoryBackend {
  tables = new Map(TABLES.map((t) => [t, new SortedTable()]));
  busy = false;

  describe() {
    return 'memory';
  }

  session() {
    return new MemorySession(this);
  }

  /** Every entry as [table, key, value], in table then key order. */
  dump() {
    const out = [];
    for (const [name, t] of this.tables) for (const k of t.keys) out.push([name, k, t.values.get(k)]);
    return out;
  }
}

class MemorySession {
  constructor(backend) {
    this.backend = backend;
  }

  transaction(body) {
    const backend = this.backend;
    if (backend.busy) {
      throw new StoreFailure('a transaction is already open on this memory store');
    }
    backend.busy = true;
    const txn = new MemoryTxn(backend.tables);
    try {
      const result = body(txn);
      txn.commit();
      return result;
    } finally {
      txn.open = false;
      backend.busy = false;
    }
  }

  close() {}
}

class MemoryTxn {
  /** table -> Map(key -> value, or null for a delete) */
  overlay = new Map();
  open = true;
  sqlite = undefined;

  constructor(tables) {
    this.tables = tables;
  }

  #check(table) {
    if (!this.open) throw new StoreFailure('no open transaction');
    return checkedTable(this.tables, table);
  }

  #pending(table) {
    let p = this.overlay.get(table);
    if (!p) this.overlay.set(table, (p = new Map()));
    return p;
  }

  get(table, key) {
    const t = this.#check(table);
    const pending = this.overlay.get(table);
    if (pending?.has(key)) return pending.get(key) ?? undefined;
    return t.values.get(key);
  }

  getMany(keys) {
    return keys.map(([table, key]) => this.get(table, key));
  }

  put(table, key, value) {
    this.#check(table);
    this.#pending(table).set(key, value);
  }

  delete(table, key) {
    this.#check(table);
    this.#pending(table).set(key, null);
  }

  scan(table, prefix, after, limit) {
    const t = this.#check(table);
    // Committed keys from the index, then this transaction's own writes
    // (which win), merged in byte order. Reads O(limit + pending).
    const strict = after !== undefined && compareKeys(after, prefix) >= 0;
    const lower = strict ? after : prefix;
    const inRange = (k) =>
      k.startsWith(prefix) && (strict ? compareKeys(k, lower) > 0 : compareKeys(k, lower) >= 0);
    const pending = [...(this.overlay.get(table) ?? [])].filter(([k]) => inRange(k));
    const deleted = pending.filter(([, v]) => v === null).length;
    const merged = new Map();
    for (let i = t.lowerBound(lower, strict); i < t.keys.length && merged.size < limit + deleted; i++) {
      const k = t.keys[i];
      if (!k.startsWith(prefix)) break;
      merged.set(k, t.values.get(k));
    }
    for (const [k, v] of pending) merged.set(k, v);
    return [...merged]
      .filter(([, v]) => v !== null)
      .sort(([a], [b]) => compareKeys(a, b))
      .slice(0, limit);
  }

  commit() {
    for (const [table, pending] of this.overlay) {
      const t = this.tables.get(table);
      for (const [k, v] of pending) {
        if (v === null) t.delete(k);
        else t.set(k, v);
      }
    }
  }
}
