// Vector calls -> typed kernel calls, and results -> the vectors' JSON
// (kebab-case fields, numbers, bytes as UTF-8 text), as the Rust runner
// (`host/rust/cli/src/conformance/`) maps them: every exported function
// through the table generated from the WIT (exports.js), and here the
// host-level calls each runner writes by hand — `sink.write-fenced` (a body
// in the call's transaction), `sink.read`, and `taskboard.list` without
// `limit` (the 0.1 form: the whole board).
import { GakError } from '../errors.js';
import { CALLS, readTaskState, writeTask } from './exports.js';
import * as json from './values.js';

/**
 * The vectors' reference sink body: append "m" to the resource's marker in
 * `downstream`, then fail if asked to — the append must then vanish with
 * the rest.
 */
export function referenceBody(resource, fail) {
  return (down) => {
    down.put(resource, `${down.get(resource) ?? ''}m`);
    if (fail) throw new Error('the reference body fails as asked');
  };
}

/**
 * Run one vector call: `{ok: json}` or `{err: GakError}`. Throws an Error
 * when the step itself is malformed (it fails the scenario).
 * `options.sinkBody({resource, fail, args})`, when given, makes the body of
 * `sink.write-fenced` (the host-protocol cases' `body` kinds).
 */
export function dispatch(k, name, args, options = {}) {
  try {
    const value = call(k, name, json.isObject(args) ? args : {}, options);
    return { ok: value === undefined ? null : value };
  } catch (e) {
    if (e instanceof GakError) return { err: e };
    if (e instanceof json.Invalid) return { err: new GakError('invalid-input', e.message) };
    if (e instanceof json.Malformed) throw new Error(`${name}: bad args: ${e.message}`);
    throw e;
  }
}

function call(k, name, a, options) {
  switch (name) {
    case 'sink.write-fenced':
      return writeFenced(k, a, options);
    case 'sink.read':
      return sinkRead(k, a);
    case 'taskboard.list':
      if (json.field(a, 'limit') === undefined) return wholeBoard(k, a);
      break;
    default:
  }
  if (!Object.hasOwn(CALLS, name)) throw new json.Malformed(`unknown call ${JSON.stringify(name)}`);
  return CALLS[name](k, a);
}

/** A fenced write whose body is the reference body (or `options.sinkBody`'s). */
function writeFenced(k, a, options) {
  const resource = json.string(json.field(a, 'resource'), 'resource');
  const fail = json.bool(json.field(a, 'fail'), 'fail');
  const fence = json.u64(json.field(a, 'fence'), 'fence');
  const body = options.sinkBody?.({ resource, fail, args: a }) ?? referenceBody(resource, fail);
  try {
    k.sideeffect.writeFenced(resource, fence, body);
  } catch (e) {
    if (e instanceof GakError) throw new GakError(e.code, e.detail);
    throw e;
  }
  return null;
}

/** The sink's seen fence and the reference body's marker. */
function sinkRead(k, a) {
  const resource = json.string(json.field(a, 'resource'), 'resource');
  const seen = k.sideeffect.sinkSeen(resource);
  const marker = k.withDownstream((down) => down.get(resource));
  return { 'seen-fence': json.num(seen), marker: marker ?? '' };
}

/**
 * `taskboard.list` without `limit`: the whole board as an array (the 0.1
 * form of the call, which vector files may still use), read page by page.
 */
function wholeBoard(k, a) {
  const state = json.option(json.field(a, 'state'), 'state', readTaskState);
  const all = [];
  let after;
  for (;;) {
    const page = k.taskboard.list({ state, after, limit: 1000 });
    all.push(...page.items.map(writeTask));
    if (page.next === undefined) return all;
    after = page.next;
  }
}
