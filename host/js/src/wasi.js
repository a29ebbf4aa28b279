// The randomness the component is handed, and the WASI imports it links (a
// Rust std guest imports ~14 WASI 0.2 interfaces; at run time it only asks
// for hash seeds, and writes to stderr when it panics).
//
// - Entropy: tokens, holders and reconcile claims are minted from the bytes
//   `store.read` hands over (`answers.entropy`, gak:kernel@0.4.0), so they
//   MUST come from a CSPRNG and never repeat. We read node:crypto's CSPRNG
//   (`randomFillSync`, OpenSSL's RAND_bytes) into a 4 KiB pool and hand it
//   out in slices: a `randomFillSync` per call costs ~2.5 µs (a trip into
//   C++), a slice of the pool ~0.1 µs. Every byte is handed out once, as a
//   copy, and zeroed in the pool at once; bytes never leave the process, as
//   with Node's own `randomUUID` cache. `wasi:random` (std's hash seeds,
//   which need only vary) is served from the same CSPRNG: `get-random-u64`
//   and `insecure-seed` from the pool, `get-random-bytes` directly.
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
import { MAX_ENTROPY } from './store/facts.js';

const POOL_BYTES = 4096;
const pool = new Uint8Array(POOL_BYTES);
const words = new BigUint64Array(pool.buffer);
let next = POOL_BYTES; // the first byte not yet handed out
let owner = process.pid; // the process the pool was filled in

/** Make `n` bytes (at most POOL_BYTES) available from `next` on. */
function reserve(n) {
  if (next + n > POOL_BYTES || owner !== process.pid) {
    randomFillSync(pool);
    next = 0;
    owner = process.pid;
  }
}

/** 64 bits from node:crypto's CSPRNG. */
export function randomU64() {
  next = (next + 7) & ~7; // a whole word of the pool
  reserve(8);
  const at = next >>> 3;
  const value = words[at];
  words[at] = 0n; // a drawn value is never handed out, nor left, again
  next += 8;
  return value;
}

/** The most bytes one `store.read` may ask for (WIT `reads.entropy`; host/sql/store.json). */
export { MAX_ENTROPY };

const NO_BYTES = new Uint8Array(0);

/**
 * `n` (0..MAX_ENTROPY) fresh bytes from node:crypto's CSPRNG: a copy of
 * the pool's next bytes, which are zeroed, so no two calls (nor threads,
 * nor processes) ever receive the same ones.
 */
export function entropy(n) {
  if (n === 0) return NO_BYTES;
  if (!Number.isInteger(n) || n < 0 || n > MAX_ENTROPY) throw new RangeError(`${n} bytes of entropy asked for in one read; at most ${MAX_ENTROPY}`);
  reserve(n);
  const out = pool.slice(next, next + n);
  pool.fill(0, next, next + n);
  next += n;
  return out;
}

/** @internal For tests: where the pool stands (`next` in bytes). */
export const poolState = () => ({ owner, next });
/** @internal For tests: a copy of the pool as it is now. */
export const poolBytes = () => pool.slice();

const random = {
  getRandomU64: randomU64,
  getRandomBytes(len) {
    // Straight from the CSPRNG: any length, and this component draws none.
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
