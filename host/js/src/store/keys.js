// What every binding shares: the fixed table set (generated into facts.js
// from the WIT and host/sql/store.json) and key order.

/**
 * The tables a binding provides: the kernel's (WIT `store.table`), plus
 * `downstream`, the key-value space fenced sink bodies write in the sink's
 * transaction. Same names and order as every host.
 */
export { TABLES, prefixEnd } from './facts.js';

/**
 * Compare two strings by the bytes of their UTF-8 encoding, the order of
 * every binding (SQLite's BINARY collation, PostgreSQL's `COLLATE "C"`).
 * JavaScript's `<` compares UTF-16 code units, which puts U+E000..U+FFFF
 * after the astral planes; shifting the surrogate range up and the rest of
 * the BMP above it down restores code point (= UTF-8 byte) order.
 */
export function compareKeys(a, b) {
  if (a === b) return 0;
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    let x = a.charCodeAt(i);
    let y = b.charCodeAt(i);
    if (x !== y) {
      if (x >= 0xd800 && y >= 0xd800) {
        x = x >= 0xe000 ? x - 0x800 : x + 0x2000;
        y = y >= 0xe000 ? y - 0x800 : y + 0x2000;
      }
      return x < y ? -1 : 1;
    }
  }
  return a.length < b.length ? -1 : a.length > b.length ? 1 : 0;
}
