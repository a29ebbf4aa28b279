// `gak.mjs demo`: the reference-runtime story, end to end through the
// component, one numbered line per event — the same six steps as the Rust
// host's `gak demo` (`host/rust/cli/src/demo.rs`).
//
// A run of three steps is started, dies after two, and resumes on another
// worker: the plan skips the finished steps and every effect body's call
// counter proves nothing was replayed. Then a claim race and an uncertain
// effect being reconciled.
import { Worker } from 'node:worker_threads';
import { Committer } from './committer.js';
import { ManualClock, SystemClock } from './clock.js';
import { GakError } from './errors.js';
import { openKernel } from './kernel.js';

const LEASE = 30_000n;
const CLAIMERS = 8;

const steps = () => [
  { id: 'reserve-stock', dependsOn: [] },
  { id: 'charge-card', dependsOn: ['reserve-stock'] },
  { id: 'ship-parcel', dependsOn: ['charge-card'] },
];

const text = (b) => new TextDecoder().decode(b);

class Demo {
  line = 0;
  report = {
    bodyCalls: new Map(),
    skipped: [],
    resumed: [],
    raceWinners: 0,
    raceClaimers: CLAIMERS,
    retryRefused: false,
    replayedAfterResolve: false,
  };

  constructor(kernel, clock, url, component, out) {
    Object.assign(this, { kernel, clock, url, component, out });
    this.runId = `order-7-${clock.now().toString(16)}`;
  }

  say(s) {
    this.out(`${++this.line}. ${s}`);
  }

  /** Run `step` as a worker holding the run's claim with `fence`. */
  async runStep(committer, fence, step) {
    const action = { key: `${this.runId}/${step}`, resource: step, fingerprint: `${step}:v1` };
    const calls = this.report.bodyCalls;
    const ran = await this.kernel.runEffect(action, LEASE, () => {
      calls.set(step, (calls.get(step) ?? 0) + 1);
      return `${step} ok`;
    });
    if (ran.tag !== 'applied' && ran.tag !== 'replayed') {
      throw new GakError('storage', `${step}: unexpected ${ran.tag}`);
    }
    this.kernel.commitgate.commit(this.runId, step, fence, { status: 'succeeded', result: ran.result });
    committer.stepDone(step);
  }

  async story() {
    const board = this.kernel.taskboard;
    board.seed([{ id: this.runId, title: 'order #7' }]);
    this.say(
      `run ${this.runId} created: reserve-stock -> charge-card -> ship-parcel (each depends on the one before)`,
    );

    // Worker A claims the run and gets through two steps.
    const claimA = board.claim(this.runId, 'worker-a', LEASE);
    const committerA = Committer.resume(this.kernel, this.runId, claimA.fence);
    const planA = this.kernel.checkpoint.buildPlan(steps());
    for (const step of planA.run.slice(0, 2)) await this.runStep(committerA, claimA.fence, step);
    this.say(
      `worker-a (fence ${claimA.fence}) ran reserve-stock and charge-card: 2 snapshots saved (seq ${committerA.snapshot.seq}), 2 step outcomes committed`,
    );

    // Worker A dies: no release, no further snapshot.
    this.say('worker-a died before ship-parcel started (its claim is never released)');

    // Worker B takes the run over once A's claim expires, and resumes.
    try {
      board.claim(this.runId, 'worker-b', LEASE);
      throw new GakError('storage', 'expected taken, got a claim');
    } catch (e) {
      if (e.code !== 'taken') throw e;
    }
    this.clock.advance(LEASE);
    const claimB = board.claim(this.runId, 'worker-b', LEASE);
    const committerB = Committer.resume(this.kernel, this.runId, claimB.fence);
    const plan = this.kernel.checkpoint.buildPlan(steps(), committerB.snapshot);
    for (const step of plan.run) await this.runStep(committerB, claimB.fence, step);
    // The zombie: A wakes up and tries to write the run again.
    const zombie = { ...committerB.snapshot, fence: claimA.fence };
    zombie.seq += 1n;
    let zombieRefused;
    try {
      this.kernel.checkpoint.saveIfNewer(zombie);
    } catch (e) {
      if (!(e instanceof GakError)) throw e;
      zombieRefused = e.code;
    }
    this.kernel.commitgate.commit(this.runId, undefined, claimB.fence, { status: 'succeeded', result: 'shipped' });
    board.complete(this.runId, claimB.token ?? '');
    const calls = [...this.report.bodyCalls].sort(([a], [b]) => (a < b ? -1 : 1)).map(([k, n]) => `${k}=${n}`);
    this.report.skipped = plan.skip;
    this.report.resumed = plan.run;
    this.say(
      `worker-b took over (fence ${claimB.fence}): plan skipped [${plan.skip.join(', ')}], ran only [${plan.run.join(', ')}]; body calls ${calls.join(' ')} — nothing replayed; zombie worker-a's save refused: ${zombieRefused ?? 'no (BUG)'}`,
    );

    await this.race();
    await this.reconcile();
  }

