// Parsing, substitution, matching and binding for vector scenarios
// (VECTORS.md), as the Rust runner (`host/rust/cli/src/conformance/vector.rs`).
import { ManualClock } from '../clock.js';
import { ERROR_CODES } from '../contract.js';
import { dispatch } from './calls.js';

const RESERVED = ['any', 'none', 'hex128'];
const KNOWN_ERRORS = new Set(ERROR_CODES);

const isObject = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);
const show = (v) => JSON.stringify(v);

/** Parse a file holding one scenario object or an array of them. */
export function parseFile(text) {
  let value;
  try {
    value = JSON.parse(text);
  } catch (e) {
    throw new Error(`invalid JSON: ${e.message}`);
  }
  let items;
  if (Array.isArray(value)) items = value;
  else if (isObject(value)) items = [value];
  else throw new Error('$: expected a scenario object or an array of them');
  return items.map((item, i) => {
    if (!isObject(item)) throw new Error(`$[${i}]: expected a scenario object`);
    const name = item.scenario;
    if (name !== undefined && typeof name !== 'string') throw new Error(`$[${i}].scenario: expected a string`);
    if (!Array.isArray(item.steps)) throw new Error(`$[${i}].steps: expected an array`);
    return { name, steps: item.steps };
  });
}

/** Run one scenario on a fresh kernel from `target`; throws an Error saying which step failed. */
export async function runScenario(target, scenario, file, index) {
  const clock = new ManualClock(0n);
  let kernel;
  try {
    kernel = await target.fresh(clock);
  } catch (e) {
    throw new Error(`cannot open a fresh store: ${e.message}`);
  }
  const binds = new Map();
  for (const [i, step] of scenario.steps.entries()) {
    const at = (why) => new Error(`step ${i} (${file}: $[${index}].steps[${i}]): ${why}`);
    if (!isObject(step)) throw at('expected an object');
    const kinds = ['clock', 'advance', 'call'].filter((k) => k in step);
    if (kinds.length !== 1) throw at('needs exactly one of clock / advance / call');
    try {
      if (kinds[0] === 'call') callStep(kernel, step, binds);
      else clockStep(clock, step, kinds[0]);
    } catch (e) {
      throw at(e.message);
    }
  }
}

/** A `clock` (set) or `advance` step on a ManualClock. */
export function clockStep(clock, step, kind) {
  const ms = step[kind];
  // Any u64, as the Rust runner; past 2^53 the calls then fail (storage).
  if (typeof ms !== 'number' || !Number.isInteger(ms) || ms < 0 || ms >= 2 ** 64) throw new Error(`${kind}: expected ms`);
  if (kind === 'advance') clock.advance(BigInt(ms));
  else clock.set(BigInt(ms));
}

/**
 * A `call` step: substitute its args, run it (`options.dispatch`, default
 * the vectors' calls), check `ok` / `err`, bind. `options.repeat` allows
 * `{"$repeat": S, "times": N}` in the args (host-protocol cases).
 */
export function callStep(kernel, step, binds, options = {}) {
  const name = step.call;
  if (typeof name !== 'string') throw new Error('call: expected a name');
  const args = substitute(step.args ?? null, binds, options);
  const wantOk = 'ok' in step;
  const wantErr = 'err' in step;
  if (wantOk === wantErr) throw new Error(`${name}: needs exactly one of ok / err`);
  if (wantErr) {
    if (typeof step.err !== 'string') throw new Error('err: expected a variant name');
    if (!KNOWN_ERRORS.has(step.err)) throw new Error(`${name}: unknown error variant ${show(step.err)}`);
  }
  const actual = (options.dispatch ?? dispatch)(kernel, name, args);
  if (wantOk && 'ok' in actual) {
    if (!matches(step.ok, actual.ok, binds)) {
      throw new Error(`${name}: expected ok ${show(step.ok)}, got ok ${brief(actual.ok)}`);
    }
  } else if (wantOk) {
    throw new Error(`${name}: expected ok ${show(step.ok)}, got err ${brief(actual.err.message)}`);
  } else if ('ok' in actual) {
    throw new Error(`${name}: expected err ${show(step.err)}, got ok ${brief(actual.ok)}`);
  } else if (actual.err.code !== step.err) {
    throw new Error(`${name}: expected err ${show(step.err)}, got err ${brief(actual.err.message)}`);
  }
  if ('bind' in step && 'ok' in actual) {
    if (!isObject(step.bind)) throw new Error('bind: expected an object');
    for (const [as, path] of Object.entries(step.bind)) {
      if (RESERVED.includes(as)) throw new Error(`bind: ${show(as)} is reserved`);
      if (typeof path !== 'string') throw new Error('bind: paths are strings');
      const value = lookup(actual.ok, path);
      if (value === undefined) throw new Error(`bind: no ${show(path)} in ${brief(actual.ok)}`);
      binds.set(as, value);
    }
  }
  return actual;
}

