// The audit of a cross-language worker run (protocol v1), in JavaScript:
// what every worker printed, checked against the store afterwards. The
// Rust-side audit (`tests/src/xlang.rs`) checks the same invariants.
import { GakError } from '../src/index.js';

/** Parse JSONL output of workers into events (throws on a malformed line). */
export function parseEvents(stdout) {
  return stdout
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => {
      const e = JSON.parse(l);
      for (const f of ['t', 'worker', 'lang', 'event']) {
        if (!(f in e)) throw new Error(`line without ${f}: ${l}`);
      }
      if (!Number.isInteger(e.t)) throw new Error(`t is not an integer ms: ${l}`);
      return e;
    });
}

/**
 * Check a run. `group` names what must overlap: 'lang' for the
 * cross-language run, 'worker' for a run of one language. Returns the
 * problems found (empty: the run passes): `safety` (a broken promise of the
 * kernel) and `overlap` (the run did not prove the workers raced).
 */
export function audit(kernel, events, options) {
  const { safety, overlap } = auditParts(kernel, events, options);
  return [...safety, ...overlap];
}

/** `audit`, with safety problems and missing overlap apart. */
export function auditParts(kernel, events, { tasks, keys, group = 'lang' }) {
  const problems = [];
  const by = (kind) => events.filter((e) => e.event === kind);

  // Every claim epoch of every task was won exactly once.
  for (let i = 0; i < tasks; i++) {
    const task = `t${i}`;
    const fences = by('win')
      .filter((e) => e.task === task)
      .map((e) => e.fence)
      .sort((a, b) => a - b);
    const onBoard = Number(kernel.taskboard.get(task).fence);
    const expected = Array.from({ length: onBoard }, (_, j) => j + 1);
    if (JSON.stringify(fences) !== JSON.stringify(expected)) {
      problems.push(`${task}: win fences ${JSON.stringify(fences)}, board fence ${onBoard}`);
    }
  }

  // Every key's body ran exactly once, its downstream row names the worker
  // that ran it, and the key now replays.
  for (let i = 0; i < keys; i++) {
    const key = `key-${i}`;
    const bodies = by('body').filter((e) => e.key === key);
    if (bodies.length !== 1) {
      problems.push(`${key}: ${bodies.length} body events`);
      continue;
    }
    const row = kernel.withDownstream((down) => down.get(`effect/${key}`));
    if (row !== bodies[0].worker) problems.push(`${key}: downstream row ${row}, body by ${bodies[0].worker}`);
    const again = kernel.sideeffect.acquire({ key, resource: `res-${i}`, retrySafety: 'safe' }, 60_000n);
    if (again.tag !== 'replayed') problems.push(`${key}: acquire answers ${again.tag}, not replayed`);
  }

  // The ledger: rows in commit order with non-decreasing fences, one per sink-ok.
  const ledger = kernel.withDownstream((down) => {
    const count = Number(down.get('ledger/count') ?? '0');
    return Array.from({ length: count }, (_, j) => JSON.parse(down.get(`ledger/${String(j + 1).padStart(8, '0')}`)));
  });
  for (let j = 1; j < ledger.length; j++) {
    if (ledger[j].fence < ledger[j - 1].fence) {
      problems.push(`ledger row ${j + 1} has fence ${ledger[j].fence} after ${ledger[j - 1].fence}`);
    }
  }
  if (ledger.length !== by('sink-ok').length) {
    problems.push(`ledger has ${ledger.length} rows, ${by('sink-ok').length} sink-ok events`);
  }

  // Overlap is proven, not assumed.
  const safety = problems.splice(0);
  const groups = [...new Set(events.map((e) => e[group]))];
  const wins = by('win').sort((a, b) => a.t - b.t);
  for (const g of groups) {
    if (!wins.some((w) => w[group] === g)) problems.push(`${group} ${g} won no claim epoch`);
  }
  const interleaved = groups.some((a) =>
    groups.some((b) => {
      if (a === b) return false;
      const bs = wins.filter((w) => w[group] === b).map((w) => w.t);
      return wins.some((w) => w[group] === a && bs.some((t) => t < w.t) && bs.some((t) => t > w.t));
    }),
  );
  if (groups.length < 2) problems.push(`only one ${group} took part`);
  else if (!interleaved) problems.push(`wins of different ${group}s never interleave in time`);
  if (by('taken').length === 0) problems.push('no claim was refused as taken');
  if (by('in-flight').length + by('contended').length === 0) problems.push('no acquire saw in-flight or contended');
  if (by('sink-stale').length === 0) problems.push('no fenced write was refused as stale');
  return { safety, overlap: problems };
}

export { GakError };
