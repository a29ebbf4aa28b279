// Checking arguments before they reach the component: the checks of
// values, which the generated checks of the contract's records
// (checks.js) and calls (interfaces.js) are made of.
//
// jco's glue converts silently where it should refuse: `u64` arguments go
// through `BigInt.asUintN(64, …)` (2^64 + 5 becomes 5: a ttl of 5 ms) and
// `u32` through `>>> 0`; strings with lone surrogates are re-encoded with
// U+FFFD (two different keys would become one idempotency key); and a wrong
// type throws *inside* the export, after jco has started its task
// bookkeeping. So every argument is checked here and a bad one is refused
// with `invalid-input` before the call: the store is untouched and the
// instance never sees it. Limits the contract defines (lengths, ttl range,
// numbers below 2^53) stay the component's to judge.
import { GakError, invalidInput } from './errors.js';
import { compareKeys } from './store/keys.js';
import { MAX_VALUE_BYTES, MAX_LIST_ITEMS, MAX_CALL_BYTES } from './store/facts.js';

const U64_END = 1n << 64n;
const U32_MAX = 0xffff_ffff;
const S32_MIN = -0x8000_0000;
const S32_MAX = 0x7fff_ffff;

/**
 * The longest string or bytes argument (no contract value is longer: results
 * are 1 MiB), the longest list argument, and the most string and byte data
 * one call may carry (HOSTS.md rule 16): generated from host/sql/store.json.
 */
export { MAX_VALUE_BYTES, MAX_LIST_ITEMS, MAX_CALL_BYTES };

const utf8Length = (s) => Buffer.byteLength(s, 'utf8');

/**
 * HOSTS.md rule 16: refuse a call whose arguments no contract value can be
 * — a string or bytes longer than 1 MiB, a list of more than 10,000 items,
 * more than 64 MiB of strings and bytes in all — with `invalid-input`,
 * BEFORE anything is lowered into the component (jco copies every byte into
 * guest memory first: a 48 MiB result cost the Python host 13.7 s and
 * ~4 GiB before the component refused it) and before a transaction opens.
 * Everything within these bounds is the component's to judge.
 *
 * `checkpoint.build-plan` is the exception (`each` false): it is pure, and
 * SPEC 8 makes every step-id problem (an overlong id included)
 * `invalid-plan`, so for it only the 64 MiB total is the host's to bound.
 */
export function checkSizes(args, each = true) {
  const bound = each ? { value: MAX_VALUE_BYTES, items: MAX_LIST_ITEMS } : { value: MAX_CALL_BYTES, items: Infinity };
  // A string's UTF-8 takes at most 3 bytes per UTF-16 unit: the exact
  // length is only computed for strings that could be long.
  if (sizeOf(args, false, bound) > MAX_CALL_BYTES && sizeOf(args, true, bound) > MAX_CALL_BYTES) {
    throw invalidInput(`the arguments hold more than ${MAX_CALL_BYTES} bytes of strings and bytes`);
  }
  return args;
}

/** The bytes of strings and bytes in `v` (an upper bound unless `exact`); refuses oversized values. */
function sizeOf(v, exact, bound) {
  if (typeof v === 'string') {
    const n = v.length;
    if (n * 3 <= bound.value) return exact ? utf8Length(v) : n * 3;
    // Every UTF-16 unit is at least one byte of UTF-8.
    const bytes = n > bound.value ? n : utf8Length(v);
    if (bytes > bound.value) throw tooLong('a string argument', bytes, bound.value);
    return bytes;
  }
  if (v instanceof Uint8Array) {
    if (v.byteLength > bound.value) throw tooLong('a bytes argument', v.byteLength, bound.value);
    return v.byteLength;
  }
  if (v === null || typeof v !== 'object') return 0;
  let sum = 0;
  if (Array.isArray(v)) {
    if (v.length > bound.items) {
      throw invalidInput(`a list argument has ${v.length} items, more than ${bound.items}`);
    }
    for (const x of v) sum += sizeOf(x, exact, bound);
  } else {
    for (const k in v) sum += sizeOf(v[k], exact, bound);
  }
  return sum;
}

function tooLong(what, bytes, most = MAX_VALUE_BYTES) {
  const why = most === MAX_VALUE_BYTES ? 'the longest contract value' : 'the most one call may carry';
  return invalidInput(`${what}: at least ${bytes} bytes, more than ${most} (${why})`);
}