  /**
   * CLAIMERS workers claim one open task at the same instant. On SQLite
   * each is a worker thread with its own connection, released together by
   * a shared barrier: a real race on the database lock. A memory store
   * lives in this thread, so its claimers run here, one after another
   * (JavaScript runs one call at a time).
   */
  async race() {
    const task = `${this.runId}-race`;
    this.kernel.taskboard.seed([{ id: task }]);
    let results;
    if (this.url.startsWith('sqlite:') || this.url.endsWith('.db') || this.url.endsWith('.sqlite')) {
      results = await raceInThreads(this.url, this.component, this.clock.now(), task);
    } else {
      results = [];
      for (let i = 0; i < CLAIMERS; i++) {
        try {
          results.push({ ok: this.kernel.taskboard.claim(task, `racer-${i}`, LEASE).owner });
        } catch (e) {
          results.push({ err: e.code ?? String(e) });
        }
      }
    }
    const winners = results.filter((r) => r.ok !== undefined);
    const taken = results.filter((r) => r.err === 'taken').length;
    const other = results.filter((r) => r.err !== undefined && r.err !== 'taken');
    if (other.length > 0) throw new GakError('storage', `a racer failed: ${other[0].err}`);
    this.report.raceWinners = winners.length;
    this.say(
      `${CLAIMERS} workers raced to claim one open task: ${winners.length} winner (${winners[0]?.ok ?? 'nobody'}), ${taken} refused as taken`,
    );
  }

  async reconcile() {
    const action = { key: `${this.runId}/refund`, resource: 'payments', retrySafety: 'unsafe' };
    let calls = 0;
    const first = await this.kernel.runEffect(action, LEASE, () => {
      calls += 1;
      throw new Error('connection reset after sending');
    });
    const second = await this.kernel.runEffect(action, LEASE, () => {
      calls += 1;
      return 'refund twice';
    });
    this.report.retryRefused = first.tag === 'uncertain' && first.error !== undefined && second.tag === 'uncertain';
    const gate = this.kernel.sideeffect;
    const claim = gate.beginReconcile(action, LEASE);
    // The reconciler asks the payment provider by idempotency key: it did happen.
    gate.resolveUncertain(action, { applied: true, result: 'refund r-81 settled', claim: claim.claim });
    const third = await this.kernel.runEffect(action, LEASE, () => {
      calls += 1;
      return 'refund again';
    });
    this.report.replayedAfterResolve = third.tag === 'replayed' && text(third.result) === 'refund r-81 settled';
    this.report.bodyCalls.set('refund', calls);
    const after = gate.acquire(action, LEASE);
    this.say(
      `refund body failed -> uncertain; retry refused without calling the body (${this.report.retryRefused ? 'yes' : 'NO'}); a reconciler claimed it (until +${claim.until - this.clock.now()} ms) and resolved it applied; the key now only replays (${after.tag === 'replayed' ? text(after.result) : after.tag}); refund body calls = ${calls}`,
    );
  }
}

const RACER = `
import { workerData, parentPort } from 'node:worker_threads';
const { url, component, now, task, index, gate, indexUrl } = workerData;
const { openKernel, ManualClock } = await import(indexUrl);
const kernel = await openKernel(url, { clock: new ManualClock(BigInt(now)), component, blocking: true });
const flag = new Int32Array(gate);
Atomics.add(flag, 1, 1);
Atomics.notify(flag, 1);
Atomics.wait(flag, 0, 0); // released all at once
let result;
try {
  result = { ok: kernel.taskboard.claim(task, 'racer-' + index, 30000n).owner };
} catch (e) {
  result = { err: e.code ?? String(e) };
}
kernel.close();
parentPort.postMessage(result);
`;

/** CLAIMERS worker threads, each with its own connection, claim `task` at once. */
async function raceInThreads(url, component, now, task) {
  const gate = new SharedArrayBuffer(8);
  const flag = new Int32Array(gate);
  const indexUrl = new URL('./index.js', import.meta.url).href;
  const workers = Array.from(
    { length: CLAIMERS },
    (_, index) =>
      new Worker(RACER, {
        eval: true,
        workerData: { url, component, now: now.toString(), task, index, gate, indexUrl },
      }),
  );
  const results = workers.map(
    (w) =>
      new Promise((resolve, reject) => {
        w.once('message', resolve);
        w.once('error', reject);
      }),
  );
  // Once every racer has opened its kernel, open the gate for all at once.
  for (let ready = Atomics.load(flag, 1); ready < CLAIMERS; ready = Atomics.load(flag, 1)) {
    await Atomics.waitAsync(flag, 1, ready).value;
  }
  Atomics.store(flag, 0, 1);
  Atomics.notify(flag, 0);
  return Promise.all(results);
}

/**
 * Run the demo on `url`, printing to `out` (a line at a time). Returns the
 * report, for tests to check.
 */
export async function demoReport(url, component, { clock, out = console.log } = {}) {
  if (url.includes('clock=db') || url.includes('clock=database')) {
    throw new Error(
      "the demo lets a dead worker's lease expire by moving its own clock; run it without clock=db",
    );
  }
  // The demo moves time by hand (to let a dead worker's lease expire
  // without waiting), starting from the wall clock.
  const manual = clock ?? new ManualClock(new SystemClock().now());
  // A tool: the blocking kernel (PostgreSQL included).
  const kernel = await openKernel(url, { clock: manual, component, blocking: true });
  try {
    out(`gak demo on ${kernel.store.describe()}`);
    const demo = new Demo(kernel, manual, url, component, out);
    await demo.story();
    return demo.report;
  } finally {
    kernel.close();
  }
}

/** `gak.mjs demo`: exit code 0 when every promise held. */
export async function runDemo(url, component) {
  const report = await demoReport(url, component);
  const replayed = [...report.bodyCalls].filter(([step, n]) => step !== 'refund' && n !== 1).length;
  if (replayed > 0 || report.raceWinners !== 1 || !report.retryRefused || !report.replayedAfterResolve) {
    console.error(`gak: the demo observed a broken promise: ${JSON.stringify({ ...report, bodyCalls: [...report.bodyCalls] })}`);
    return 1;
  }
  return 0;
}
