// Compiled by test/types.test.mjs under `tsc --strict`, then run (its types
// stripped) against the real kernel on memory: the shipped .d.ts accepts
// what the README shows and every call as the API takes it (optional fields
// left out), rejects what it must — and kernel.js refuses the same at run
// time — and the answers have the types it declares.
import {
  CONTRACT,
  ERROR_CODES,
  GakError,
  NotApplied,
  Runner,
  TASK_STATE_CASES,
  Worker,
  backoffDelay,
  failReason,
  hidePassword,
  openKernel,
  stringify,
  type Acquired,
  type CompletionResult,
  type ErrorCode,
  type GroupInfo,
  type Heartbeat,
  type KeyPage,
  type Outcome,
  type Plan,
  type Pruned,
  type Resolved,
  type Snapshot,
  type Task,
  type TaskState,
  type Worked,
  type PostgresKernel,
} from '../../src/index.js';

const log = (...values: unknown[]): void => void values;

function check(holds: boolean, what: string): void {
  if (!holds) throw new Error(`usage.ts: ${what}`);
}

/** `fn` throws a GakError with `code`. */
function refused(fn: () => unknown, code: ErrorCode): void {
  try {
    fn();
  } catch (e) {
    check(e instanceof GakError && e.code === code, `expected ${code}, got ${String(e)}`);
    return;
  }
  throw new Error(`usage.ts: expected ${code}, got no error`);
}