/** A value for a failure message: at most 2,000 characters of its JSON (results may be 1 MiB). */
function brief(v) {
  const text = typeof v === 'string' ? v : show(v);
  return text !== undefined && text.length > 2000 ? `${text.slice(0, 2000)}… (${text.length} characters)` : text;
}

function lookup(value, path) {
  if (path === '') return value;
  let v = value;
  for (const part of path.split('.')) {
    if (Array.isArray(v)) v = /^\d+$/.test(part) ? v[Number(part)] : undefined;
    else if (isObject(v)) v = Object.hasOwn(v, part) ? v[part] : undefined;
    else return undefined;
    if (v === undefined) return undefined;
  }
  return v;
}

function bound(binds, name) {
  if (!binds.has(name)) throw new Error(`$${name} is not bound`);
  return binds.get(name);
}

/**
 * Replace `$name`, `$$literal` and `{"$merge": name, ...}` in call args (and
 * `{"$repeat": S, "times": N}` when `options.repeat`).
 */
export function substitute(v, binds, options = {}) {
  if (typeof v === 'string') {
    if (v.startsWith('$$')) return v.slice(1);
    if (v.startsWith('$')) return structuredClone(bound(binds, v.slice(1)));
    return v;
  }
  if (Array.isArray(v)) return v.map((x) => substitute(x, binds, options));
  if (isObject(v)) {
    if (options.repeat && '$repeat' in v) {
      const { $repeat: unit, times, ...rest } = v;
      if (typeof unit !== 'string') throw new Error('$repeat: expected a string');
      if (!Number.isSafeInteger(times) || times < 0) throw new Error('$repeat: times must be a count');
      if (Object.keys(rest).length > 0) throw new Error(`$repeat: unexpected ${Object.keys(rest).join(', ')}`);
      return unit.repeat(times);
    }
    if ('$merge' in v) {
      const name = v.$merge;
      if (typeof name !== 'string') throw new Error('$merge: expected a name');
      const base = bound(binds, name);
      if (!isObject(base)) throw new Error(`$merge: $${name} is not an object`);
      const out = structuredClone(base);
      for (const [k, x] of Object.entries(v)) if (k !== '$merge') out[k] = substitute(x, binds, options);
      return out;
    }
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, substitute(x, binds, options)]));
  }
  return v;
}

const isHex128 = (v) => typeof v === 'string' && /^[0-9a-f]{32}$/.test(v);

function deepEqual(a, b) {
  if (a === b) return true;
  if (Array.isArray(a)) return Array.isArray(b) && a.length === b.length && a.every((x, i) => deepEqual(x, b[i]));
  if (isObject(a)) {
    if (!isObject(b)) return false;
    const ka = Object.keys(a);
    return ka.length === Object.keys(b).length && ka.every((k) => Object.hasOwn(b, k) && deepEqual(a[k], b[k]));
  }
  return false;
}

/** Does the actual value (undefined = absent) match the expected pattern? */
export function matches(want, got, binds) {
  const present = got !== undefined && got !== null;
  if (typeof want === 'string') {
    if (want === '$any') return present;
    if (want === '$none') return !present;
    if (want === '$hex128') return isHex128(got);
    if (want.startsWith('$$')) return got === want.slice(1);
    if (want.startsWith('$')) return got !== undefined && deepEqual(got, bound(binds, want.slice(1)));
    return got === want;
  }
  if (isObject(want)) {
    const keys = Object.keys(want);
    if (keys.length === 1 && keys[0] === '$ne') {
      if (typeof want.$ne !== 'string') throw new Error('$ne: expected a name');
      return present && !deepEqual(got, bound(binds, want.$ne));
    }
    if (!isObject(got)) return false;
    return keys.every((k) => matches(want[k], Object.hasOwn(got, k) ? got[k] : undefined, binds));
  }
  if (Array.isArray(want)) {
    return Array.isArray(got) && got.length === want.length && want.every((w, i) => matches(w, got[i], binds));
  }
  if (want === null) return !present;
  return got === want;
}
