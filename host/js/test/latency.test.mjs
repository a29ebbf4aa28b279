// The latency tool runs, and prints what `host/latency.py` parses: one line
// per operation and store, `<label>  <µs> µs/op …`, ending with the store
// crossings per call. Times nothing itself: a handful of cold calls, only
// to keep the tool from rotting; the crossings it counts are exact.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const TOOL = fileURLToPath(new URL('../bench/latency.mjs', import.meta.url));
// The pattern host/latency.py reads a figure with.
const LINE = /^(\S.*?)\s+([0-9.]+) µs\/op\s/;
const OPS = [
  'taskboard.claim (fresh task)',
  'sideeffect.acquire (fresh key)',
  'sideeffect.acquire (replayed key)',
  'checkpoint.build-plan (3 steps, pure)',
];
const CROSSINGS = / ([0-9.]+) crossings\/call$/;
// gak:kernel@0.4.0 (store.wit): "A `claim` or an `acquire` is the export
// plus one `read` plus one `write`"; a replay only reads (the operation's
// first call, cold, also grants and completes the key: 3 more crossings
// over the 20 calls); build-plan is pure.
const EXPECTED_CROSSINGS = [[2, 2], [2, 2], [1, 1.15], [0, 0]];

for (const mode of [[], ['--baseline']]) {
  test(`latency.mjs ${['--cold', ...mode].join(' ')} prints a figure per operation and store`, () => {
    const out = execFileSync(process.execPath, [TOOL, '20', '--cold', ...mode], { encoding: 'utf8' });
    const sections = out.split(/^-- /m).slice(1);
    // memory, SQLite FULL and NORMAL, then PostgreSQL (or the line saying
    // it was not reachable).
    assert.equal(sections.length, 4, out);
    for (const section of sections) {
      if (section.startsWith('postgres: not reachable')) continue;
      const postgres = section.startsWith('postgres');
      const figures = section
        .split('\n')
        .map((l) => l.match(LINE))
        .filter(Boolean);
      assert.deepEqual(
        figures.map((m) => m[1]),
        postgres ? [...OPS, 'taskboard.claim (fresh task, promises)'] : OPS,
        section,
      );
      for (const m of figures) assert.ok(Number(m[2]) > 0, m[0]);
      figures.slice(0, OPS.length).forEach((m, i) => {
        const crossed = Number(m.input.match(CROSSINGS)?.[1]);
        const [low, high] = EXPECTED_CROSSINGS[i];
        assert.ok(crossed >= low && crossed <= high, `${m.input}: expected ${low}..${high} crossings per call`);
      });
    }
  });
}
