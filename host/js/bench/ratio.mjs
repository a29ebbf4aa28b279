#!/usr/bin/env node
// Issue 26's throughput ratio in one run: W callers claiming on the kernel
// of promises (./callers.mjs) against the Rust host's `gak bench --op claim
// --workers W --impl kernel`, on the same PostgreSQL, alternating.
//
//   node host/js/bench/ratio.mjs [--pairs K] [--claims N] [--seconds S]
//                                [--workers W] [--gak PATH] [--url URL]
//
// A pair is one run of each, its order swapped from pair to pair (so
// neither always runs on a machine the other just warmed); each Rust run
// gets a fresh schema (created and dropped here), each JavaScript run makes
// its own. On a shared 2-core machine one figure moves by a third from run
// to run (the server's CPU per claim with it), so a pair's ratio says more
// than either figure, and the median of K pairs more than one pair. Prints
// each pair and then the median ratio, with its lowest and highest.
// Defaults: 5 pairs, 16,000 claims, 8 seconds, 8 workers, the release
// `gak` of this checkout (`cargo build --release -p gak-cli`), GAK_PG_DSN
// or the local server on a plain connection.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { PostgresBackend } from '../src/store/index.js';

const here = dirname(fileURLToPath(import.meta.url));
const argv = process.argv.slice(2);
const option = (name, fallback) => {
  const i = argv.indexOf(name);
  return i >= 0 ? argv.splice(i, 2)[1] : fallback;
};
const PAIRS = Number(option('--pairs', 5));
const CLAIMS = Number(option('--claims', 16_000));
const SECONDS = Number(option('--seconds', 8));
const WORKERS = Number(option('--workers', 8));
const target = process.env.CARGO_TARGET_DIR ?? join(here, '../../../target');
const GAK = option('--gak', join(target, 'release/gak'));
const base = option('--url', process.env.GAK_PG_DSN || 'postgres://postgres@127.0.0.1:5432/test?sslmode=disable');
if (argv.length > 0) {
  console.error(`unknown arguments: ${argv.join(' ')}`);
  process.exit(2);
}
if (![PAIRS, CLAIMS, SECONDS, WORKERS].every((n) => Number.isInteger(n) && n > 0)) {
  console.error('--pairs, --claims, --seconds and --workers take positive integers');
  process.exit(2);
}
if (!existsSync(GAK)) {
  console.error(`no gak binary at ${GAK}: cargo build --release -p gak-cli, or --gak PATH`);
  process.exit(2);
}
const withSchema = (url, schema) => `${url}${url.includes('?') ? '&' : '?'}schema=${schema}`;

/** The Rust host's claims/s: `gak bench`'s median over its samples. */
function rust() {
  const url = withSchema(base, `bench_ratio_${process.pid}`);
  const backend = () => new PostgresBackend(url, { create: false });
  backend().dropSchema();
  const dir = mkdtempSync(join(tmpdir(), 'gak-ratio-'));
  try {
    const json = join(dir, 'bench.json');
    execFileSync(
      GAK,
      ['bench', '--store', url, '--op', 'claim', '--workers', String(WORKERS), '--impl', 'kernel', '--seconds', String(SECONDS), '--json', json],
      { stdio: ['ignore', 'ignore', 'inherit'] },
    );
    const figure = JSON.parse(readFileSync(json, 'utf8')).results.find((r) => r.op === 'claim' && r.impl === 'kernel');
    if (!figure) throw new Error('gak bench wrote no claim figure');
    return figure.ops_per_s;
  } finally {
    rmSync(dir, { recursive: true, force: true });
    backend().dropSchema();
  }
}

/** The kernel of promises' claims/s: ./callers.mjs's figure. */
function js() {
  const out = execFileSync(process.execPath, [join(here, 'callers.mjs'), String(CLAIMS), '--callers', String(WORKERS), '--url', base], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const m = /: (\d+) claims\/s/.exec(out);
  if (!m) throw new Error(`callers.mjs printed no figure: ${out.trim()}`);
  return Number(m[1]);
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
};

const ratios = [];
for (let pair = 1; pair <= PAIRS; pair += 1) {
  let r;
  let j;
  if (pair % 2) {
    r = rust();
    j = js();
  } else {
    j = js();
    r = rust();
  }
  ratios.push(j / r);
  console.log(`pair ${pair}: Rust ${r.toFixed(0)} claims/s, JavaScript ${j} claims/s: ${(j / r).toFixed(2)}`);
}
console.log(
  `${WORKERS} workers, ${PAIRS} pairs: JavaScript / Rust median ${median(ratios).toFixed(2)} ` +
    `(lowest ${Math.min(...ratios).toFixed(2)}, highest ${Math.max(...ratios).toFixed(2)})`,
);
