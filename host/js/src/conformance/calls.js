// Vector calls -> typed kernel calls, and results -> the vectors' JSON
// (kebab-case fields, numbers, bytes as UTF-8 text), as the Rust runner
// (`host/rust/cli/src/conformance/calls.rs`) renders them.
import { GakError } from '../errors.js';
import { compareKeys } from '../store/keys.js';

/** A value no caller should send: the call's answer is `invalid-input`. */
class Invalid extends Error {}
/** The vector itself is malformed: the scenario fails. */
class Malformed extends Error {}

const U64_END = 2 ** 64;
const isObject = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);
const show = (v) => JSON.stringify(v);

function field(obj, key) {
  const v = isObject(obj) ? obj[key] : undefined;
  return v === null ? undefined : v;
}

function string(obj, key) {
  const v = field(obj, key);
  if (v === undefined) throw new Malformed(`missing ${key}`);
  if (typeof v !== 'string') throw new Malformed(`${key}: expected a string, got ${show(v)}`);
  return v;
}

/** Lenient string: absent is empty (the kernel then judges it). */
const stringOrEmpty = (obj, key) => (field(obj, key) === undefined ? '' : string(obj, key));
const optString = (obj, key) => (field(obj, key) === undefined ? undefined : string(obj, key));

/** A u64 as bigint; a JSON number no u64 holds is `invalid-input`. */
function number(obj, key) {
  const v = field(obj, key);
  if (v === undefined) throw new Malformed(`missing ${key}`);
  if (typeof v !== 'number') throw new Malformed(`${key}: expected a number, got ${show(v)}`);
  if (!Number.isInteger(v) || v < 0 || v >= U64_END) throw new Invalid(`${key}: ${v} is not a u64`);
  return BigInt(v);
}

const optNumber = (obj, key) => (field(obj, key) === undefined ? undefined : number(obj, key));

function boolean(obj, key) {
  const v = field(obj, key);
  if (v === undefined) return false;
  if (typeof v !== 'boolean') throw new Malformed(`${key}: expected a bool, got ${show(v)}`);
  return v;
}

function strings(obj, key) {
  const v = field(obj, key);
  if (v === undefined) return [];
  if (!Array.isArray(v)) throw new Malformed(`${key}: expected an array, got ${show(v)}`);
  return v.map((s) => {
    if (typeof s !== 'string') throw new Malformed(`${key}: expected strings`);
    return s;
  });
}

const encoder = new TextEncoder();
const decoder = new TextDecoder(); // invalid UTF-8 -> U+FFFD, like from_utf8_lossy
const bytes = (obj, key) => encoder.encode(stringOrEmpty(obj, key));
const text = (b) => decoder.decode(b);

function object(obj, key) {
  const v = field(obj, key);
  if (v === undefined) throw new Malformed(`missing ${key}`);
  if (!isObject(v)) throw new Malformed(`${key}: expected an object, got ${show(v)}`);
  return v;
}

const num = (b) => (b === undefined ? undefined : Number(b));

function snapshot(v) {
  const f = field(v, 'fields');
  let fields = [];
  if (f !== undefined) {
    if (!isObject(f)) throw new Malformed(`fields: expected an object, got ${show(f)}`);
    // The WIT's sorted pairs (serde_json's map is ordered by key bytes).
    fields = Object.entries(f)
      .map(([k, x]) => {
        if (typeof x !== 'string') throw new Malformed(`fields.${k}: expected a string, got ${show(x)}`);
        return [k, x];
      })
      .sort(([a], [b]) => compareKeys(a, b));
  }
  return {
    runId: stringOrEmpty(v, 'run-id'),
    seq: optNumber(v, 'seq') ?? 0n,
    fence: optNumber(v, 'fence'),
    status: stringOrEmpty(v, 'status'),
    done: strings(v, 'done'),
    fields,
  };
}

function snapshotJson(s) {
  const out = { 'run-id': s.runId, seq: num(s.seq), status: s.status, done: s.done, fields: Object.fromEntries(s.fields) };
  if (s.fence !== undefined) out.fence = num(s.fence);
  return out;
}

function status(v) {
  const s = string(v, 'status');
  if (s !== 'succeeded' && s !== 'failed') throw new Invalid(`unknown status ${show(s)}`);
  return s;
}

const outcomeJson = (o) => ({ status: o.status, result: text(o.result) });

function action(v) {
  const a = object(v, 'action');
  const safety = optString(a, 'retry-safety') ?? 'safe';
  if (safety !== 'safe' && safety !== 'unsafe') throw new Invalid(`unknown retry-safety ${show(safety)}`);
  return {
    key: stringOrEmpty(a, 'key'),
    resource: stringOrEmpty(a, 'resource'),
    retrySafety: safety,
    fingerprint: optString(a, 'fingerprint'),
  };
}

