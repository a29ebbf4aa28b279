// The peers' packages, installed by the harness itself: `npm ci` from the
// committed lock into bench/peers/node_modules whenever the lock or the Node
// version changed since the last install (a stamp file records both), so a
// fresh clone, CI and `cargo test` need no install step of their own.
//
// Only Node's built-ins here: this runs before anything is installed.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const here = dirname(fileURLToPath(import.meta.url));
const stampFile = join(here, 'node_modules', '.gak-npm-ci-stamp');

function wantedStamp() {
  const lock = readFileSync(join(here, 'package-lock.json'));
  return `${createHash('sha256').update(lock).digest('hex')} node ${process.version}\n`;
}

/** Whether node_modules matches the lock (and this Node). */
export function installed() {
  return existsSync(stampFile) && readFileSync(stampFile, 'utf8') === wantedStamp();
}

/**
 * `npm ci --prefix bench/peers` unless the stamp says it is current. npm's
 * output goes to stderr, so `--json` output on stdout stays machine-readable.
 */
export function ensureInstalled() {
  if (installed()) return;
  const stamp = wantedStamp();
  const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
  // Both peers declare Node >= 22 and warn on 20 (EBADENGINE); they run on 20.
  const done = spawnSync(npm, ['ci', '--prefix', here, '--no-audit', '--no-fund'], {
    stdio: ['ignore', process.stderr, process.stderr],
  });
  if (done.error) throw new Error(`cannot run npm: ${done.error.message}`);
  if (done.status !== 0) throw new Error(`npm ci --prefix ${here} exited with ${done.status}`);
  writeFileSync(stampFile, stamp);
}
