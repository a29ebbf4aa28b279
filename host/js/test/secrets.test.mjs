// HOSTS.md rule 14: no error or description shows a store URL's password —
// PostgreSQL URLs (which this host refuses: it has no binding), unknown
// schemes, bad options; whatever characters the password holds. The shared
// cases (tests/host-protocol/urls.json) replay in host-protocol.test.mjs;
// these add the command line and passwords of every awkward shape.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { GakError, hidePassword, openKernel, openStore } from '../src/index.js';

const CLI = fileURLToPath(new URL('../bin/gak.mjs', import.meta.url));

// [url, secret]: every one must fail to open, and never show its secret.
const URLS = [
  ['postgres://alice:S3CRET@127.0.0.1:1/db', 'S3CRET'],
  ['postgresql://alice:S3CRET@127.0.0.1:1/x?sslmode=require', 'S3CRET'],
  ['POSTGRES://alice:S3CRET@127.0.0.1:1/x', 'S3CRET'],
  ['postgresql+psycopg://alice:S3CRET@127.0.0.1:1/db', 'S3CRET'],
  ['mysql://alice:p/a?s#s w0rd@127.0.0.1:1/db', 'p/a?s#s w0rd'],
  ['redis://:only-a-password@cache:6379', 'only-a-password'],
  ['mysql://bob:with@an@sign@h/x.db', 'with@an@sign'],
  ['mysql://bob:tail.db@h/x.db', 'tail.db'],
  ['weird://h/x?user=bob&password=hunter2&x=1', 'hunter2'],
  ['sqlite:/tmp/gak-never.db?password=hunter2', 'hunter2'],
];

function shows(error, secret) {
  for (let e = error; e !== undefined && e !== null; e = e.cause) {
    for (const shown of [e.message, String(e), e.stack, JSON.stringify(e), e.detail]) {
      if (typeof shown === 'string' && shown.includes(secret)) return shown;
    }
  }
  return undefined;
}

test('hidePassword hides the whole user information (to the last @), and password= options', () => {
  assert.equal(hidePassword('postgres://alice:S3CRET@db:5432/x'), 'postgres://***@db:5432/x');
  assert.equal(hidePassword('mysql://alice:p/a?s#s w0rd@127.0.0.1:1/db'), 'mysql://***@127.0.0.1:1/db');
  assert.equal(hidePassword('x://:pw@h'), 'x://***@h');
  // The user alone is hidden too (a password-only URL puts the password there).
  assert.equal(hidePassword('postgres://alice@db/x'), 'postgres://***@db/x');
  assert.equal(hidePassword('postgres://S3CRET@db/x'), 'postgres://***@db/x');
  assert.equal(hidePassword('postgres://alice:p@ss@db/x?sslmode=disable'), 'postgres://***@db/x?sslmode=disable');
  assert.equal(hidePassword('x://h/db?password=a b&c=d'), 'x://h/db?password=***&c=d');
  // Nothing to hide: shown as it is.
  for (const url of ['postgres://db:5432/x', 'postgres://db/x?sslmode=disable', 'sqlite:/tmp/a.db', 'memory:']) {
    assert.equal(hidePassword(url), url);
  }
});

test('opening a store never shows its password, whatever it holds', async () => {
  for (const [url, secret] of URLS) {
    assert.throws(() => openStore(url), (e) => !shows(e, secret), url);
    await assert.rejects(openKernel(url), (e) => {
      assert.ok(e instanceof GakError && e.code === 'storage', `${url}: ${e}`);
      assert.equal(shows(e, secret), undefined, url);
      return true;
    });
  }
});

test('a PostgreSQL server that cannot be reached is storage, naming the server without the password', async () => {
  for (const blocking of [true, false]) {
    await assert.rejects(openKernel('postgres://alice:S3CRET@127.0.0.1:1/x?connect_timeout=2', { blocking }), (e) => {
      assert.ok(e instanceof GakError && e.code === 'storage', String(e));
      assert.match(e.message, /postgres:\/\/\*\*\*@127\.0\.0\.1:1\/x/);
      assert.match(e.message, /cannot connect to PostgreSQL at 127\.0\.0\.1:1\/x/);
      assert.ok(!e.message.includes('S3CRET') && !e.message.includes('alice'), e.message);
      return true;
    });
  }
});

test('the command line never shows a store password', () => {
  for (const [url, secret] of URLS) {
    for (const command of ['conformance', 'demo']) {
      const r = spawnSync(process.execPath, [CLI, command, '--store', url], { encoding: 'utf8' });
      assert.notEqual(r.status, 0, `${command} ${url}`);
      assert.ok(!r.stdout.includes(secret) && !r.stderr.includes(secret), `${command} ${url}:\n${r.stdout}${r.stderr}`);
    }
  }
});
