// The vectors' JSON values (host/gen/README.md), read and written as the
// generated readers and writers (exports.js) and the host-level calls
// (calls.js) need them: the shape every runner shares, spelled in
// JavaScript (a u64 is a bigint, bytes a Uint8Array).
//
// Absent (or null) values in `args`: a string is "", a number 0, a list [],
// a bool false, an option none, an enum its first case — the component then
// judges them. A value of the wrong JSON type is a malformed vector; an enum
// name the contract does not have, or a number outside the type's range, is
// the call's `invalid-input`.
import { compareKeys } from '../store/keys.js';

/** A value no caller should send: the call's answer is `invalid-input`. */
export class Invalid extends Error {}
/** The vector itself is malformed: the scenario fails. */
export class Malformed extends Error {}

const U64_END = 2 ** 64;
const show = (v) => JSON.stringify(v);
const absent = (v) => v === undefined || v === null;

export const isObject = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);

function malformed(at, expected, got) {
  return new Malformed(`${at}: expected ${expected}, got ${show(got)}`);
}

/** The value under `key` of an object (its own key only); null is absent. */
export function field(obj, key) {
  if (!isObject(obj) || !Object.hasOwn(obj, key)) return undefined;
  const v = obj[key];
  return v === null ? undefined : v;
}

/** A string; absent is empty. */
export function string(v, at) {
  if (absent(v)) return '';
  if (typeof v !== 'string') throw malformed(at, 'a string', v);
  return v;
}

/** A u64 as a bigint; absent is 0. A number no u64 holds is `invalid-input`. */
export function u64(v, at) {
  if (absent(v)) return 0n;
  if (typeof v !== 'number') throw malformed(at, 'a number', v);
  if (!Number.isInteger(v) || v < 0 || v >= U64_END) throw new Invalid(`${at}: ${v} is not a u64`);
  return BigInt(v);
}

/** A u32 as a number; one no u32 holds is `invalid-input`. */
export function u32(v, at) {
  const n = u64(v, at);
  if (n > 0xffff_ffffn) throw new Invalid(`${at}: ${n} is out of range`);
  return Number(n);
}

/** An s32 as a number; absent is 0. One no s32 holds is `invalid-input`. */
export function s32(v, at) {
  if (absent(v)) return 0;
  if (typeof v !== 'number') throw malformed(at, 'a number', v);
  if (!Number.isInteger(v) || v < -0x8000_0000 || v > 0x7fff_ffff) {
    throw new Invalid(`${at}: ${v} is not an s32`);
  }
  return v;
}

/** A boolean; absent is false. */
export function bool(v, at) {
  if (absent(v)) return false;
  if (typeof v !== 'boolean') throw malformed(at, 'a bool', v);
  return v;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder(); // invalid UTF-8 -> U+FFFD, like from_utf8_lossy

/** Bytes, given as a UTF-8 string; absent is empty. */
export function bytes(v, at) {
  return encoder.encode(string(v, at));
}

/** Pairs sorted by key (byte order, as serde_json's map), given as an object; absent is empty. */
export function pairs(v, at) {
  if (absent(v)) return [];
  if (!isObject(v)) throw malformed(at, 'an object', v);
  return Object.entries(v)
    .map(([k, x]) => {
      if (typeof x !== 'string') throw malformed(`${at}.${k}`, 'a string', x);
      return [k, x];
    })
    .sort(([a], [b]) => compareKeys(a, b));
}

/** An array, each item read by `item(value, at)`; absent is empty. */
export function list(v, at, item) {
  if (absent(v)) return [];
  if (!Array.isArray(v)) throw malformed(at, 'an array', v);
  return v.map((x, i) => item(x === null ? undefined : x, `${at}[${i}]`));
}

/** Absent is none (undefined); anything else is read by `item(value, at)`. */
export function option(v, at, item) {
  return absent(v) ? undefined : item(v, at);
}

/** A record's object; a missing record is a malformed vector. */
export function record(v, at) {
  if (absent(v)) throw new Malformed(`missing ${at}`);
  if (!isObject(v)) throw malformed(at, 'an object', v);
  return v;
}

/** An enum's case name; absent is its first case. */
export function enumCase(v, at, cases) {
  if (absent(v)) return cases[0];
  if (typeof v !== 'string') throw malformed(at, 'a case name', v);
  if (!cases.includes(v)) throw new Invalid(`${at}: unknown case ${show(v)} (expected ${cases.join(' | ')})`);
  return v;
}

/** A u64 answer as a JSON number (exact: the kernel's numbers stay below 2^53). */
export const num = (b) => Number(b);

/** Bytes as the vectors show them: UTF-8, lossy. */
export const text = (b) => decoder.decode(b);