export function str(what, v) {
  if (typeof v !== 'string') throw invalidInput(`${what}: expected a string`);
  if (!v.isWellFormed()) throw invalidInput(`${what}: contains a lone surrogate (not valid Unicode)`);
  return v;
}

/** Is `v` left out (`undefined`, or `null`)? */
export function absent(v) {
  return v === undefined || v === null;
}

export function optStr(what, v) {
  return absent(v) ? undefined : str(what, v);
}

/** A u64: a bigint in 0..2^64-1 (the component then checks < 2^53). */
export function u64(what, v) {
  if (typeof v !== 'bigint') throw invalidInput(`${what}: expected a bigint`);
  if (v < 0n || v >= U64_END) throw invalidInput(`${what}: ${v} is outside 0..2^64-1`);
  return v;
}

export function optU64(what, v) {
  return absent(v) ? undefined : u64(what, v);
}

/** A u32 (page limits): an integer number in 0..2^32-1. */
export function u32(what, v) {
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 0 || v > U32_MAX) {
    throw invalidInput(`${what}: expected an integer in 0..2^32-1`);
  }
  return v;
}

/** An s32: an integer number in -2^31..2^31-1. */
export function s32(what, v) {
  if (typeof v !== 'number' || !Number.isInteger(v) || v < S32_MIN || v > S32_MAX) {
    throw invalidInput(`${what}: expected an integer in -2^31..2^31-1`);
  }
  return v;
}

/** A bool; left out is false. */
export function bool(what, v) {
  if (absent(v)) return false;
  if (typeof v !== 'boolean') throw invalidInput(`${what}: expected a boolean`);
  return v;
}

const encoder = new TextEncoder();

/** Bytes: a Uint8Array (Buffer included) or a string, taken as UTF-8. */
export function bytes(what, v) {
  if (v instanceof Uint8Array) return v;
  if (typeof v === 'string') {
    // Not worth encoding: at least one byte per UTF-16 unit (checkSizes).
    if (v.length > MAX_VALUE_BYTES) throw tooLong(what, v.length);
    return encoder.encode(str(what, v));
  }
  throw invalidInput(`${what}: expected a Uint8Array or a string`);
}

/** A case of an enum: one of `allowed`, by name. */
export function oneOf(what, v, allowed) {
  if (typeof v !== 'string' || !allowed.includes(v)) {
    throw invalidInput(`${what}: unknown value ${JSON.stringify(v)} (expected ${allowed.join(' | ')})`);
  }
  return v;
}

/** A record: a plain object (not an array). */
export function object(what, v) {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) throw invalidInput(`${what}: expected an object`);
  return v;
}

/** A list: an array, each item checked by `item(what, value)`. */
export function list(what, v, item) {
  if (!Array.isArray(v)) throw invalidInput(`${what}: expected an array`);
  return v.map((x, i) => item(`${what}[${i}]`, x));
}

/**
 * A map given as pairs sorted by key (`snapshot.fields`): `[key, value]`
 * pairs, or a plain object, whose entries are taken in byte order of the
 * keys (the WIT wants pairs sorted by key).
 */
export function pairs(what, v) {
  if (Array.isArray(v)) {
    return v.map((pair, i) => {
      if (!Array.isArray(pair) || pair.length !== 2) throw invalidInput(`${what}[${i}]: expected a [key, value] pair`);
      return [str(`${what}[${i}][0]`, pair[0]), str(`${what}[${i}][1]`, pair[1])];
    });
  }
  object(what, v);
  return Object.keys(v)
    .map((k) => [str(`${what} key`, k), str(`${what}.${k}`, v[k])])
    .sort(([a], [b]) => compareKeys(a, b));
}

/** The options object of a call that takes one (`list({ limit })`); left out is `{}`. */
export function options(what, v) {
  return object(what, v ?? {});
}

// Results: the generated shapes (checks.js) use these.

/** `f(v)`, or undefined when `v` is left out. */
export function maybe(v, f) {
  return absent(v) ? undefined : f(v);
}

/** A variant answer with a case this host does not know: never guessed at. */
export function unknownCase(variant, v) {
  return new GakError('storage', `the ${variant} answer ${JSON.stringify(v?.tag)} is one this host does not know`);
}
