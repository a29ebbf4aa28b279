// pg-boss: jobs in `<schema>.job` (partitioned by queue), claimed with
// SKIP LOCKED into state `active`, set to `completed` on completion.
import { Drain } from './drain.mjs';

const { PgBoss } = await import('pg-boss');
const QUEUE = 'peers';

/** The peer's settings for one mode at `workers` concurrency. */
function settings(mode, workers, batch, pool) {
  // The pool: pg-boss's default is 10; every worker may hold one connection
  // (unless --pool).
  const boss = { max: pool ?? Math.max(10, workers + 2) };
  switch (mode) {
    case 'work-burst':
      // `work()` with W workers, each fetching `batch` jobs per query, the handler
      // taking the batch, pg-boss completing it in one query; while fetches
      // come back full the worker re-fetches at once instead of sleeping the
      // polling interval.
      return { boss, work: { batchSize: batch, burstWhenBatchFull: true, localConcurrency: workers } };
    case 'fetch-complete':
      // Unbatched, the way to get one job at a time without `work()`'s sleep:
      // W loops of `fetch(queue)` (batchSize 1) then `complete(queue, id)`.
      return { boss, fetch: { batchSize: 1 } };
    case 'work-poll':
      // `work()` unbatched: batchSize 1 at the shortest polling interval
      // allowed. Each worker sleeps the interval after every fetch
      // (burstWhenBatchFull is ignored at batchSize 1), so this drains at about
      // W / 0.5 jobs/s whatever the database can do.
      return { boss, work: { batchSize: 1, pollingIntervalSeconds: 0.5, localConcurrency: workers } };
    default:
      throw new Error(`pg-boss has no mode ${mode}`);
  }
}

async function drain({ dsn, schema, jobs, workers, batch, admin, mode, pool }) {
  const chosen = settings(mode, workers, batch, pool);
  const boss = new PgBoss({ connectionString: dsn, schema, ...chosen.boss });
  const progress = new Drain(jobs);
  boss.on('error', (error) => progress.fail(error));
  await boss.start();
  try {
    await boss.createQueue(QUEUE);
    for (let at = 0; at < jobs; at += 5000) {
      const n = Math.min(5000, jobs - at);
      await boss.insert(QUEUE, Array.from({ length: n }, () => ({})));
    }
    if (chosen.work) {
      await boss.work(QUEUE, chosen.work, async (batch) => {
        for (const job of batch) progress.ran(job.id);
      });
    } else {
      for (let w = 0; w < workers; w++) {
        (async () => {
          for (;;) {
            const [job] = await boss.fetch(QUEUE, chosen.fetch);
            if (!job) return;
            progress.ran(job.id);
            await boss.complete(QUEUE, job.id);
          }
        })().catch((error) => progress.fail(error));
      }
    }
    const table = `${admin.escapeIdentifier(schema)}.job`;
    const left = `select count(*)::int as n from ${table} where name = $1 and state <> 'completed'`;
    return {
      ...(await progress.measure(async () => (await admin.query(left, [QUEUE])).rows[0].n)),
      settings: chosen,
    };
  } finally {
    await boss.stop({ graceful: true, wait: true, timeout: 10_000 });
  }
}

export const workloads = [
  { peer: 'pg-boss', mode: 'work-burst', batched: true, drain },
  { peer: 'pg-boss', mode: 'fetch-complete', batched: false, drain },
  {
    peer: 'pg-boss',
    mode: 'work-poll',
    batched: false,
    drain,
    // Not in the default run: bound by the polling sleep, not the database.
    optIn: 'bound by the 0.5 s polling sleep after every fetch, not by the database',
  },
];