export async function main(): Promise<void> {
  const kernel = await openKernel('memory:');
  check(CONTRACT.startsWith('gak:kernel@') && ERROR_CODES.includes('taken'), 'the contract names');
  const states: readonly TaskState[] = TASK_STATE_CASES;
  check(states.includes('open'), 'the task states');

  // taskboard
  kernel.taskboard.seed([{ id: 'a', deps: [] }, { id: 'b' }, { id: 'c', title: 'C', state: 'done' }]);
  const task: Task = kernel.taskboard.claim('a', 'w', 30_000n);
  const fence: bigint = task.fence;
  check(typeof fence === 'bigint' && typeof task.until === 'bigint' && typeof task.token === 'string', 'a task');
  const next: Task | undefined = kernel.taskboard.claimNext('w', 30_000n);
  check(next?.id === 'b' && kernel.taskboard.claimNext('w', 30_000n) === undefined, 'claim-next');
  const page = kernel.taskboard.list({ state: 'open', limit: 10 });
  check(page.items.length === 0 && page.next === undefined, 'a page');
  check(kernel.taskboard.list({ limit: 1 }).next === 'a', 'a page cursor');
  check(kernel.taskboard.get('a').token === undefined, 'get never shows a token');
  const renewed: Task = kernel.taskboard.renew('a', task.token ?? '', 30_000n);
  kernel.taskboard.release('a', renewed.token ?? '');
  const again = kernel.taskboard.claim('a', 'w', 30_000n);
  kernel.taskboard.complete('a', again.token ?? '');

  // the job queue
  kernel.taskboard.seed([{ id: 'j1', priority: 5, maxAttempts: 2, group: 'g' }, { id: 'j2', notBefore: 0n }]);
  kernel.taskboard.setGroupLimit('g', 1);
  const jobs: Task[] = kernel.taskboard.claimBatch('w', 30_000n, 10);
  check(jobs.length === 2 && jobs[0].id === 'j1' && jobs[0].priority === 5 && jobs[0].attempts === 1, 'claim-batch');
  const group: GroupInfo = kernel.taskboard.getGroup('g');
  check(group.limit === 1 && group.live === 1, 'a group');
  const failed: Task = kernel.taskboard.fail('j1', jobs[0].token ?? '', 'boom', 0n);
  check(failed.state === 'failed' && failed.lastError === 'boom' && typeof failed.notBefore === 'bigint', 'fail');
  const answers: CompletionResult[] = kernel.taskboard.completeBatch([
    { id: 'j2', token: jobs[1].token ?? '' },
    { id: 'j1', token: jobs[0].token ?? '' },
  ]);
  check(answers[0].answer === 'completed' && answers[1].answer === 'lease-lost', 'complete-batch');
  const retried = kernel.taskboard.claim('j1', 'w', 30_000n);
  const dead: Task = kernel.taskboard.fail('j1', retried.token ?? '', 'boom again');
  check(dead.state === 'dead' && dead.attempts === 2, 'dead');
  const revived: Task = kernel.taskboard.revive('j1');
  check(revived.state === 'open' && revived.attempts === 0 && revived.lastError === undefined, 'revive');
  refused(() => kernel.taskboard.revive('j1'), 'not-dead');
  kernel.taskboard.setGroupLimit('g');
  refused(() => kernel.taskboard.getGroup('g'), 'not-found');

  // the queue worker
  kernel.taskboard.seed([{ id: 'w1' }, { id: 'w2' }]);
  check(backoffDelay({ base: 1000, max: 1500, jitter: 0 }, 2, 0.5) === 1500 && failReason('a\0b') === 'a\uFFFDb', 'the back-off and reasons');
  const worker = new Worker(kernel, { agent: 'queue', batch: 5, ttl: 30_000, backoff: { jitter: 0 } });
  check(worker.options.backoff.base === 1000 && worker.options.concurrency === 5, 'the options in force');
  const worked: Worked = await worker.runUntilIdle(async (t: Task) => {
    if (t.id === 'w2') throw new Error('nope');
  });
  check(worked.claimed === worked.completed + worked.failed && worked.failed === 1, 'worked');
  check(kernel.taskboard.get('w2').lastError === 'nope', 'a failed handler');
  worker.stop();
  check(worker.stopped && (await worker.run(() => undefined)).claimed === 0, 'a stopped worker');

  // sideeffect
  const acquired: Acquired = kernel.sideeffect.acquire({ key: 'k', resource: 'r' }, 100n);
  if (acquired.tag === 'granted') {
    const lease = acquired.lease;
    kernel.sideeffect.writeFenced('sink', lease.fence, (down) => down.put('x', down.get('x') ?? ''));
    const result: Uint8Array = kernel.sideeffect.complete({ key: 'k', resource: 'r' }, lease, 'done');
    check(result instanceof Uint8Array && result.length === 4, 'complete answers bytes');
  } else {
    throw new Error(`usage.ts: acquire answered ${acquired.tag}`);
  }
  const replayed = kernel.sideeffect.acquire({ key: 'k', resource: 'r', retrySafety: 'safe' }, 100n);
  check(replayed.tag === 'replayed' && replayed.result instanceof Uint8Array, 'a replay names its result');
  const seen: bigint = kernel.sideeffect.sinkSeen('sink');
  check(seen === 1n, 'sink-seen');
  const action = { key: 'u', resource: 'r2', retrySafety: 'unsafe', fingerprint: 'f1' } as const;
  const held = kernel.sideeffect.acquire(action, 100n);
  if (held.tag !== 'granted') throw new Error('usage.ts: no grant');
  const renewedLease = kernel.sideeffect.renew(action, held.lease, 100n);
  kernel.sideeffect.markUncertain(action, renewedLease, 'crashed');
  kernel.sideeffect.release(action, renewedLease);
  const claim = kernel.sideeffect.beginReconcile(action, 1_000n);
  check(typeof claim.until === 'bigint', 'a reconcile claim');
  const resolved: Resolved = kernel.sideeffect.resolveUncertain(action, { applied: true, result: 'sent', claim: claim.claim });
  check(resolved.tag === 'replayed', 'resolved');
  const keys: KeyPage = kernel.sideeffect.list({ state: 'completed', limit: 10 });
  check(keys.items.length === 2 && typeof keys.items[0].completedAt === 'bigint', 'a key page');
  check(kernel.sideeffect.get('u').retrySafety === 'unsafe', 'a key');
  const other = kernel.sideeffect.acquire({ key: 'v', resource: 'r3' }, 100n);
  if (other.tag === 'granted') kernel.sideeffect.abandon({ key: 'v', resource: 'r3' }, other.lease, 'refused');

  // checkpoint and commitgate
  kernel.checkpoint.saveIfNewer({ runId: 'run', seq: 1n, status: 'running', fields: { b: '2', a: '1' } });
  const snap: Snapshot = kernel.checkpoint.load('run');
  check(snap.fields[0][0] === 'a' && snap.done.length === 0 && snap.fence === undefined, 'a snapshot');
  const plan: Plan = kernel.checkpoint.buildPlan([{ id: 's1' }, { id: 's2', dependsOn: ['s1'] }], { ...snap, done: ['s1'] });
  check(plan.skip[0] === 's1' && plan.run[0] === 's2', 'a plan');
  const outcome: Outcome = kernel.commitgate.commit('run', 's1', 0n, { status: 'succeeded' });
  check(outcome.result.length === 0 && kernel.commitgate.read('run', 's1').status === 'succeeded', 'an outcome');

  // retention
  const pruned: Pruned = kernel.retention.pruneDryRun(1n << 52n, 10);
  check(typeof pruned.removedKeys === 'number' && kernel.retention.prune(1n, 10).more === false, 'pruned');

  // the runner
  const ran = await kernel.runEffect({ key: 'k2', resource: 'r' }, 100n, async () => {
    throw new NotApplied('refused before sending');
  });
  if (ran.tag === 'not-applied') log(ran.error.message);
  const runner = new Runner(kernel, 30_000n, { every: 5 });
  const long = await runner.run({ key: 'k3', resource: 'r' }, async (lease, heartbeat: Heartbeat) => {
    while (heartbeat.renewals < 2) {
      heartbeat.check();
      await heartbeat.changed();
    }
    try {
      // @ts-expect-error the heartbeat's counts are the runner's
      heartbeat.renewals = 0;
    } catch {
      // a getter without a setter
    }
    return `${lease.key} at fence ${heartbeat.lease.fence}`;
  });
  if (long.tag === 'applied' || long.tag === 'replayed') log(long.result.byteLength);
  kernel.sideeffect.writeFenced('ledger', 1n, (down) => {
    const db = down.sqlite;
    if (db === undefined) return;
    db.exec('CREATE TABLE IF NOT EXISTS rows (id TEXT)');
    const n: unknown = db.prepare('SELECT count(*) FROM rows').pluck().get();
    log(n, db.inTransaction);
  });
  log(hidePassword('postgres://alice:secret@db/x'));
  try {
    kernel.taskboard.seed([{ id: 'd' }]);
    kernel.taskboard.claim('d', 'w1', 30_000n);
    kernel.taskboard.claim('d', 'w2', 30_000n);
  } catch (e) {
    if (e instanceof GakError && e.code === 'taken') log(stringify({ fence, next, page }));
  }

  // What the types reject, the kernel refuses before the call.
  // @ts-expect-error u64 values are bigint, not number
  refused(() => kernel.taskboard.claim('a', 'w', 30_000), 'invalid-input');
  // @ts-expect-error a u32 is a number, not a bigint
  refused(() => kernel.retention.prune(1n, 10n), 'invalid-input');
  // @ts-expect-error not a retry safety
  refused(() => kernel.sideeffect.acquire({ key: 'k', resource: 'r', retrySafety: 'maybe' }, 100n), 'invalid-input');
  // @ts-expect-error not a status
  refused(() => kernel.commitgate.commit('run', undefined, 0n, { status: 'done' }), 'invalid-input');
  // @ts-expect-error a page needs its limit
  refused(() => kernel.taskboard.list({ state: 'open' }), 'invalid-input');
  // @ts-expect-error a lease's fence is a bigint
  refused(() => kernel.sideeffect.release({ key: 'k', resource: 'r' }, { key: 'k', resource: 'r', fence: 1, holder: 'h', until: 1n }), 'invalid-input');
  // @ts-expect-error the snapshot's run id is required
  refused(() => kernel.checkpoint.saveIfNewer({ seq: 2n, status: 'running' }), 'invalid-input');
  // @ts-expect-error a u32 limit is a number
  refused(() => kernel.taskboard.claimBatch('w', 1n, 10n), 'invalid-input');
  // @ts-expect-error a retry-after is a bigint
  refused(() => kernel.taskboard.fail('j1', 't', 'why', 5), 'invalid-input');
  // @ts-expect-error a worker needs its agent
  refused(() => new Worker(kernel, { batch: 5 }), 'invalid-input');
  // @ts-expect-error not a backoff field's type
  refused(() => new Worker(kernel, { agent: 'w', backoff: { jitter: '0.1' } }), 'invalid-input');
  // @ts-expect-error not an error code
  const code: ErrorCode = 'nope';
  void code;
  kernel.close();
}

