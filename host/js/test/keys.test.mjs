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