function lease(v) {
  const l = object(v, 'lease');
  return {
    key: stringOrEmpty(l, 'key'),
    resource: stringOrEmpty(l, 'resource'),
    fence: optNumber(l, 'fence') ?? 0n,
    holder: stringOrEmpty(l, 'holder'),
    until: optNumber(l, 'until') ?? 0n,
  };
}

const leaseJson = (l) => ({ key: l.key, resource: l.resource, fence: num(l.fence), holder: l.holder, until: num(l.until) });

function enumField(v, allowed, what) {
  const s = optString(v, 'state');
  if (s !== undefined && !allowed.includes(s)) throw new Invalid(`unknown ${what} ${show(s)}`);
  return s;
}
const state = (v) => enumField(v, ['open', 'claimed', 'done', 'failed'], 'state');
const keyState = (v) => enumField(v, ['cleared', 'in-flight', 'uncertain', 'completed'], 'key state');

function taskJson(t) {
  const out = { id: t.id, title: t.title, deps: t.deps, state: t.state, fence: num(t.fence) };
  if (t.owner !== undefined) out.owner = t.owner;
  if (t.token !== undefined) out.token = t.token;
  if (t.until !== undefined) out.until = num(t.until);
  return out;
}

/** A page size: a number; one no u32 takes is `invalid-input`. */
function limit(v) {
  const n = number(v, 'limit');
  if (n > 0xffff_ffffn) throw new Invalid(`limit: ${n} is out of range`);
  return Number(n);
}

function pageJson(items, next) {
  return next === undefined ? { items } : { items, next };
}

function keyInfoJson(i) {
  const out = { key: i.key, state: i.state, 'retry-safety': i.retrySafety, resource: i.resource };
  if (i.until !== undefined) out.until = num(i.until);
  if (i.completedAt !== undefined) out['completed-at'] = num(i.completedAt);
  if (i.reconcilingUntil !== undefined) out['reconciling-until'] = num(i.reconcilingUntil);
  if (i.fingerprint !== undefined) out.fingerprint = i.fingerprint;
  if (i.reason !== undefined) out.reason = i.reason;
  return out;
}

function list(mapItem) {
  return (page) => pageJson(page.items.map(mapItem), page.next);
}

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
    const value = call(k, name, args ?? {}, options);
    return { ok: value === undefined ? null : value };
  } catch (e) {
    if (e instanceof GakError) return { err: e };
    if (e instanceof Invalid) return { err: new GakError('invalid-input', e.message) };
    if (e instanceof Malformed) throw new Error(`${name}: bad args: ${e.message}`);
    throw e;
  }
}