// PostgreSQL (type-checked only, never called here: test/postgres.test.mjs
// runs the same shapes against a server): `openKernel('postgres://…')` is
// the kernel of promises, `{ blocking: true }` the synchronous one.
export async function postgresShapes(url: `postgres://${string}`): Promise<void> {
  const kernel: PostgresKernel = await openKernel(url, { maxConnections: 4, connectionWait: 1000 });
  const task: Task = await kernel.taskboard.claim('t', 'w', 1_000n);
  const grants: Task[] = await kernel.taskboard.claimBatch('w', 1_000n, 10);
  const verdicts: CompletionResult[] = await kernel.taskboard.completeBatch(grants.map((g) => ({ id: g.id, token: g.token ?? '' })));
  await kernel.sideeffect.writeFenced('r', task.fence, async (down) => {
    const { rows } = await down.query('SELECT $1::int AS n', [1]);
    await down.put('k', String(rows.length));
  });
  const n: number = await kernel.withDownstream(async (down) => (await down.query('SELECT 1')).rows.length);
  const blocking = await openKernel(url, { blocking: true });
  const same: Task = blocking.taskboard.claim('t', 'w', 1_000n);
  // @ts-expect-error the kernel of promises answers with promises
  const notYet: Task = kernel.taskboard.get('t');
  void [verdicts, n, same, notYet];
  blocking.close();
  await kernel.close();
}
