// Key order and prefix ranges, shared by every binding.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { compareKeys, prefixEnd } from '../src/store/keys.js';

const bytes = (a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b));

test('compareKeys is UTF-8 byte order', () => {
  const samples = ['', 'a', 'ab', 'b', 'é', '\uD7FF', '\uE000', '\uFFFD', '\uFFFF', '😀', '\u{10FFFF}', 'a😀', 'a\uFFFF'];
  for (const a of samples) {
    for (const b of samples) assert.equal(Math.sign(compareKeys(a, b)), Math.sign(bytes(a, b)), `${a} vs ${b}`);
  }
});

test('prefixEnd bounds exactly the prefixed strings (as the Rust host)', () => {
  assert.equal(prefixEnd(''), undefined);
  assert.equal(prefixEnd('ts/open/'), 'ts/open0');
  assert.equal(prefixEnd('a\u{10FFFF}'), 'b');
  assert.equal(prefixEnd('\uD7FF'), '\uE000');
  assert.equal(prefixEnd('\u{10FFFF}'), undefined);
  const end = prefixEnd('ab');
  for (const inside of ['ab', 'ab\u{10FFFF}\u{10FFFF}', 'abz']) assert.ok(compareKeys(inside, end) < 0, inside);
  assert.ok(compareKeys('ac', end) >= 0);
});

test('the memory table keeps byte order through inserts, deletes and chunk splits', async () => {
  const { SortedTable } = await import('../src/store/memory.js');
  const table = new SortedTable();
  const model = new Set();
  // A deterministic generator: no flakiness, and enough keys to split and
  // empty chunks many times over (chunks hold at most 256 keys).
  let x = 12345;
  const next = () => (x = (x * 1103515245 + 12345) % 2147483648);
  const alphabet = ['a', 'b', 'é', '\uE000', '😀', '/', '0'];
  const key = () => Array.from({ length: 1 + (next() % 6) }, () => alphabet[next() % alphabet.length]).join('');
  for (let round = 0; round < 20000; round++) {
    const k = key();
    if (next() % 3 === 0) {
      table.delete(k);
      model.delete(k);
    } else {
      table.set(k, round);
      model.add(k);
    }
    if (round % 997 === 0 || round === 19999) {
      const want = [...model].sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
      assert.deepEqual([...table.keys()], want, `after ${round} operations`);
      // lowerBound agrees with the model for present and absent keys.
      // (Probes with and without code units >= U+D800: the search compares
      // the latter natively.)
      for (const probe of [k, key(), key(), 'a/0', '\uE000a', '😀']) {
        const at = [...table.keysFrom(table.lowerBound(probe, true))];
        assert.deepEqual(at, want.filter((w) => compareKeys(w, probe) > 0), `after ${probe}`);
        const from = [...table.keysFrom(table.lowerBound(probe, false))];
        assert.deepEqual(from, want.filter((w) => compareKeys(w, probe) >= 0), `from ${probe}`);
      }
    }
  }
  assert.ok(table.chunks.length > 1, 'the test never split a chunk');
});
