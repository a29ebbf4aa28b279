// Several JavaScript workers (protocol v1) at once on one SQLite file, and
// the audit of what they did. A negative control runs the same workers one
// after another: the audit must reject it (overlap is proven, not assumed).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { openKernel } from '../src/index.js';
import { audit, auditParts, parseEvents } from './audit.mjs';

const WORKER = fileURLToPath(new URL('./xworker.mjs', import.meta.url));
// Phases long enough that workers overlap in each. Each effect is held
// 1 ms before `complete` (as a real effect takes time): followers replay
// keys faster than the leader applies them, catch up with it and find its
// key in flight. Without the hold the key is in flight only between two
// transactions of one process, microseconds, and a worker waiting in
// SQLite's busy handler (which sleeps 1..100 ms) almost never lands there:
// CI once saw three runs in a row without a single in-flight answer.
const SHAPE = { tasks: 3, rounds: 600, keys: 600, sinkRounds: 60, holdMs: 1 };
const SMALL = { tasks: 3, rounds: 30, keys: 10, sinkRounds: 5, holdMs: 0 };

function runWorker(url, name, index, shape = SHAPE, barrier = undefined) {
  const args = [
    WORKER,
    ...['--store', url, '--worker', name, '--index', String(index)],
    ...['--tasks', String(shape.tasks), '--rounds', String(shape.rounds)],
    ...['--keys', String(shape.keys), '--sink-rounds', String(shape.sinkRounds)],
    ...['--hold-ms', String(shape.holdMs)],
    ...(barrier ? ['--barrier', barrier.dir, '--parties', String(barrier.parties)] : []),
  ];
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    child.on('error', reject);
    child.on('close', (code) => {
      if (code === 0) resolve(out);
      else reject(new Error(`worker ${name} exited ${code}: ${err}`));
    });
  });
}

async function seeded() {
  const dir = mkdtempSync(join(tmpdir(), 'gak-xworker-'));
  const url = `sqlite:${join(dir, 'x.db')}`;
  const kernel = await openKernel(url);
  kernel.taskboard.seed(Array.from({ length: SHAPE.tasks }, (_, i) => ({ id: `t${i}` })));
  return { dir, url, kernel };
}

// The workers meet at the protocol's phase lines (a barrier folder): without
// them, on a loaded machine one worker could finish the effects phase before
// another had even loaded the component. Even together, SQLite's busy handler is not
// fair, so a run may still prove nothing about overlap. Such a run must
// still pass every safety check; it is repeated (at most ATTEMPTS runs in
// all) until one run also proves the overlap. Each attempt is a fresh file.
const ATTEMPTS = 3;

test('four concurrent JS workers on one SQLite file pass the audit', async (t) => {
  const missed = [];
  for (let attempt = 1; attempt <= ATTEMPTS; attempt++) {
    const { dir, url, kernel } = await seeded();
    const barrier = { dir: mkdtempSync(join(tmpdir(), 'gak-xbarrier-')), parties: 4 };
    try {
      const outs = await Promise.all([0, 1, 2, 3].map((i) => runWorker(url, `js-${i}`, i, SHAPE, barrier)));
      const events = outs.flatMap(parseEvents);
      assert.ok(events.every((e) => e.lang === 'js'));
      const { safety, overlap } = auditParts(kernel, events, { tasks: SHAPE.tasks, keys: SHAPE.keys, group: 'worker' });
      assert.deepEqual(safety, [], `attempt ${attempt}: safety`);
      if (overlap.length === 0) {
        const n = (...kinds) => events.filter((e) => kinds.includes(e.event)).length;
        const seen = `taken ${n('taken')}, in-flight/contended ${n('in-flight', 'contended')}, sink-stale ${n('sink-stale')}`;
        t.diagnostic(`overlap proven on attempt ${attempt} (${seen})${missed.length ? `; earlier: ${missed.join('; ')}` : ''}`);
        return;
      }
      missed.push(`attempt ${attempt}: ${overlap.join(', ')}`);
    } finally {
      kernel.close();
      rmSync(dir, { recursive: true, force: true });
      rmSync(barrier.dir, { recursive: true, force: true });
    }
  }
  assert.fail(`no run proved the workers overlapped:\n${missed.join('\n')}`);
});

test('negative control: the same workers run one after another fail the audit', async () => {
  const { dir, url, kernel } = await seeded();
  try {
    const events = [];
    for (const i of [0, 1, 2, 3]) events.push(...parseEvents(await runWorker(url, `js-${i}`, i, SMALL)));
    const problems = audit(kernel, events, { tasks: SMALL.tasks, keys: SMALL.keys, group: 'worker' });
    // The safety invariants still hold; only the proof of overlap is missing.
    assert.ok(problems.includes('wins of different workers never interleave in time'), problems.join('\n'));
    assert.ok(problems.includes('no claim was refused as taken'), problems.join('\n'));
    assert.ok(problems.every((p) => !p.startsWith('key-') && !p.startsWith('ledger') && !/^t\d/.test(p)), problems.join('\n'));
  } finally {
    kernel.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
