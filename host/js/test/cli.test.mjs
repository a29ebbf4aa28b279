// The runner's output and failures, and the demo's promises on memory.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { render, run, UrlTarget } from '../src/conformance/index.js';
import { demoReport } from '../src/demo.js';
import { ManualClock } from '../src/index.js';

test('malformed vector files fail loudly, naming the file', async () => {
  const files = [
    ['bad.json', '{ not json'],
    ['two-kinds.json', '{"scenario": "x", "steps": [{"clock": 1, "advance": 2}]}'],
    ['unknown-call.json', '{"scenario": "y", "steps": [{"call": "nope.nope", "ok": null}]}'],
    ['unknown-variant.json', '{"scenario": "z", "steps": [{"call": "taskboard.list", "err": "no-such"}]}'],
    ['unbound.json', '{"scenario": "w", "steps": [{"call": "taskboard.release", "args": {"id": "a", "token": "$t"}, "err": "lease-lost"}]}'],
    ['backwards.json', '{"scenario": "v", "steps": [{"clock": 5}, {"clock": 4}]}'],
  ];
  const out = render(await run(new UrlTarget('memory:'), files));
  assert.ok(out.includes('FAIL bad.json'), out);
  assert.ok(out.endsWith('0 passed, 6 failed\n'), out);
});

test('a failing expectation is reported with the step, expected and actual', async () => {
  const file = JSON.stringify({
    scenario: 's',
    steps: [
      { call: 'taskboard.seed', args: { tasks: [{ id: 'a' }] }, ok: null },
      { call: 'taskboard.claim', args: { id: 'a', agent: 'w', ttl: 10 }, ok: { fence: 2 } },
    ],
  });
  const out = render(await run(new UrlTarget('memory:'), [['f.json', file]]));
  assert.match(out, /FAIL f\.json :: s: step 1 .*expected ok \{"fence":2\}, got ok .*"fence":1/);
  assert.ok(out.endsWith('0 passed, 1 failed\n'));
});

test('the demo on memory keeps every promise', async () => {
  const lines = [];
  const report = await demoReport('memory:', undefined, { clock: new ManualClock(1_700_000_000_000n), out: (l) => lines.push(l) });
  assert.equal(lines.length, 7, lines.join('\n'));
  lines.slice(1).forEach((l, i) => assert.ok(l.startsWith(`${i + 1}. `), l));
  assert.deepEqual(report.skipped, ['reserve-stock', 'charge-card']);
  assert.deepEqual(report.resumed, ['ship-parcel']);
  assert.deepEqual([...report.bodyCalls.values()], [1, 1, 1, 1]);
  assert.equal(report.raceWinners, 1);
  assert.ok(report.retryRefused && report.replayedAfterResolve);
  assert.match(lines[4], /zombie worker-a's save refused: fence-stale/);
});
