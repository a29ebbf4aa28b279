#!/usr/bin/env node
// The cross-language worker (protocol v1), JavaScript side:
//
//   node host/js/test/xworker.mjs --store URL --worker NAME --index N \
//     --tasks T --rounds R --keys K --sink-rounds S \
//     [--barrier DIR --parties P] [--hold-ms H]
//
// Three phases against a shared store (tasks t0..t{T-1} seeded by the
// parent beforehand; workers never seed), one JSON object per line on
// stdout, each with {t, worker, lang: "js", event, ...}. Any unexpected
// answer exits non-zero with the error on stderr. The same program exists
// in Rust (`gak-xworker`), Python (`host/python/tests/xworker.py`) and Go (`gak xworker`).
import { readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { GakError, openKernel } from '../src/index.js';

const NAMES = ['store', 'worker', 'index', 'tasks', 'rounds', 'keys', 'sink-rounds'];
const OPTIONAL = ['barrier', 'parties', 'hold-ms'];
const NUMBERS = new Set(['index', 'tasks', 'rounds', 'keys', 'sink-rounds', 'parties', 'hold-ms']);
const MAX_TRIES = 2000;
const TTL = 60_000n;

function parseArgs(argv) {
  const args = {};
  for (let i = 0; i < argv.length; i += 2) {
    const name = argv[i]?.startsWith('--') ? argv[i].slice(2) : undefined;
    if (!(NAMES.includes(name) || OPTIONAL.includes(name)) || argv[i + 1] === undefined) {
      throw new Error(`bad argument ${argv[i]}`);
    }
    const value = argv[i + 1];
    if (NUMBERS.has(name)) {
      if (!/^\d+$/.test(value)) throw new Error(`--${name} takes a non-negative integer`);
      args[name] = Number(value);
    } else {
      args[name] = value;
    }
  }
  for (const n of NAMES) if (!(n in args)) throw new Error(`--${n} is required`);
  if (args.tasks < 1) throw new Error('--tasks must be at least 1');
  if (('barrier' in args) !== ('parties' in args)) throw new Error('--barrier and --parties go together');
  return args;
}

const args = parseArgs(process.argv.slice(2));
const name = args.worker;

function emit(event, fields = {}) {
  process.stdout.write(`${JSON.stringify({ t: Date.now(), worker: name, lang: 'js', event, ...fields })}\n`);
}

// A worker process: the blocking kernel (its calls wait for the server on
// this thread; PostgreSQL included).
const kernel = await openKernel(args.store, { blocking: true });

// 0. Phase lines (protocol v1): announce PHASE-N, wait for every party.
async function line(phase) {
  if (!('barrier' in args)) return;
  writeFileSync(join(args.barrier, `${phase}-${args.index}`), '');
  const deadline = Date.now() + 120_000;
  while (readdirSync(args.barrier).filter((f) => f.startsWith(`${phase}-`)).length < args.parties) {
    if (Date.now() > deadline) throw new Error(`barrier ${phase}: not every one of ${args.parties} parties there after 120 s`);
    await sleep(2);
  }
}
kernel.taskboard.get('t0'); // compiled and instantiated
await line('ready');

// 1. Claims: each round claims one task; a win is released at once.
for (let r = 0; r < args.rounds; r++) {
  const task = `t${r % args.tasks}`;
  try {
    const won = kernel.taskboard.claim(task, name, TTL);
    emit('win', { task, fence: Number(won.fence) });
    kernel.taskboard.release(task, won.token);
  } catch (e) {
    if (!(e instanceof GakError && e.code === 'taken')) throw e;
    emit('taken', { task });
  }
}

await line('effects');

// 2. Effects: every key is applied exactly once by whichever worker gets it.
for (let i = 0; i < args.keys; i++) {
  const key = `key-${i}`;
  const action = { key, resource: `res-${i}`, retrySafety: 'safe' };
  for (let tries = 1; ; tries++) {
    const a = kernel.sideeffect.acquire(action, TTL);
    if (a.tag === 'granted') {
      kernel.sideeffect.writeFenced(`res-${i}`, a.lease.fence, (down) => down.put(`effect/${key}`, name));
      emit('body', { key, fence: Number(a.lease.fence) });
      // The effect takes time, as a real one does; the key is in flight.
      if (args['hold-ms']) await sleep(args['hold-ms']);
      kernel.sideeffect.complete(action, a.lease, name);
      break;
    }
    if (a.tag === 'replayed') {
      emit('replayed', { key });
      break;
    }
    if (a.tag !== 'in-flight' && a.tag !== 'contended') {
      throw new Error(`acquire ${key}: unexpected ${a.tag} ${a.reason ?? ''}`);
    }
    emit(a.tag, { key });
    if (tries >= MAX_TRIES) throw new Error(`acquire ${key}: still ${a.tag} after ${tries} tries`);
    await sleep(1 + Math.floor(Math.random() * 5));
  }
}

await line('sink');

// 3. Sink: a ledger appended to under fences s*16 + N + 1.
for (let s = 0; s < args['sink-rounds']; s++) {
  const fence = s * 16 + args.index + 1;
  try {
    kernel.sideeffect.writeFenced('ledger', BigInt(fence), (down) => {
      const count = Number(down.get('ledger/count') ?? '0') + 1;
      down.put('ledger/count', String(count));
      down.put(`ledger/${String(count).padStart(8, '0')}`, JSON.stringify({ worker: name, fence }));
    });
    emit('sink-ok', { fence });
  } catch (e) {
    if (!(e instanceof GakError && e.code === 'fence-stale')) throw e;
    emit('sink-stale', { fence });
  }
}

kernel.close();