function call(k, name, a, options) {
  const cp = k.checkpoint;
  const cg = k.commitgate;
  const se = k.sideeffect;
  const tb = k.taskboard;
  switch (name) {
    case 'checkpoint.save-if-newer':
      return cp.saveIfNewer(snapshot(object(a, 'snapshot')));
    case 'checkpoint.load':
      return snapshotJson(cp.load(stringOrEmpty(a, 'run-id')));
    case 'checkpoint.build-plan': {
      const s = field(a, 'steps');
      if (s !== undefined && !Array.isArray(s)) throw new Malformed(`steps: got ${show(s)}`);
      const steps = (s ?? []).map((x) => ({ id: stringOrEmpty(x, 'id'), dependsOn: strings(x, 'depends-on') }));
      const snap = field(a, 'snapshot') === undefined ? undefined : snapshot(field(a, 'snapshot'));
      const p = cp.buildPlan(steps, snap);
      return { skip: p.skip, run: p.run, untrusted: p.untrusted };
    }
    case 'commitgate.commit': {
      const o = object(a, 'outcome');
      const outcome = { status: status(o), result: bytes(o, 'result') };
      return outcomeJson(cg.commit(stringOrEmpty(a, 'run-id'), optString(a, 'step'), optNumber(a, 'fence') ?? 0n, outcome));
    }
    case 'commitgate.read':
      return outcomeJson(cg.read(stringOrEmpty(a, 'run-id'), optString(a, 'step')));
    case 'sideeffect.acquire': {
      const x = se.acquire(action(a), number(a, 'ttl'));
      switch (x.tag) {
        case 'granted':
          return { granted: leaseJson(x.lease) };
        case 'replayed':
          return { replayed: text(x.result) };
        case 'uncertain':
          return { uncertain: x.reason };
        case 'in-flight':
          return { 'in-flight': {} };
        default:
          return { contended: { until: num(x.until) } };
      }
    }
    case 'sideeffect.complete':
      return text(se.complete(action(a), lease(a), bytes(a, 'result')));
    case 'sideeffect.release':
      return se.release(action(a), lease(a));
    case 'sideeffect.abandon':
      return se.abandon(action(a), lease(a), stringOrEmpty(a, 'reason'));
    case 'sideeffect.renew':
      return leaseJson(se.renew(action(a), lease(a), number(a, 'ttl')));
    case 'sideeffect.mark-uncertain':
      return se.markUncertain(action(a), lease(a), stringOrEmpty(a, 'reason'));
    case 'sideeffect.begin-reconcile': {
      const c = se.beginReconcile(action(a), number(a, 'ttl'));
      return { claim: c.claim, until: num(c.until) };
    }
    case 'sideeffect.resolve-uncertain': {
      const r = object(a, 'resolution');
      const resolution = {
        applied: boolean(r, 'applied'),
        result: field(r, 'result') === undefined ? undefined : bytes(r, 'result'),
        forceRetryable: boolean(r, 'force-retryable'),
        claim: optString(r, 'claim'),
      };
      const x = se.resolveUncertain(action(a), resolution);
      return x.tag === 'replayed' ? { replayed: text(x.result) } : { cleared: {} };
    }
    case 'sink.write-fenced': {
      const resource = stringOrEmpty(a, 'resource');
      const fail = boolean(a, 'fail');
      const fence = number(a, 'fence');
      const body = options.sinkBody?.({ resource, fail, args: a }) ?? referenceBody(resource, fail);
      try {
        se.writeFenced(resource, fence, body);
      } catch (e) {
        if (e instanceof GakError) throw new GakError(e.code, e.detail);
        throw e;
      }
      return null;
    }
    case 'sink.read': {
      const resource = stringOrEmpty(a, 'resource');
      const seen = se.sinkSeen(resource);
      const marker = k.withDownstream((down) => down.get(resource));
      return { 'seen-fence': num(seen), marker: marker ?? '' };
    }
    case 'taskboard.seed': {
      const t = field(a, 'tasks');
      if (t !== undefined && !Array.isArray(t)) throw new Malformed(`tasks: got ${show(t)}`);
      const tasks = (t ?? []).map((x) => ({
        id: stringOrEmpty(x, 'id'),
        title: optString(x, 'title'),
        deps: strings(x, 'deps'),
        state: state(x),
      }));
      return tb.seed(tasks);
    }
    case 'taskboard.list': {
      if (field(a, 'limit') === undefined) {
        // Without `limit`: the whole board as an array (the 0.1 form of the
        // call, which vector files may still use), read page by page.
        const s = state(a);
        const all = [];
        let after;
        for (;;) {
          const page = tb.list({ state: s, after, limit: 1000 });
          all.push(...page.items.map(taskJson));
          if (page.next === undefined) return all;
          after = page.next;
        }
      }
      const after = optString(a, 'after');
      return list(taskJson)(tb.list({ state: state(a), after, limit: limit(a) }));
    }
    case 'taskboard.get':
      return taskJson(tb.get(stringOrEmpty(a, 'id')));
    case 'taskboard.claim-next': {
      const t = tb.claimNext(stringOrEmpty(a, 'agent'), number(a, 'ttl'));
      return t === undefined ? null : taskJson(t);
    }
    case 'sideeffect.list': {
      const after = optString(a, 'after');
      return list(keyInfoJson)(se.list({ state: keyState(a), after, limit: limit(a) }));
    }
    case 'sideeffect.get':
      return keyInfoJson(se.get(stringOrEmpty(a, 'key')));
    case 'retention.prune': {
      const p = k.retention.prune(number(a, 'before'), limit(a));
      return {
        'removed-keys': p.removedKeys,
        'removed-tasks': p.removedTasks,
        'removed-runs': p.removedRuns,
        more: p.more,
      };
    }
    case 'taskboard.claim':
      return taskJson(tb.claim(stringOrEmpty(a, 'id'), stringOrEmpty(a, 'agent'), number(a, 'ttl')));
    case 'taskboard.release':
      return tb.release(stringOrEmpty(a, 'id'), stringOrEmpty(a, 'token'));
    case 'taskboard.complete':
      return tb.complete(stringOrEmpty(a, 'id'), stringOrEmpty(a, 'token'));
    case 'taskboard.renew':
      return taskJson(tb.renew(stringOrEmpty(a, 'id'), stringOrEmpty(a, 'token'), number(a, 'ttl')));
    default:
      throw new Malformed(`unknown call ${show(name)}`);
  }
}
