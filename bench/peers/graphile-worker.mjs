// graphile-worker: jobs in `<schema>._private_jobs`, claimed by `get_job`-style
// queries with SKIP LOCKED, deleted on completion.
import { Drain } from './drain.mjs';

// Read when graphile-worker loads: without it every job logs a "Completed
// task" line (formatted even when the logger drops it).
process.env.NO_LOG_SUCCESS ??= '1';
const { run, makeWorkerUtils, Logger } = await import('graphile-worker');

const quiet = new Logger(() => (level, message) => {
  if (level === 'error' || level === 'warning') process.stderr.write(`graphile-worker ${level}: ${message}\n`);
});

/** The peer's settings for one mode at `workers` concurrency. */
function settings(mode, workers, batch, pool) {
  const common = {
    concurrency: workers,
    // Their advice: at least 10, or concurrentJobs + 2 (unless --pool).
    maxPoolSize: pool ?? Math.max(10, workers + 2),
  };
  if (mode === 'unbatched') {
    // The defaults: one get-job query per job, one complete query per job.
    return { ...common, localQueue: { size: -1 }, completeJobBatchDelay: -1, failJobBatchDelay: -1 };
  }
  // Batched, as their performance docs configure it (they use size 500): a
  // local queue fetches and locks `size` jobs per query and hands them to the
  // workers; completions made before a 0 ms timer fires go to one query.
  return { ...common, localQueue: { size: batch }, completeJobBatchDelay: 0, failJobBatchDelay: 0 };
}

async function drain({ dsn, schema, jobs, workers, batch, admin, mode, pool }) {
  const chosen = settings(mode, workers, batch, pool);
  const utils = await makeWorkerUtils({ connectionString: dsn, schema, logger: quiet });
  try {
    await utils.migrate();
    for (let at = 0; at < jobs; at += 5000) {
      const n = Math.min(5000, jobs - at);
      await utils.addJobs(Array.from({ length: n }, () => ({ identifier: 'noop', payload: {} })));
    }
  } finally {
    await utils.release();
  }
  const progress = new Drain(jobs);
  const { concurrency, maxPoolSize, ...worker } = chosen;
  const runner = await run({
    connectionString: dsn,
    schema,
    concurrency,
    maxPoolSize,
    logger: quiet,
    noHandleSignals: true,
    taskList: { noop: async (_payload, helpers) => progress.ran(helpers.job.id) },
    preset: { worker },
  });
  runner.events.on('pool:fatalError', ({ error }) => progress.fail(error));
  runner.events.on('job:failed', ({ job, error }) => progress.fail(new Error(`job ${job.id} failed: ${error}`)));
  try {
    const table = `${admin.escapeIdentifier(schema)}._private_jobs`;
    return {
      ...(await progress.measure(async () => (await admin.query(`select count(*)::int as n from ${table}`)).rows[0].n)),
      settings: chosen,
    };
  } finally {
    await runner.stop();
  }
}

export const workloads = [
  { peer: 'graphile-worker', mode: 'unbatched', batched: false, drain },
  { peer: 'graphile-worker', mode: 'batched', batched: true, drain },
];
