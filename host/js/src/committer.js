// The checkpoint Committer: after each finished step, save a snapshot with
// `done ∪ {step}` and `seq + 1`.
import { GakError } from './errors.js';

/**
 * Records a run's progress, one snapshot per finished step. `stale-seq` or
 * `fence-stale` from `stepDone` means another process owns the run now: the
 * caller MUST stop running it.
 */
export class Committer {
  #kernel;
  #snapshot;

  constructor(kernel, snapshot) {
    this.#kernel = kernel;
    this.#snapshot = snapshot;
  }

  /**
   * Resume `runId` from its persisted snapshot, or start it at seq 0.
   * `fence` is the caller's takeover generation (its task claim's fence).
   */
  static resume(kernel, runId, fence) {
    let snapshot;
    try {
      snapshot = kernel.checkpoint.load(runId);
      snapshot = { ...snapshot, fence: fence ?? snapshot.fence };
    } catch (e) {
      if (!(e instanceof GakError && e.code === 'not-found')) throw e;
      snapshot = { runId, seq: 0n, fence, status: 'running', done: [], fields: [] };
    }
    return new Committer(kernel, snapshot);
  }

  /** The last snapshot this committer saved or loaded (a copy). */
  get snapshot() {
    return structuredClone(this.#snapshot);
  }

  /** Record `step` finished. */
  stepDone(step) {
    const next = structuredClone(this.#snapshot);
    next.seq += 1n;
    if (!next.done.includes(step)) next.done.push(step);
    this.#kernel.checkpoint.saveIfNewer(next);
    this.#snapshot = next;
  }
}
