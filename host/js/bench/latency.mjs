#!/usr/bin/env node
// Per-operation latency through the component on each binding of the JS
// host — the counterpart of `cargo run --release -p gak-examples --example
// latency`, with the same operations and output, plus how many times each
// call crossed from the component into the host (`store.read` and
// `store.write`; gak:kernel@0.4.0 makes a claim one of each).
//
//   node host/js/bench/latency.mjs [N] [--baseline] [--cold]
//
// Each operation runs 5,000 times, then three rounds of N calls are timed
// and the median round printed (see WARMUP, ROUNDS); `--cold` times the
// first N calls of a fresh process instead. `--baseline` measures the glue as jco emits it (no patch) with
// preview2-shim's `wasi:random`, to show what the host's changes buy.
import { mkdtempSync, rmSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Kernel } from '../src/kernel.js';
import { crossings } from '../src/engine.js';
import { SystemClock } from '../src/clock.js';
import { componentPath, loadComponent } from '../src/component.js';
import { openStore } from '../src/store/index.js';
import { openKernel } from '../src/kernel.js';
import { wasiImports } from '../src/wasi.js';

const argv = process.argv.slice(2);
const baseline = argv.includes('--baseline');
const N = Number(argv.find((a) => /^\d+$/.test(a)) ?? 5000);

async function component() {
  const patched = await loadComponent();
  if (!baseline) return patched;
  // The same component, transpiled without our patch, in a scratch folder.
  const { transpileBytes } = await import('@bytecodealliance/jco-transpile');
  const { random, insecureSeed } = await import('@bytecodealliance/preview2-shim/random');
  wasiImports['wasi:random/random'] = random;
  wasiImports['wasi:random/insecure-seed'] = insecureSeed;
  const out = await transpileBytes(new Uint8Array(readFileSync(componentPath())), {
    name: 'gak',
    instantiation: 'sync',
    noComponentErrorWrapping: true,
  });
  const dir = mkdtempSync(join(tmpdir(), 'gak-baseline-'));
  process.on('exit', () => rmSync(dir, { recursive: true, force: true }));
  const { writeFileSync, mkdirSync } = await import('node:fs');
  for (const [name, content] of Object.entries(out.files)) {
    mkdirSync(join(dir, name, '..'), { recursive: true });
    writeFileSync(join(dir, name), content);
  }
  writeFileSync(join(dir, 'package.json'), '{ "type": "module" }');
  const glue = await import(pathToFileURL(join(dir, 'gak.js')).href);
  const modules = new Map();
  const get = (name) => modules.get(name) ?? modules.set(name, new WebAssembly.Module(readFileSync(join(dir, name)))).get(name);
  return { ...patched, instantiate: (imports) => glue.instantiate(get, imports) };
}

// V8 optimises a function only after it has run many times, and the glue's
// are large: with a few hundred warm-up calls a run of 3,000 measures the
// optimising compiler as much as the host (a memory claim read ~44 µs wall
// and more CPU than wall, the compiler's threads, against ~21 µs warm).
// Every operation gets WARMUP calls first; `--cold` skips them.
const COLD = argv.includes('--cold');
const WARMUP = COLD ? 0 : 5000;

// Each figure is the median of ROUNDS timed rounds of N calls: one round of
// 3,000 calls lasts ~50 ms, and a major collection or a re-optimisation in
// it moves the figure by a third. `--cold` times one round: the first N calls.
const ROUNDS = COLD ? 1 : 3;

const crossed = () => crossings.read + crossings.write;

function measure(label, count, op, warmup = WARMUP) {
  for (let i = 0; i < warmup; i++) op(i);
  const before = crossed();
  const rounds = [];
  for (let r = 0; r < ROUNDS; r++) {
    const first = warmup + r * count;
    const cpu = process.cpuUsage();
    const start = process.hrtime.bigint();
    for (let i = first; i < first + count; i++) op(i);
    const per = Number(process.hrtime.bigint() - start) / count / 1000;
    const used = process.cpuUsage(cpu);
    rounds.push({ per, cpuPer: (used.user + used.system) / count });
  }
  const perCall = (crossed() - before) / (ROUNDS * count);
  const { per, cpuPer } = rounds.sort((a, b) => a.per - b.per)[ROUNDS >> 1];
  // Wall time as the Rust example prints it (what host/latency.py reads:
  // the label, then `<µs> µs/op`); CPU time (this process, all threads) is
  // steadier on a shared machine; crossings are store imports per call,
  // over every timed round.
  console.log(
    `${label.padEnd(44)} ${per.toFixed(1).padStart(9)} µs/op ${(1e6 / per).toFixed(0).padStart(9)} ops/s ` +
      `${cpuPer.toFixed(1).padStart(9)} µs CPU/op ${perCall.toFixed(1).padStart(5)} crossings/call`,
  );
}

