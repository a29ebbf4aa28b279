// The in-memory binding: one ordered map per table, one writer at a time.
//
// A transaction keeps its writes in an overlay until it commits, so it is
// all-or-nothing. JavaScript runs one call at a time and a transaction never
// spans an `await` (the API is synchronous), so transactions on one store
// cannot interleave; a second `begin` while one is open can only come from
// re-entrancy, and is refused.
import { StoreFailure } from './errors.js';
import { TABLES, compareKeys } from './keys.js';

/**
 * One table: values by key, and the keys in byte order as a list of sorted
 * chunks of at most 2 × CHUNK keys (a full chunk splits in two), so an
 * insert or delete moves at most that many keys instead of the whole table
 * (a single sorted array made each write O(table size), which dominated a
 * claim on a board of thousands of tasks). 128: the chunk's `splice` and
 * the search over chunks cost least together (4 index writes on a board
 * of 50,000 tasks: ~4.0 µs of CPU at 64 or 128, ~5 µs at 256).
 */
const CHUNK = 128;

// A code unit where JavaScript's `<` (UTF-16 code unit order) and UTF-8
// byte order can disagree: two keys are ordered alike by both unless the
// first units they differ in are both at or above U+D800.
const HIGH_UNIT = /[\uD800-\uFFFF]/;

export class SortedTable {
  chunks = [];
  values = new Map();

  /** Position [chunk, index] of the first key >= `key` (or > `key` when `strict`), in byte order. */
  lowerBound(key, strict) {
    // A probe without a high unit (every key the component writes today
    // is ASCII) can never meet the case where the orders disagree, so it
    // is compared with `<`, natively: compareKeys' loop made a binary
    // search over a board of 50,000 tasks ~1.8 µs, a quarter of a memory
    // claim's time in this binding.
    const below = !HIGH_UNIT.test(key)
      ? strict
        ? (k) => k <= key
        : (k) => k < key
      : (k) => {
          const c = compareKeys(k, key);
          return c < 0 || (strict && c === 0);
        };
    const chunks = this.chunks;
    // The first chunk whose last key is not below `key`.
    let lo = 0;
    let hi = chunks.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      const c = chunks[mid];
      if (below(c[c.length - 1])) lo = mid + 1;
      else hi = mid;
    }
    if (lo === chunks.length) return [lo, 0];
    const c = chunks[lo];
    let l = 0;
    let h = c.length;
    while (l < h) {
      const mid = (l + h) >>> 1;
      if (below(c[mid])) l = mid + 1;
      else h = mid;
    }
    return [lo, l];
  }

  set(key, value) {
    if (!this.values.has(key)) {
      const chunks = this.chunks;
      if (chunks.length === 0) {
        chunks.push([key]);
      } else {
        let [ci, i] = this.lowerBound(key, false);
        if (ci === chunks.length) {
          ci -= 1;
          i = chunks[ci].length;
        }
        const c = chunks[ci];
        c.splice(i, 0, key);
        if (c.length > 2 * CHUNK) chunks.splice(ci + 1, 0, c.splice(CHUNK));
      }
    }
    this.values.set(key, value);
  }

  delete(key) {
    if (!this.values.delete(key)) return;
    const [ci, i] = this.lowerBound(key, false);
    const c = this.chunks[ci];
    c.splice(i, 1);
    if (c.length === 0) this.chunks.splice(ci, 1);
  }

  /** Keys from position `at` on, in order. */
  *keysFrom([ci, i]) {
    for (; ci < this.chunks.length; ci++, i = 0) {
      const c = this.chunks[ci];
      for (; i < c.length; i++) yield c[i];
    }
  }

  /** Every key, in order. */
  keys() {
    return this.keysFrom([0, 0]);
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
    for (const [name, t] of this.tables) for (const k of t.keys()) out.push([name, k, t.values.get(k)]);
    return out;
  }
}

/** The session protocol every binding speaks (see `./index.js`). */
class MemorySession {
  constructor(backend) {
    this.backend = backend;
  }

  begin() {
    const backend = this.backend;
    if (backend.busy) {
      throw new StoreFailure('a transaction is already open on this memory store');
    }
    backend.busy = true;
    return new MemoryTxn(backend);
  }

  close() {}
}

class MemoryTxn {
  /** table -> Map(key -> value, or null for a delete) */
  overlay = new Map();
  open = true;

  constructor(backend) {
    this.backend = backend;
    this.tables = backend.tables;
  }

  isOpen() {
    return this.open;
  }

  /** No driver to lend: bodies use `downstream.get` / `put`. */
  lend() {
    return undefined;
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

  #get(table, key) {
    const t = this.#check(table);
    const pending = this.overlay.get(table);
    if (pending?.has(key)) return pending.get(key) ?? undefined;
    return t.values.get(key);
  }

  /**
   * What one `store.read` asks for: `keys` as [table, key] pairs and
   * `ranges` as {table, prefix, after, limit}, answered in order, seeing
   * this transaction's own writes. No locks: transactions on one memory
   * store never interleave (see the module comment).
   */
  read(keys, ranges) {
    const values = new Array(keys.length);
    for (let i = 0; i < keys.length; i++) values[i] = this.#get(keys[i][0], keys[i][1]);
    const pages = new Array(ranges.length);
    for (let i = 0; i < ranges.length; i++) {
      const r = ranges[i];
      pages[i] = this.#scan(r.table, r.prefix, r.after, r.limit);
    }
    return { values, pages };
  }

  /**
   * The call's write set ({table, key, value}; value undefined or null
   * removes the key), into the overlay: visible to this transaction's
   * later reads, applied to the tables only by `commit`. Every table is
   * checked first, so a bad entry leaves the overlay as it was.
   */
  write(changes) {
    for (const c of changes) this.#check(c.table);
    for (const c of changes) this.#pending(c.table).set(c.key, c.value ?? null);
  }

  #scan(table, prefix, after, limit) {
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
    for (const k of t.keysFrom(t.lowerBound(lower, strict))) {
      if (merged.size >= limit + deleted || !k.startsWith(prefix)) break;
      merged.set(k, t.values.get(k));
    }
    for (const [k, v] of pending) merged.set(k, v);
    return [...merged]
      .filter(([, v]) => v !== null)
      .sort(([a], [b]) => compareKeys(a, b))
      .slice(0, limit);
  }

  /** Apply the overlay. Cannot fail: nothing was applied unless it returns. */
  commit() {
    this.#end();
    for (const [table, pending] of this.overlay) {
      const t = this.tables.get(table);
      for (const [k, v] of pending) {
        if (v === null) t.delete(k);
        else t.set(k, v);
      }
    }
  }

  rollback() {
    if (this.open) this.#end();
  }

  #end() {
    if (!this.open) throw new StoreFailure('no open transaction');
    this.open = false;
    this.backend.busy = false;
  }
}
