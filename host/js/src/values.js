// Checking arguments before they reach the component, and shaping results.
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

const U64_END = 1n << 64n;
const U32_MAX = 0xffff_ffff;

/** The longest string or bytes argument (no contract value is longer: results are 1 MiB). */
export const MAX_VALUE_BYTES = 1 << 20;
/** The longest list argument. */
export const MAX_LIST_ITEMS = 10_000;
/** The most string and byte data one call may carry. */
export const MAX_CALL_BYTES = 64 << 20;

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

export function optStr(what, v) {
  return v === undefined || v === null ? undefined : str(what, v);
}

export function strList(what, v) {
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v)) throw invalidInput(`${what}: expected an array of strings`);
  return v.map((s, i) => str(`${what}[${i}]`, s));
}

/** A u64: a bigint in 0..2^64-1 (the component then checks < 2^53). */
export function u64(what, v) {
  if (typeof v !== 'bigint') throw invalidInput(`${what}: expected a bigint`);
  if (v < 0n || v >= U64_END) throw invalidInput(`${what}: ${v} is outside 0..2^64-1`);
  return v;
}

export function optU64(what, v) {
  return v === undefined || v === null ? undefined : u64(what, v);
}

/** A u32 (page limits): an integer number in 0..2^32-1. */
export function u32(what, v) {
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 0 || v > U32_MAX) {
    throw invalidInput(`${what}: expected an integer in 0..2^32-1`);
  }
  return v;
}

export function bool(what, v) {
  if (v === undefined || v === null) return false;
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

function oneOf(what, v, allowed) {
  if (typeof v !== 'string' || !allowed.includes(v)) {
    throw invalidInput(`${what}: unknown value ${JSON.stringify(v)} (expected ${allowed.join(' | ')})`);
  }
  return v;
}

function object(what, v) {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) throw invalidInput(`${what}: expected an object`);
  return v;
}

export const TASK_STATES = ['open', 'claimed', 'done', 'failed'];
export const KEY_STATES = ['cleared', 'in-flight', 'uncertain', 'completed'];

export function taskState(what, v) {
  return v === undefined || v === null ? undefined : oneOf(what, v, TASK_STATES);
}

export function keyState(what, v) {
  return v === undefined || v === null ? undefined : oneOf(what, v, KEY_STATES);
}

export function action(v) {
  object('action', v);
  return {
    key: str('action.key', v.key),
    resource: str('action.resource', v.resource),
    retrySafety:
      v.retrySafety === undefined || v.retrySafety === null
        ? 'safe'
        : oneOf('action.retrySafety', v.retrySafety, ['safe', 'unsafe']),
    fingerprint: optStr('action.fingerprint', v.fingerprint),
  };
}

export function lease(v) {
  object('lease', v);
  return {
    key: str('lease.key', v.key),
    resource: str('lease.resource', v.resource),
    fence: u64('lease.fence', v.fence),
    holder: str('lease.holder', v.holder),
    until: u64('lease.until', v.until),
  };
}

export function fields(v) {
  if (v === undefined || v === null) return [];
  if (Array.isArray(v)) {
    return v.map((pair, i) => {
      if (!Array.isArray(pair) || pair.length !== 2) throw invalidInput(`snapshot.fields[${i}]: expected a [key, value] pair`);
      return [str(`snapshot.fields[${i}][0]`, pair[0]), str(`snapshot.fields[${i}][1]`, pair[1])];
    });
  }
  // A plain object: its entries in byte order of the keys (the WIT wants
  // pairs sorted by key).
  object('snapshot.fields', v);
  return Object.keys(v)
    .map((k) => [str('snapshot.fields key', k), str(`snapshot.fields.${k}`, v[k])])
    .sort(([a], [b]) => compareKeys(a, b));
}

export function snapshot(v) {
  object('snapshot', v);
  return {
    runId: str('snapshot.runId', v.runId),
    seq: u64('snapshot.seq', v.seq),
    fence: optU64('snapshot.fence', v.fence),
    status: str('snapshot.status', v.status),
    done: strList('snapshot.done', v.done),
    fields: fields(v.fields),
  };
}

export function stepDefs(v) {
  if (!Array.isArray(v)) throw invalidInput('steps: expected an array');
  return v.map((s, i) => {
    object(`steps[${i}]`, s);
    return { id: str(`steps[${i}].id`, s.id), dependsOn: strList(`steps[${i}].dependsOn`, s.dependsOn) };
  });
}

export function outcome(v) {
  object('outcome', v);
  return {
    status: oneOf('outcome.status', v.status, ['succeeded', 'failed']),
    result: bytes('outcome.result', v.result ?? new Uint8Array()),
  };
}

export function resolution(v) {
  object('resolution', v);
  return {
    applied: bool('resolution.applied', v.applied),
    result: v.result === undefined || v.result === null ? undefined : bytes('resolution.result', v.result),
    forceRetryable: bool('resolution.forceRetryable', v.forceRetryable),
    claim: optStr('resolution.claim', v.claim),
  };
}

export function taskSeeds(v) {
  if (!Array.isArray(v)) throw invalidInput('tasks: expected an array');
  return v.map((t, i) => {
    object(`tasks[${i}]`, t);
    return {
      id: str(`tasks[${i}].id`, t.id),
      title: optStr(`tasks[${i}].title`, t.title),
      deps: strList(`tasks[${i}].deps`, t.deps),
      state: taskState(`tasks[${i}].state`, t.state),
    };
  });
}

export function page(what, v) {
  object(what, v ?? {});
  return { after: optStr(`${what}.after`, v?.after), limit: u32(`${what}.limit`, v?.limit) };
}

// Results: jco's `{tag, val}` variants become named fields.

export function acquiredOut(a) {
  switch (a.tag) {
    case 'granted':
      return { tag: 'granted', lease: a.val };
    case 'replayed':
      return { tag: 'replayed', result: a.val };
    case 'uncertain':
      return { tag: 'uncertain', reason: a.val };
    case 'in-flight':
      return { tag: 'in-flight' };
    case 'contended':
      return { tag: 'contended', until: a.val };
    default:
      // An answer this host does not know: never treat it as a grant.
      throw new GakError('storage', `acquire answered ${JSON.stringify(a?.tag)}, which this host does not know`);
  }
}

export function resolvedOut(r) {
  return r.tag === 'replayed' ? { tag: 'replayed', result: r.val } : { tag: 'cleared' };
}