async function run(entry, url, n = N, warmup = WARMUP) {
  const kernel = new Kernel(entry, openStore(url), new SystemClock());
  console.log(`-- ${url}`);
  const total = ROUNDS * n + warmup;
  for (let i = 0; i < total; i += 5000) {
    kernel.taskboard.seed(Array.from({ length: Math.min(5000, total - i) }, (_, j) => ({ id: `t${i + j}` })));
  }
  measure('taskboard.claim (fresh task)', n, (i) => kernel.taskboard.claim(`t${i}`, 'w', 60_000n), warmup);
  measure('sideeffect.acquire (fresh key)', n, (i) => kernel.sideeffect.acquire({ key: `k${i}`, resource: `r${i}` }, 60_000n), warmup);
  measure('sideeffect.acquire (replayed key)', n, () => {
    const a = { key: 'done-key', resource: 'r-done' };
    const x = kernel.sideeffect.acquire(a, 60_000n);
    if (x.tag === 'granted') kernel.sideeffect.complete(a, x.lease, 'ok');
  }, warmup);
  const steps = [
    { id: 'a', dependsOn: [] },
    { id: 'b', dependsOn: ['a'] },
    { id: 'c', dependsOn: ['b'] },
  ];
  measure('checkpoint.build-plan (3 steps, pure)', n, () => kernel.checkpoint.buildPlan(steps), warmup);
  kernel.close();
}

const entry = await component();
console.log(
  `gak JS host latency, ${baseline ? 'baseline (jco glue as emitted, preview2-shim random)' : 'as shipped'}, ` +
    `${COLD ? 'cold (the first N calls)' : `median of ${ROUNDS} rounds after ${WARMUP} warm-up calls`}, node ${process.version}`,
);
const dir = mkdtempSync(join(tmpdir(), 'gak-js-latency-'));
try {
  await run(entry, 'memory:');
  await run(entry, `sqlite:${join(dir, 'full.db')}`);
  await run(entry, `sqlite:${join(dir, 'normal.db')}?synchronous=normal`);
} finally {
  rmSync(dir, { recursive: true, force: true });
}

/**
 * The kernel of promises (`openKernel('postgres://…')`): one claim awaited
 * at a time through a kernel worker, as the Rust tool's async rows.
 */
async function runPromises(url, n, warmup) {
  const kernel = await openKernel(url, { maxConnections: 1 });
  const total = ROUNDS * n + warmup;
  for (let i = 0; i < total; i += 5000) {
    await kernel.taskboard.seed(Array.from({ length: Math.min(5000, total - i) }, (_, j) => ({ id: `p${i + j}` })));
  }
  for (let i = 0; i < warmup; i++) await kernel.taskboard.claim(`p${i}`, 'w', 60_000n);
  const rounds = [];
  for (let r = 0; r < ROUNDS; r++) {
    const first = warmup + r * n;
    const cpu = process.cpuUsage();
    const start = process.hrtime.bigint();
    for (let i = first; i < first + n; i++) await kernel.taskboard.claim(`p${i}`, 'w', 60_000n);
    const per = Number(process.hrtime.bigint() - start) / n / 1000;
    const used = process.cpuUsage(cpu);
    rounds.push({ per, cpuPer: (used.user + used.system) / n });
  }
  const { per, cpuPer } = rounds.sort((a, b) => a.per - b.per)[ROUNDS >> 1];
  console.log(
    `${'taskboard.claim (fresh task, promises)'.padEnd(44)} ${per.toFixed(1).padStart(9)} µs/op ${(1e6 / per).toFixed(0).padStart(9)} ops/s ` +
      `${cpuPer.toFixed(1).padStart(9)} µs CPU/op`,
  );
  await kernel.close();
}

// PostgreSQL, as the Rust tool: GAK_PG_DSN or the local server, a schema of
// its own, TLS off, N/5 calls (at least 20, or N) and 500 warm-up calls
// (each is a round trip).
const dsn = process.env.GAK_PG_DSN || 'postgres://postgres@127.0.0.1:5432/test';
const pgUrl = `${dsn}${dsn.includes('?') ? '&' : '?'}schema=gak_latency_js_${process.pid}&sslmode=disable`;
let pg;
try {
  pg = openStore(pgUrl);
} catch (e) {
  console.log(`-- postgres: not reachable (${e.message}), skipped`);
}
if (pg) {
  try {
    await run(entry, pgUrl, Math.max(Math.min(N, 20), Math.floor(N / 5)), COLD ? 0 : 500);
    await runPromises(pgUrl, Math.max(Math.min(N, 20), Math.floor(N / 5)), COLD ? 0 : 500);
  } finally {
    pg.dropSchema();
  }
}
