// Compiled (not run) by test/types.test.mjs: the shipped .d.ts must accept
// what the README shows and reject what it must.
import { openKernel, GakError, NotApplied, Runner, hidePassword, stringify, type Acquired, type Heartbeat, type Task } from '../../src/index.js';

declare const log: (...values: unknown[]) => void;

async function main(): Promise<void> {
  const kernel = await openKernel('memory:');
  kernel.taskboard.seed([{ id: 'a', deps: [] }]);
  const task: Task = kernel.taskboard.claim('a', 'w', 30_000n);
  const fence: bigint = task.fence;
  const next: Task | undefined = kernel.taskboard.claimNext('w', 30_000n);
  const page = kernel.taskboard.list({ state: 'open', limit: 10 });
  const acquired: Acquired = kernel.sideeffect.acquire({ key: 'k', resource: 'r' }, 100n);
  if (acquired.tag === 'granted') {
    const lease = acquired.lease;
    kernel.sideeffect.writeFenced('sink', lease.fence, (down) => down.put('x', down.get('x') ?? ''));
    kernel.sideeffect.complete({ key: 'k', resource: 'r' }, lease, 'done');
  }
  const ran = await kernel.runEffect({ key: 'k2', resource: 'r' }, 100n, async () => {
    throw new NotApplied('refused before sending');
  });
  if (ran.tag === 'not-applied') log(ran.error.message);
  const runner = new Runner(kernel, 30_000n, { every: 5_000 });
  const long = await runner.run({ key: 'k3', resource: 'r' }, async (lease, heartbeat: Heartbeat) => {
    while (heartbeat.renewals < 2) {
      heartbeat.check();
      await heartbeat.changed();
    }
    // @ts-expect-error the heartbeat's counts are the runner's
    heartbeat.renewals = 0;
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
    kernel.taskboard.claim('a', 'w2', 30_000n);
  } catch (e) {
    if (e instanceof GakError && e.code === 'taken') log(stringify({ fence, next, page }));
  }
  // @ts-expect-error u64 values are bigint, not number
  kernel.taskboard.claim('a', 'w', 30_000);
  // @ts-expect-error not an error code
  const code: import('../../src/index.js').ErrorCode = 'nope';
  void code;
  kernel.close();
}

void main();
