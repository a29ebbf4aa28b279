// gak itself, beside its peers: the release `gak` binary's hidden
// `gak drain` subcommand (host/rust/cli/src/cli/drain.rs) drains the same N
// trivial jobs on the same database with W threads, and prints one JSON row,
// which becomes a row of the same table.
//
// The binary: `$GAK_BIN` when set, else `target/release/gak` (under
// `$CARGO_TARGET_DIR` when set), built with
// `cargo build --release -p gak-cli --bin gak` when it is missing or when
// the harness is given `--build-gak` (cargo's output goes to stderr).
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { here } from './install.mjs';

const repo = resolve(here, '..', '..');

/** The `gak` binary to run, built first when missing (or when `build`). */
export function gakBinary({ build = false } = {}) {
  if (process.env.GAK_BIN) return process.env.GAK_BIN;
  const target = process.env.CARGO_TARGET_DIR ? resolve(repo, process.env.CARGO_TARGET_DIR) : join(repo, 'target');
  const bin = join(target, 'release', 'gak');
  if (build || !existsSync(bin)) {
    console.error(`building ${bin}: cargo build --release -p gak-cli --bin gak`);
    const built = spawnSync('cargo', ['build', '--release', '-p', 'gak-cli', '--bin', 'gak'], {
      cwd: repo,
      stdio: ['ignore', 2, 2],
    });
    if (built.error) throw new Error(`cannot run cargo to build ${bin}: ${built.error.message}`);
    if (built.status !== 0) throw new Error(`cargo build --release -p gak-cli --bin gak failed (exit ${built.status})`);
  }
  return bin;
}

/** When the binary was built (its mtime), for the header: a stale binary measures old code. */
export function builtAt(bin) {
  try {
    return statSync(bin).mtime.toISOString();
  } catch {
    return 'missing';
  }
}

/** Run `gak drain …` and read its one JSON line. */
function run(bin, args) {
  return new Promise((resolveRun, reject) => {
    const child = spawn(bin, args, { stdio: ['ignore', 'pipe', 'inherit'] });
    let stdout = '';
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (chunk) => {
      stdout += chunk;
    });
    child.on('error', (error) => reject(new Error(`cannot run ${bin}: ${error.message}`)));
    child.on('close', (code, signal) => {
      if (code !== 0) {
        reject(new Error(`${bin} ${args.join(' ')} exited with ${signal ?? code}; stdout: ${stdout.trim()}`));
        return;
      }
      try {
        resolveRun(JSON.parse(stdout.trim().split('\n').at(-1)));
      } catch (error) {
        reject(new Error(`${bin} printed no JSON row (${error.message}): ${stdout.trim()}`));
      }
    });
  });
}

/**
 * The DSN the peers connect with, for gak: the same transport. node-postgres
 * speaks plain TCP unless the DSN names an sslmode, where gak's default is
 * `prefer` (TLS when the server offers it, as this machine's does): without
 * an sslmode, gak is told `disable`, so no row of the table pays for TLS
 * alone.
 */
export function sameTransport(dsn) {
  const url = new URL(dsn);
  if (!url.searchParams.has('sslmode')) url.searchParams.set('sslmode', 'disable');
  return url.toString();
}

async function drain({ dsn, jobs, workers, batch, admin, gakBin, pool }) {
  const args = ['drain', '--store', sameTransport(dsn), '--jobs', String(jobs), '--workers', String(workers), '--batch', String(batch), '--json'];
  if (pool !== undefined) args.push('--max-connections', String(pool));
  const row = await run(gakBin, args);
  if (row.jobs !== jobs || row.completed !== jobs) {
    throw new Error(`gak drain completed ${row.completed} of ${jobs} jobs: ${JSON.stringify(row)}`);
  }
  // gak made (and dropped) a schema of its own; check it is gone, as for
  // the peers' schemas.
  if (row.schema) {
    const left = (await admin.query('select to_regnamespace($1) as ns', [row.schema])).rows[0].ns;
    if (left !== null) throw new Error(`gak's schema ${row.schema} is still there after the drain`);
  }
  return {
    version: row.version,
    seconds: row.seconds,
    jobs_per_s: row.jobs_per_s,
    client_cpu_seconds: row.cpu_seconds ?? null,
    settings: { ...row.settings, schema: row.schema, claims: row.claims, bin: gakBin, built: builtAt(gakBin) },
  };
}

export const workloads = [
  { peer: 'gak', mode: 'unbatched', batched: false, drain },
  { peer: 'gak', mode: 'batched', batched: true, drain },
];
