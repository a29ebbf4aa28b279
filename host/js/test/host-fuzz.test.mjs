// The host-protocol fuzzers (tests/host-protocol/README.md, "Fuzzers"):
// every generated case of tests/host-protocol/fuzz/ (or $GAK_HOST_FUZZ_DIR)
// replayed against this host, one named subtest per case, on SQLite and
// PostgreSQL (skipped without a server, failed without one under CI=true).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ManualClock, openKernel } from '../src/index.js';
import { CLI_COMMANDS, FUZZ_DIR, URL_ENTRY_POINTS, fuzzFile, replayRetry, replayRetryPostgres, replaySql, tryCli, tryPassword, withPassword } from './fixtures/fuzz.mjs';
import { needsPostgres, schemaUrl } from './fixtures/pg.mjs';
import { ScriptedBackend } from './fixtures/scripted.mjs';

const label = (text) => JSON.stringify(text).slice(0, 80);

test("sql.json [sqlite]", async (t) => {
  t.diagnostic(`cases from ${FUZZ_DIR}`);
  const { cases } = fuzzFile('sql.json');
  const dir = mkdtempSync(join(tmpdir(), 'gak-js-fuzz-'));
  const kernel = await openKernel(`sqlite:${join(dir, 'k.db')}`, { clock: new ManualClock(1000n) });
  t.after(() => {
    kernel.close();
    rmSync(dir, { recursive: true, force: true });
  });
  let ran = 0;
  for (const [i, c] of cases.entries()) {
    await t.test(`#${i} ${c.sqlite} ${label(c.sql)}`, () => {
      replaySql(kernel, i, c);
      ran++;
    });
  }
  assert.equal(ran, cases.length);
  t.diagnostic(`${ran} SQL texts replayed on SQLite`);
});

test('sql.json [postgres]', needsPostgres, async (t) => {
  const { cases } = fuzzFile('sql.json');
  const url = schemaUrl(t, 'fuzzsql');
  const kernel = await openKernel(url, { clock: new ManualClock(1000n), blocking: true });
  t.after(() => kernel.close());
  let ran = 0;
  for (const [i, c] of cases.entries()) {
    await t.test(`#${i} ${c.postgres} ${label(c.sql)}`, () => {
      replaySql(kernel, i, c, 'postgres');
      ran++;
    });
  }
  assert.equal(ran, cases.length);
  t.diagnostic(`${ran} SQL texts replayed on PostgreSQL`);
});

test('retries.json [scripted]', async (t) => {
  const { cases } = fuzzFile('retries.json');
  const scripted = new ScriptedBackend();
  const kernel = await openKernel(scripted, { clock: new ManualClock(1000n) });
  let ran = 0;
  for (const [i, c] of cases.entries()) {
    const shape = (c.attempts ?? []).map((a) => `${a.conflict ? 'conflict+' : ''}${a.body}`).join(' ');
    await t.test(`#${i} ${shape} -> ${c.answer}`, () => {
      replayRetry(kernel, scripted, i, c);
      ran++;
    });
  }
  assert.equal(ran, cases.length);
  t.diagnostic(`${ran} retry sequences replayed on the scripted store`);
});

test('retries.json [postgres]', needsPostgres, async (t) => {
  const { cases } = fuzzFile('retries.json');
  const kernel = await openKernel(schemaUrl(t, 'fuzzretry'), { clock: new ManualClock(1000n), blocking: true });
  t.after(() => kernel.close());
  let ran = 0;
  for (const [i, c] of cases.entries()) {
    const shape = c.attempts.map((a) => `${a.conflict ? 'conflict+' : ''}${a.body}`).join(' ');
    await t.test(`#${i} ${shape} -> ${c.answer}`, () => {
      replayRetryPostgres(kernel, i, c);
      ran++;
    });
  }
  assert.equal(ran, cases.length);
  t.diagnostic(`${ran} retry sequences replayed on PostgreSQL`);
});

test('passwords.json: every entry point that takes a store URL fails and shows no part of the password', async (t) => {
  const { templates, cases } = fuzzFile('passwords.json');
  assert.ok(Array.isArray(templates) && templates.length > 0 && templates.every((x) => x.includes('{password}')), 'templates');
  let tried = 0;
  for (const [i, c] of cases.entries()) {
    assert.ok(c.markers.length > 0 && c.markers.every((m) => c.password.includes(m)), `case ${i}: markers`);
    await t.test(`#${i} ${label(c.password)}`, async () => {
      for (const template of templates) {
        await tryPassword(withPassword(template, c.password), c.markers);
        tried++;
      }
    });
  }
  assert.equal(tried, cases.length * templates.length);
  t.diagnostic(`${cases.length} passwords × ${templates.length} templates × ${Object.keys(URL_ENTRY_POINTS).length} entry points`);
});

test('passwords.json: the command line (the first 8 passwords × every template) fails and shows no part of the password', async (t) => {
  const { templates, cases } = fuzzFile('passwords.json');
  // A process per password and template, the commands taking turns (so
  // each command meets every template); the in-process test above runs
  // both commands' openers on every case.
  const jobs = cases
    .slice(0, 8)
    .flatMap((c, i) =>
      templates.map((template, k) => [CLI_COMMANDS[(i + k) % CLI_COMMANDS.length], withPassword(template, c.password), c.markers]),
    );
  assert.ok(jobs.length > 0);
  const failures = await tryCli(jobs);
  assert.deepEqual(failures, []);
  t.diagnostic(`${jobs.length} CLI runs (${CLI_COMMANDS.join(', ')})`);
});
