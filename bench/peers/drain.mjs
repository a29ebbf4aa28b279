// What every workload measures, the same way for every peer.
//
// Clock: `performance.now()` (Node's monotonic clock). The window opens when
// the first job reaches a handler (its claim has committed: that is the first
// claim the process can observe) and closes when a query on a separate
// connection, polled once every handler has run, returns "no job left
// uncompleted" — a peer that acknowledges completions after the handler
// returns (graphile-worker does not await them) is only done when the
// database says so. The close is the poll's return, so the figure errs by at
// most one poll (~1 ms sleep + one round trip) on the slow side.
//
// CPU: `process.cpuUsage()` (user + system) of this Node process over the
// same window; PostgreSQL's own CPU is not counted.
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';

/** A drain of `jobs` jobs, fed by the peer's handler through `ran(id)`. */
export class Drain {
  constructor(jobs, { stallSeconds = 30 } = {}) {
    this.jobs = jobs;
    this.stallSeconds = stallSeconds;
    this.seen = new Set();
    this.calls = 0;
    this.openedAt = null;
    this.cpuAtOpen = null;
    this.lastProgress = performance.now();
    this.failure = null;
    this.allRan = new Promise((resolve, reject) => {
      this.resolveAllRan = resolve;
      this.rejectAllRan = reject;
    });
  }

  /** Called by the handler for each job it is handed. */
  ran(id) {
    if (this.openedAt === null) {
      this.openedAt = performance.now();
      this.cpuAtOpen = process.cpuUsage();
    }
    this.lastProgress = performance.now();
    this.calls += 1;
    // A job handed out twice is a fault of the peer (or of this harness),
    // never a faster drain: it fails the workload.
    if (this.seen.has(String(id))) this.fail(new Error(`job ${id} was handed to a handler twice`));
    this.seen.add(String(id));
    if (this.seen.size === this.jobs) this.resolveAllRan();
  }

  /** The peer reported an error it cannot recover from. */
  fail(error) {
    this.failure ??= error;
    this.rejectAllRan(error);
  }

  /**
   * Wait for every job to run and `remaining()` (a count query) to reach 0;
   * fails when nothing progresses for `stallSeconds`.
   */
  async measure(remaining) {
    const watchdog = setInterval(() => {
      const idle = (performance.now() - this.lastProgress) / 1000;
      if (idle > this.stallSeconds) {
        this.fail(new Error(`stalled: ${this.seen.size} of ${this.jobs} jobs ran, none in the last ${this.stallSeconds} s`));
      }
    }, 1000);
    try {
      await this.allRan;
      let closedAt;
      for (;;) {
        const left = await remaining();
        closedAt = performance.now();
        if (left === 0) break;
        if ((closedAt - this.lastProgress) / 1000 > this.stallSeconds) {
          throw new Error(`every job ran but ${left} are still not completed after ${this.stallSeconds} s`);
        }
        await sleep(1);
      }
      if (this.failure) throw this.failure;
      const cpu = process.cpuUsage(this.cpuAtOpen);
      const seconds = (closedAt - this.openedAt) / 1000;
      return {
        seconds,
        jobs_per_s: this.jobs / seconds,
        node_cpu_seconds: (cpu.user + cpu.system) / 1e6,
      };
    } finally {
      clearInterval(watchdog);
    }
  }
}
