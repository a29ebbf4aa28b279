// The WASI imports the component links (a Rust std guest imports ~14 WASI
// 0.2 interfaces; at run time it only draws random numbers, and writes to
// stderr when it panics).
//
// - Randomness: tokens, holders and reconcile claims are 128 bits from
//   `wasi:random/random.get-random-u64`, so it MUST be a CSPRNG. We read
//   node:crypto's CSPRNG (`randomFillSync`, OpenSSL's RAND_bytes) into a
//   4 KiB pool and hand it out 8 bytes at a time: preview2-shim 0.26 calls
//   `crypto.randomBytes(8)` per u64 (an allocation and a trip into C++ each
//   time; a tenth of a claim's time in a profile). Bytes are used once and
//   never leave the process, as with Node's own `randomUUID` cache.
//   No two processes or threads can hand out the same bytes (HOSTS.md 7):
//   every worker thread loads its own copy of this module (its own pool),
//   child processes start from nothing (Node cannot fork a live process),
//   and should a process ever start from a copy of this one's memory (a
//   user-land startup snapshot), its pid differs and the pool is refilled
//   before its first draw.
// - Environment: none. The shim's default hands the guest the host's whole
//   `process.env` and argv; the kernel needs neither.
// - `exit`: the shim's calls `process.exit`, which would kill the embedding
//   application; here it throws, which the kernel treats as a trap (the
//   instance is discarded, the call fails with `storage`).
import { randomFillSync } from 'node:crypto';
import * as cli from '@bytecodealliance/preview2-shim/cli';
import * as io from '@bytecodealliance/preview2-shim/io';

const POOL_BYTES = 4096;
const pool = new BigUint64Array(POOL_BYTES / 8);
let next = pool.length;
let owner = process.pid; // the process the pool was filled in

/** 64 bits from node:crypto's CSPRNG. */
export function randomU64() {
  if (next === pool.length || owner !== process.pid) {
    randomFillSync(pool);
    next = 0;
    owner = process.pid;
  }
  const value = pool[next];
  pool[next++] = 0n; // a drawn value is never handed out, nor left, again
  return value;
}

/** @internal For tests: where the pool stands. */
export const poolState = () => ({ owner, next });

const random = {
  getRandomU64: randomU64,
  getRandomBytes(len) {
    const n = Number(len);
    const out = new Uint8Array(n);
    randomFillSync(out);
    return out;
  },
};

// std seeds its HashMaps from this; it need not be secret, only varied.
let seed;
const insecureSeed = {
  insecureSeed() {
    seed ??= [randomU64(), randomU64()];
    return seed;
  },
};

const environment = {
  getEnvironment: () => [],
  getArguments: () => ['gak'],
  initialCwd: () => undefined,
};

const exit = {
  exit(status) {
    throw new Error(`the gak component called wasi:cli/exit (${status?.tag ?? status})`);
  },
};

/** WASI imports by interface name, unversioned. */
export const wasiImports = {
  'wasi:cli/environment': environment,
  'wasi:cli/exit': exit,
  'wasi:cli/stderr': cli.stderr,
  'wasi:cli/stdin': cli.stdin,
  'wasi:cli/stdout': cli.stdout,
  'wasi:cli/terminal-input': cli.terminalInput,
  'wasi:cli/terminal-output': cli.terminalOutput,
  'wasi:cli/terminal-stderr': cli.terminalStderr,
  'wasi:cli/terminal-stdin': cli.terminalStdin,
  'wasi:cli/terminal-stdout': cli.terminalStdout,
  'wasi:io/error': io.error,
  'wasi:io/poll': io.poll,
  'wasi:io/streams': io.streams,
  'wasi:random/random': random,
  'wasi:random/insecure-seed': insecureSeed,
};
