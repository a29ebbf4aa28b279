#!/usr/bin/env node
// The peers: the job queues people would pick instead of gak, draining the
// same N trivial jobs on the same PostgreSQL, one table (or one JSON object
// per row with --json), with gak's own rows (the release binary's hidden
// `gak drain`) in the same table. See README.md beside this file.
import { readFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { builtAt, gakBinary } from './gak.mjs';
import { ensureInstalled, here } from './install.mjs';

const USAGE = `usage: node bench/peers/run.mjs [--jobs N] [--workers W] [--batch B] [--dsn DSN] [--json] [--only NAME]... [--build-gak] [--install-only]

  --jobs N        jobs per workload (default 30000)
  --workers W     concurrency of each peer (default 8)
  --batch B       jobs per fetch in the batched workloads (default 100, at least 2)
  --pool P        connections in every peer's pool, gak's included (default: max(10, W+2)
                  for the peers, W+1 for gak)
  --dsn DSN       PostgreSQL (default $GAK_PG_DSN, else postgres://postgres@127.0.0.1:5432/test)
  --json          one JSON object per row on stdout, nothing else there
  --only NAME     a peer (graphile-worker, pg-boss, gak) or one workload (pg-boss/work-poll,
                  gak/batched); repeatable; opt-in workloads run only when named
  --build-gak     run cargo build --release -p gak-cli --bin gak first, even when
                  target/release/gak exists (it is built anyway when missing; $GAK_BIN
                  names another binary and is never built)
  --install-only  install bench/peers/node_modules from the lock if stale, then exit`;

function options() {
  const { values } = parseArgs({
    options: {
      jobs: { type: 'string', default: '30000' },
      workers: { type: 'string', default: '8' },
      batch: { type: 'string', default: '100' },
      pool: { type: 'string' },
      dsn: { type: 'string', default: process.env.GAK_PG_DSN || 'postgres://postgres@127.0.0.1:5432/test' },
      json: { type: 'boolean', default: false },
      only: { type: 'string', multiple: true, default: [] },
      'build-gak': { type: 'boolean', default: false },
      'install-only': { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h', default: false },
    },
  });
  const count = (name) => {
    const n = Number(values[name]);
    if (!Number.isInteger(n) || n < 1) throw new Error(`--${name} must be a positive integer, not ${values[name]}`);
    return n;
  };
  const batch = count('batch');
  // pg-boss ignores burstWhenBatchFull at batchSize 1: a batch of 1 is the unbatched workloads.
  if (batch < 2) throw new Error('--batch must be at least 2 (the unbatched workloads are batch 1)');
  const pool = values.pool === undefined ? undefined : count('pool');
  return { ...values, jobs: count('jobs'), workers: count('workers'), batch, pool };
}

/** The DSN without credentials, for the header: host, port, database. */
function where(dsn) {
  try {
    const url = new URL(dsn);
    return `${url.hostname}:${url.port || 5432}${url.pathname}`;
  } catch {
    return '(unparsable DSN)';
  }
}

function version(pkg) {
  return JSON.parse(readFileSync(join(here, 'node_modules', pkg, 'package.json'), 'utf8')).version;
}

const COLUMNS = ['peer', 'mode', 'batch', 'workers', 'jobs', 'seconds', 'jobs/s', 'client cpu s', 'load'];

function cells(row) {
  return [
    row.peer,
    row.mode,
    String(row.batch),
    String(row.workers),
    String(row.jobs),
    row.seconds.toFixed(3),
    Math.round(row.jobs_per_s).toLocaleString('en-US'),
    row.client_cpu_seconds === null ? '-' : row.client_cpu_seconds.toFixed(2),
    row.load_1m.toFixed(2),
  ];
}

function table(rows) {
  const all = [COLUMNS, ...rows.map(cells)];
  const width = COLUMNS.map((_, i) => Math.max(...all.map((r) => r[i].length)));
  const line = (r) => `| ${r.map((c, i) => (i < 2 ? c.padEnd(width[i]) : c.padStart(width[i]))).join(' | ')} |`;
  return [line(COLUMNS), `|${width.map((w, i) => (i < 2 ? '-'.repeat(w + 2) : `${'-'.repeat(w + 1)}:`)).join('|')}|`, ...rows.map((r) => line(cells(r)))].join('\n');
}

async function main() {
  let opts;
  try {
    opts = options();
  } catch (error) {
    console.error(`${error.message}\n\n${USAGE}`);
    return 2;
  }
  if (opts.help) {
    console.log(USAGE);
    return 0;
  }
  ensureInstalled();
  if (opts['install-only']) return 0;

  const pg = (await import('pg')).default;
  const all = [
    ...(await import('./graphile-worker.mjs')).workloads,
    ...(await import('./pg-boss.mjs')).workloads,
    ...(await import('./gak.mjs')).workloads,
  ];
  const name = (w) => `${w.peer}/${w.mode}`;
  for (const only of opts.only) {
    if (!all.some((w) => w.peer === only || name(w) === only)) {
      console.error(`--only ${only}: no such peer or workload; there are ${all.map(name).join(', ')}`);
      return 2;
    }
  }
  const chosen = all.filter((w) =>
    opts.only.length === 0 ? !w.optIn : opts.only.some((o) => o === name(w) || (o === w.peer && !w.optIn)),
  );

  // gak's rows run the release binary: found (or built) before anything is measured.
  let gakBin = null;
  if (chosen.some((w) => w.peer === 'gak')) {
    try {
      gakBin = gakBinary({ build: opts['build-gak'] });
    } catch (error) {
      console.error(error.message);
      return 1;
    }
  }

  const admin = new pg.Client({ connectionString: opts.dsn });
  await admin.connect();
  const postgres = (await admin.query('show server_version')).rows[0].server_version;
  if (!opts.json) {
    console.log(
      `peers on PostgreSQL ${postgres} at ${where(opts.dsn)}, Node ${process.version}, ${opts.jobs} jobs, ${opts.workers} workers;\n` +
        'seconds: performance.now() from the first job reaching a handler to the database showing every job completed' +
        (gakBin ? `;\ngak: ${gakBin} (built ${builtAt(gakBin)}), seconds from its workers' start to the last completion returning` : ''),
    );
  }
  const rows = [];
  let failed = 0;
  for (const w of chosen) {
    const schema = `gak_peers_${w.peer.replace(/\W/g, '')}_${w.mode.replace(/\W/g, '')}_${process.pid}`;
    const drop = `drop schema if exists ${admin.escapeIdentifier(schema)} cascade`;
    try {
      await admin.query(drop);
      const batch = w.batched ? opts.batch : 1;
      // What else the machine was doing: the one-minute load average as the
      // workload starts (the peers' own figures move several-fold with it).
      const load = loadavg()[0];
      const measured = await w.drain({ dsn: opts.dsn, schema, jobs: opts.jobs, workers: opts.workers, batch, admin, mode: w.mode, gakBin, pool: opts.pool });
      const row = {
        peer: w.peer,
        version: measured.version ?? version(w.peer),
        mode: w.mode,
        batch,
        workers: opts.workers,
        jobs: opts.jobs,
        seconds: measured.seconds,
        jobs_per_s: measured.jobs_per_s,
        // The Node process's CPU for the peers; gak's rows have none (their
        // client is the gak process: client_cpu_seconds).
        node_cpu_seconds: measured.node_cpu_seconds,
        client_cpu_seconds: measured.client_cpu_seconds ?? measured.node_cpu_seconds ?? null,
        settings: measured.settings,
        node: process.version,
        postgres,
        load_1m: Math.round(load * 100) / 100,
      };
      rows.push(row);
      if (opts.json) console.log(JSON.stringify(row));
    } catch (error) {
      failed += 1;
      console.error(`${name(w)} failed: ${error?.stack ?? error}`);
    } finally {
      try {
        await admin.query(drop);
        const left = (await admin.query('select to_regnamespace($1) as ns', [schema])).rows[0].ns;
        if (left !== null) throw new Error(`schema ${schema} is still there after the drop`);
      } catch (error) {
        failed += 1;
        console.error(`${name(w)}: cleaning up: ${error?.message ?? error}`);
      }
    }
  }
  await admin.end();
  if (!opts.json && rows.length > 0) console.log(table(rows));
  return failed === 0 ? 0 : 1;
}

let unhandled = 0;
process.on('unhandledRejection', (error) => {
  unhandled += 1;
  console.error(`unhandled rejection: ${error?.stack ?? error}`);
});
main().then(
  (code) => process.exit(code || (unhandled > 0 ? 1 : 0)),
  (error) => {
    console.error(error?.stack ?? error);
    process.exit(1);
  },
);
