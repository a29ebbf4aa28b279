#!/usr/bin/env node
// Claims per second from concurrent callers on the kernel of promises
// (PostgreSQL) — the counterpart of `gak bench --op claim --workers W
// --impl kernel`: W callers each `await kernel.taskboard.claim(id, …)` on
// tasks of their own, one after another, on a fresh schema.
//
//   node host/js/bench/callers.mjs [N] [--callers W] [--pool P] [--url URL]
//
// N claims are timed (default 10,000) after WARMUP claims on the same
// kernel (its workers' V8 and wasm tiers warm); the URL defaults to
// GAK_PG_DSN or the local server, and gets `schema=bench_js_<pid>` (created
// and dropped here). Prints claims/s, this process's CPU per claim by
// thread (main; the worker threads: kernel workers and the I/O thread;
// V8's and libuv's by their names), and the server's
// CPU per claim when it runs on this machine (`postgres` processes in
// /proc).
import { readdirSync, readFileSync } from 'node:fs';
import { openKernel } from '../src/index.js';
import { PostgresBackend } from '../src/store/index.js';

const argv = process.argv.slice(2);
const option = (name, fallback) => {
  const i = argv.indexOf(name);
  return i >= 0 ? argv.splice(i, 2)[1] : fallback;
};
const CALLERS = Number(option('--callers', 8));
const POOL = Number(option('--pool', CALLERS));
const base = option('--url', process.env.GAK_PG_DSN || 'postgres://postgres@127.0.0.1:5432/test');
const N = Number(argv.find((a) => /^\d+$/.test(a)) ?? 10_000);
const WARMUP = Number(process.env.GAK_BENCH_WARMUP ?? 4_000);
const MINUTE = 60_000n;

const url = `${base}${base.includes('?') ? '&' : '?'}schema=bench_js_${process.pid}`;
const drop = () => new PostgresBackend(url, { create: false }).dropSchema();

/** CPU ticks (utime + stime) of every thread of this process, by thread name. */
function threads() {
  const out = {};
  for (const tid of readdirSync('/proc/self/task')) {
    let stat;
    try {
      stat = readFileSync(`/proc/self/task/${tid}/stat`, 'utf8');
    } catch {
      continue; // a thread that ended
    }
    const name = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // Worker threads keep the process's name: the main thread is the one
    // whose id is the process's.
    const kind = Number(tid) === process.pid ? 'main' : name === 'node' ? 'worker threads' : name;
    out[kind] = (out[kind] ?? 0) + Number(f[11]) + Number(f[12]);
  }
  return out;
}

/** CPU ticks of every process named postgres on this machine (0 when none is visible). */
function server() {
  let ticks = 0;
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      if (!stat.includes('(postgres)')) continue;
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      ticks += Number(f[11]) + Number(f[12]);
    } catch {
      // a process that ended
    }
  }
  return ticks;
}

const TICK_US = 1e6 / 100; // USER_HZ

drop();
const kernel = await openKernel(url, { maxConnections: POOL });
try {
  const total = WARMUP + N;
  for (let at = 0; at < total; at += 1000) {
    const n = Math.min(1000, total - at);
    await kernel.taskboard.seed(Array.from({ length: n }, (_, i) => ({ id: `t${at + i}` })));
  }
  // Each caller claims ids first, first + W, first + 2W, … below `end`.
  const run = async (first, end) => {
    await Promise.all(
      Array.from({ length: CALLERS }, async (_, c) => {
        for (let i = first + c; i < end; i += CALLERS) await kernel.taskboard.claim(`t${i}`, `w${c}`, MINUTE);
      }),
    );
  };
  await run(0, WARMUP);
  const [t0, s0, c0] = [threads(), server(), process.cpuUsage()];
  const start = process.hrtime.bigint();
  await run(WARMUP, total);
  const seconds = Number(process.hrtime.bigint() - start) / 1e9;
  const [t1, s1, c1] = [threads(), server(), process.cpuUsage(c0)];
  const perClaim = (ticks) => ((ticks * TICK_US) / N).toFixed(0);
  const byThread = Object.entries(t1)
    .map(([name, ticks]) => [name, ticks - (t0[name] ?? 0)])
    .filter(([, ticks]) => ticks > 0)
    .sort((a, b) => b[1] - a[1])
    .map(([name, ticks]) => `${name} ${perClaim(ticks)}`)
    .join(', ');
  console.log(
    `${CALLERS} callers, pool ${POOL} (${kernel.workers} workers), ${N} claims (after ${WARMUP}): ${(N / seconds).toFixed(0)} claims/s; ` +
      `client CPU ${((c1.user + c1.system) / N).toFixed(0)} us/claim (${byThread}); ` +
      `server CPU ${perClaim(s1 - s0)} us/claim`,
  );
} finally {
  await kernel.close();
  drop();
}
