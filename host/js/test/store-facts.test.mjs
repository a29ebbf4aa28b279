// The store facts every binding shares (host/sql/store.json, generated into
// src/store/facts.js by gak-gen) answer the shared cases of
// tests/store-facts/cases.json, as the Rust and Python hosts do.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import * as facts from '../src/store/facts.js';
import { parsePostgresUrl } from '../src/store/pg-url.js';
import { GakError, hidePassword, openKernel, openStore } from '../src/index.js';

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

// postgres-url: the split every host shares (user information to the last
// `@`, lenient escapes there, strict ones elsewhere), and its refusals.
test('postgres-url: the split and its errors', () => {
  assert.ok(cases['postgres-url'].length > 0);
  for (const [url, expect] of cases['postgres-url']) {
    if (expect.error !== undefined) {
      assert.throws(() => parsePostgresUrl(url), (e) => e.message.includes(expect.error), url);
      continue;
    }
    const got = parsePostgresUrl(url);
    assert.deepEqual(
      { user: got.user, password: got.password, hosts: got.hosts, dbname: got.dbname, params: got.params },
      { ...expect, params: expect.params ?? {} },
      url,
    );
  }
});

// Every message that names a store URL hides everything from `://` to the
// last `@`, user included; refused before any connection is tried (a
// parameter no host knows, or the URL's own error).
test('postgres-url: every message hides the whole user information (to the last @)', async () => {
  assert.ok(cases['postgres-url'].length > 0);
  for (const [url, expect] of cases['postgres-url']) {
    const start = url.indexOf('://') + 3;
    const at = url.lastIndexOf('@');
    const userinfo = at >= start ? url.slice(start, at) : undefined;
    const hidden = hidePassword(url);
    assert.equal(hidden, userinfo === undefined ? url : `${url.slice(0, start)}***${url.slice(at)}`, url);
    const refused = expect.error !== undefined ? url : `${url}${url.slice(at + 1).includes('?') ? '&' : '?'}no_such_option=1`;
    const shown = hidePassword(refused);
    const secrets = [userinfo, expect.user, expect.password].filter((s) => typeof s === 'string' && s.length >= 3);
    const messages = [];
    // A stack's frames name source files (`postgres.js`): only its first line is the message.
    const head = (e) => String(e.stack).split('\n')[0];
    assert.throws(() => openStore(refused), (e) => (messages.push(e.message, head(e)), true), url);
    await assert.rejects(openKernel(refused, { blocking: true }), (e) => {
      assert.ok(e instanceof GakError && e.code === 'storage', `${url}: ${e}`);
      messages.push(e.message, head(e), JSON.stringify(e));
      return true;
    });
    await assert.rejects(openKernel(refused), (e) => {
      assert.ok(e instanceof GakError && e.code === 'storage', `${url}: ${e}`);
      messages.push(e.message, head(e), JSON.stringify(e));
      return true;
    });
    for (const m of messages) {
      assert.ok(m.includes(shown), `${url}: the message names the URL hidden: ${m}`);
      if (userinfo === undefined) continue;
      assert.ok(!m.includes(`${userinfo}@`), `${url}: the message shows the user information: ${m}`);
      // Short user names ("u") are words of any sentence: the longer ones
      // must not show anywhere but in the scheme the hidden URL keeps.
      const rest = m.split(shown).join('');
      for (const secret of secrets) assert.ok(!rest.includes(secret), `${url}: the message shows ${JSON.stringify(secret)}: ${m}`);
    }
  }
});

test('the SQLite schema creates every table', () => {
  for (const t of facts.TABLES) {
    assert.ok(facts.SQLITE_SCHEMA.includes(`CREATE TABLE IF NOT EXISTS ${facts.SQLITE_TABLE_PREFIX}${t} (`), t);
  }
  assert.equal(facts.SQLITE_SCHEMA.split('CREATE TABLE').length - 1, facts.TABLES.length);
});

test('the protocol numbers are the ones the host uses (tests/store-facts/cases.json: protocol)', async () => {
  const engine = await import('../src/engine.js');
  const values = await import('../src/values.js');
  const wasi = await import('../src/wasi.js');
  // JavaScript has one thread and no pool: a connection wait and a pool
  // size do not apply to it.
  const used = {
    'retry-attempts': engine.MAX_ATTEMPTS,
    'retry-base-ms': engine.RETRY_BASE_MS,
    'retry-max-ms': engine.RETRY_MAX_MS,
    'max-value-bytes': values.MAX_VALUE_BYTES,
    'max-list-items': values.MAX_LIST_ITEMS,
    'max-call-bytes': values.MAX_CALL_BYTES,
    'max-entropy': wasi.MAX_ENTROPY,
  };
  let checked = 0;
  for (const [name, want] of cases.protocol) {
    if (name === 'connection-wait-ms' || name === 'max-connections') continue;
    assert.ok(name in used, `no such protocol number: ${name}`);
    assert.equal(used[name], want, name);
    checked++;
  }
  assert.equal(checked, Object.keys(used).length);
});
