// The shared host-protocol cases (tests/host-protocol/*.json, written once
// for every host): one named test per case and store, replayed against this
// host's engine and bindings — the scripted store (memory, counted and
// faulted), a fresh SQLite file, a fresh PostgreSQL schema (skipped without a
// server, failed without one under CI=true). Store-URL cases open a kernel
// on the URL.
import { test } from 'node:test';
import { caseFiles, replay, replayUrl, storesOf } from './fixtures/protocol.mjs';

for (const [file, cases] of caseFiles()) {
  for (const c of cases) {
    if (typeof c?.case !== 'string') {
      test(`${file}: a case without a name`, () => {
        throw new Error(`${file}: every case needs "case": ${JSON.stringify(c).slice(0, 200)}`);
      });
      continue;
    }
    if ('url' in c) {
      test(`${file} :: ${c.case}`, async () => {
        await replayUrl(c);
      });
      continue;
    }
    for (const [store, skip] of storesOf(c)) {
      test(`${file} :: ${c.case} [${store}]`, { skip }, async () => {
        await replay(c, store);
      });
    }
  }
}
