// The store facts every binding shares (host/sql/store.json, generated into
// src/store/facts.js by gak-gen) answer the shared cases of
// tests/store-facts/cases.json, as the Rust and Python hosts do.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import * as facts from '../src/store/facts.js';

const cases = JSON.parse(readFileSync(new URL('../../../tests/store-facts/cases.json', import.meta.url), 'utf8'));

test('prefixEnd answers the shared cases', () => {
  assert.ok(cases['prefix-end'].length > 0);
  for (const [prefix, end] of cases['prefix-end']) {
    assert.equal(facts.prefixEnd(prefix), end ?? undefined, `prefixEnd(${JSON.stringify(prefix)})`);
  }
});

test('storeKind answers the shared cases', () => {
  assert.ok(cases['store-kind'].length > 0);
  for (const [url, kind] of cases['store-kind']) {
    assert.equal(facts.storeKind(url), kind ?? undefined, `storeKind(${JSON.stringify(url)})`);
  }
});

test('validSchema answers the shared cases', () => {
  assert.ok(cases['valid-schema'].length > 0);
  for (const [name, valid] of cases['valid-schema']) {
    assert.equal(facts.validSchema(name), valid, `validSchema(${JSON.stringify(name)})`);
  }
});

test('the SQLite schema creates every table', () => {
  for (const t of facts.TABLES) {
    assert.ok(facts.SQLITE_SCHEMA.includes(`CREATE TABLE IF NOT EXISTS ${facts.SQLITE_TABLE_PREFIX}${t} (`), t);
  }
  assert.equal(facts.SQLITE_SCHEMA.split('CREATE TABLE').length - 1, facts.TABLES.length);
});
