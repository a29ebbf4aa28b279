// Types of the `gak` package. The contract's records, enums, variants and
// the exported interfaces' methods are generated from the WIT
// (contract.d.ts, re-exported here); this file holds the API around them,
// written by hand. Every u64 of the WIT is a `bigint`, in and out; byte
// payloads are `Uint8Array` out, and `Uint8Array | string` (UTF-8) in.
import type {
  Action,
  Bytes,
  Checkpoint,
  Commitgate,
  ErrorCode,
  Lease,
  Pruned,
  Retention,
  Sideeffect,
  Snapshot,
  Task,
  Taskboard,
} from './contract.js';

export * from './contract.js';

/** Every refusal of the contract and every store failure. Branch on `code`. */
export declare class GakError extends Error {
  constructor(code: ErrorCode, detail?: string, options?: { cause?: unknown });
  readonly name: 'GakError';
  readonly code: ErrorCode;
  /** The payload of `invalid-plan`, `invalid-input`, `storage`: for humans. */
  readonly detail: string | undefined;
  toJSON(): { code: ErrorCode; detail?: string };
}

/** Thrown by an effect body that definitely did not apply its effect. */
export declare class NotApplied extends Error {
  constructor(message?: string, options?: { cause?: unknown });
}

/**
 * Integer milliseconds since the Unix epoch, below 2^53; MUST NOT move
 * backwards. Read when the component asks (with a call's first read, after
 * its rows); one that throws or answers anything else fails the call with
 * `storage`.
 */
export interface Clock {
  now(): bigint | number;
}

export declare class SystemClock implements Clock {
  now(): bigint;
}

export declare class ManualClock implements Clock {
  constructor(at?: bigint | number);
  now(): bigint;
  /** Set the time; throws RangeError when asked to move backwards. */
  set(to: bigint | number): void;
  advance(ms: bigint | number): void;
}

/**
 * A fenced sink body's view of the sink's open transaction; it stops working
 * when the body returns. A store error met here ends the call with `storage`
 * (a conflict: the call re-runs) even if the body catches it.
 */
export interface Downstream {
  /** A key of the binding's `downstream` table (a key holding U+0000 is refused with `invalid-input`, as in `put`). */
  get(key: string): string | undefined;
  /**
   * Write a key. A key or value holding U+0000 is refused with
   * `invalid-input` before anything is written (PostgreSQL cannot store it;
   * every host refuses it); the call goes on.
   */
  put(key: string, value: string): void;
  /**
   * SQLite only: the better-sqlite3 connection inside the same transaction,
   * guarded. Write your own tables here (parameters only). Transaction
   * control (BEGIN, START, COMMIT, END, ROLLBACK, ABORT, SAVEPOINT, RELEASE,
   * PREPARE TRANSACTION) is refused with `invalid-input` and the call goes
   * on, as are better-sqlite3's own refusals (two statements in `prepare`, a
   * bad parameter); an error SQLite raised (a syntax error, a constraint, a
   * missing table) ends the call with `storage`, even if the body catches
   * it. Iterators left unfinished are closed when the body returns.
   */
  readonly sqlite: SqliteConnection | undefined;
}

/** The part of a better-sqlite3 `Database` a sink body gets (no transaction control). */
export interface SqliteConnection {
  /** True while the body runs. */
  readonly inTransaction: boolean;
  /** One statement; transaction control is refused. */
  prepare(sql: string): SqliteStatement;
  /** Every statement of `sql`; refused whole if any is transaction control. */
  exec(sql: string): this;
}

/** A better-sqlite3 `Statement` on the lent connection. */
export interface SqliteStatement {
  readonly source: string;
  readonly reader: boolean;
  readonly readonly: boolean;
  run(...params: unknown[]): { changes: number; lastInsertRowid: number | bigint };
  get(...params: unknown[]): unknown;
  all(...params: unknown[]): unknown[];
  iterate(...params: unknown[]): IterableIterator<unknown>;
  columns(): Array<{ name: string; column: string | null; table: string | null; database: string | null; type: string | null }>;
  pluck(on?: boolean): this;
  expand(on?: boolean): this;
  raw(on?: boolean): this;
  safeIntegers(on?: boolean): this;
  bind(...params: unknown[]): this;
}

// the calls the API adds to the exported interfaces (contract.d.ts)

/** What `kernel.sideeffect` adds to the WIT's calls: fenced downstream writes. */
export interface SideeffectHost {
  /**
   * A fenced downstream write: `body` runs in the fence compare's
   * transaction (`sink-advance`), after it passed; it must be synchronous
   * and may run more than once on a store conflict. Throws `fence-stale`
   * (body not run) or `write-failed` (body threw; `cause` is its error).
   */
  writeFenced(resource: string, presented: bigint, body: (down: Downstream) => void): void;
}

/** What `kernel.retention` adds to the WIT's calls. */
export interface RetentionHost {
  /** What `prune` would remove now, without removing it. */
  pruneDryRun(before: bigint, limit: number): Pruned;
}

export type Ran =
  | { tag: 'applied'; result: Uint8Array }
  | { tag: 'replayed'; result: Uint8Array }
  /** With `error`: the body threw it; the key was marked uncertain and its hold released. */
  | { tag: 'uncertain'; reason: string; error?: unknown }
  | { tag: 'not-applied'; error: NotApplied }
  | { tag: 'in-flight' }
  | { tag: 'contended'; until: bigint };

/**
 * The body's view of its lease while the runner renews it: the latest
 * lease, the renewals so far, and whether a renewal was refused.
 */
export declare class Heartbeat {
  /** The lease as last renewed (the one the verdict presents). */
  readonly lease: Lease;
  /** Renewals that succeeded so far. */
  readonly renewals: number;
  /** The refusal that lost the lease, once it is lost. */
  readonly refusal: GakError | undefined;
  /** Throws `GakError('lease-lost')` once a renewal was refused. */
  check(): void;
  /** Resolves at the next renewal or loss (at once when lost already, or when renewals stop). */
  changed(): Promise<void>;
}

/** An effect body: its result is recorded by `complete`. May be async (then its hold is renewed). */
export type EffectBody = (lease: Lease, heartbeat: Heartbeat) => Bytes | Promise<Bytes>;

/**
 * acquire → body (its hold renewed every `ttl / 3` while an async body
 * awaits; a synchronous body cannot be renewed) → complete.
 */
export declare class Runner {
  /** `every`: the renewal interval in ms (default ttl / 3), or `null` for none. */
  constructor(kernel: Kernel | PostgresKernel, ttl: bigint, options?: { every?: number | null });
  run(action: Action, body: EffectBody): Promise<Ran>;
}

/**
 * Exponential back-off of failed handlers: the `n`-th failed attempt is due
 * again after `min(max, base * 2^(n-1)) * (1 - jitter * u)` ms, `u` uniform
 * in [0, 1) from the CSPRNG: jitter only shortens, the cap holds.
 */
export interface Backoff {
  /** The first retry's delay, in ms (default 1000). */
  base: number;
  /** The longest delay, in ms (default 3 600 000; never above one year). */
  max: number;
  /** The share (0 to 1) a delay may be shortened by at random (default 0.2). */
  jitter: number;
}

/** `{base: 1000, max: 3_600_000, jitter: 0.2}`. */
export declare const DEFAULT_BACKOFF: Readonly<Backoff>;

/** The delay (whole ms) after a task's `attempts`-th attempt failed, with `u` in [0, 1). */
export declare function backoffDelay(backoff: Backoff, attempts: number, u: number): number;

/**
 * A handler's error message as `last-error`: U+0000 and lone surrogates as
 * U+FFFD, cut to at most 4096 UTF-8 bytes at a character boundary.
 */
export declare function failReason(message: string): string;

export interface WorkerOptions {
  /** The agent the worker claims as. */
  agent: string;
  /** Tasks per claim, 1-1000 (default 10). */
  batch?: number;
  /** The claims' ttl in ms (default 30 000), renewed every third of it while a handler runs. */
  ttl?: number | bigint;
  /** Handlers at once (default the batch). */
  concurrency?: number;
  /** Ms to wait before polling an empty board again (default 1000); a stop cuts it short. */
  idle?: number | bigint;
  /** Fields left out keep their default (`DEFAULT_BACKOFF`). */
  backoff?: Partial<Backoff>;
  /** What `run` does with a store failure it goes on after (default `console.warn`). */
  onError?: (error: GakError) => void;
}

/** What a worker did. */
export interface Worked {
  /** Tasks granted to it. */
  claimed: number;
  /** Handlers that succeeded and whose completion the kernel accepted. */
  completed: number;
  /** Handlers that failed and whose `fail` the kernel accepted (due again after the back-off, or dead). */
  failed: number;
  /** Claims given back unstarted at a stop. */
  released: number;
  /** Results the kernel refused: the claim was lost (taken over, re-seeded) while the handler ran. */
  lost: number;
}

/**
 * A queue handler: called with the claimed task (its token inside);
 * succeeds by returning or resolving, fails by throwing or rejecting (an
 * Error's message is the task's `last-error`; a thrown value that is not
 * an Error is `panicked: <String(value)>`).
 */
export type Handler = (task: Task) => unknown;

/**
 * The queue worker (HOSTS.md "The queue worker"): claim a batch, run each
 * handler in claim order (at most `concurrency` at once) with its claim
 * renewed by a timer every ttl / 3, complete the successes in one
 * `completeBatch`, `fail` the failures with back-off; a `stop()` releases
 * the batch's unstarted tasks and lets the running ones finish.
 */
export declare class Worker {
  constructor(kernel: Kernel | PostgresKernel, options: WorkerOptions);
  /** The options in force. */
  readonly options: Readonly<{ agent: string; batch: number; ttl: number; concurrency: number; idle: number; backoff: Readonly<Backoff> }>;
  /** Was it asked to stop? */
  readonly stopped: boolean;
  /** No new claim; unstarted handlers released, running ones finished and reported; then `run` resolves. */
  stop(): void;
  /** Work until stopped; store failures go to `onError` and the loop goes on. */
  run(handler: Handler): Promise<Worked>;
  /** Work until a claim finds no free task (or a stop); rejects on the first error. */
  runUntilIdle(handler: Handler): Promise<Worked>;
}

/** A store binding (see `openStore`). */
export interface Backend {
  describe(): string;
}

export declare class MemoryBackend implements Backend {
  describe(): string;
  /** Every entry as [table, key, value]. */
  dump(): Array<[string, string, string]>;
}

export declare class SqliteBackend implements Backend {
  constructor(spec: string, options?: { busyTimeout?: number });
  readonly path: string;
  describe(): string;
}

export declare class StoreConflict extends Error {}
export declare class StoreFailure extends Error {}
export declare const TABLES: readonly string[];
/** Errors name the URL with its password hidden (`hidePassword`). */
export declare function openStore(url: string, options?: { busyTimeout?: number }): Backend;
/** `url` with its user information (from `://` to the last `@`, user included) and any `password=` option value replaced by `***`. */
export declare function hidePassword(url: string): string;

export interface OpenOptions {
  /** Default `SystemClock`. */
  clock?: Clock;
  /**
   * gak.wasm; default `$GAK_COMPONENT`, else the repository's build output.
   * A component of another contract version than this host's (`CONTRACT`)
   * is refused (`storage`, naming both versions).
   */
  component?: string;
  /** SQLite: how long one BEGIN IMMEDIATE waits for another writer (ms, default 5000). */
  busyTimeout?: number;
}

export declare class Kernel {
  readonly checkpoint: Checkpoint;
  readonly commitgate: Commitgate;
  readonly sideeffect: Sideeffect;
  readonly taskboard: Taskboard;
  readonly retention: Retention;
  readonly store: Backend;
  readonly clock: Clock;
  readonly componentPath: string;
  /** Read (or seed) the `downstream` table in a transaction of its own. */
  withDownstream<T>(fn: (down: Downstream) => T): T;
  /** `new Runner(kernel, ttl).run(action, body)`; see `Runner` and `Ran`. */
  runEffect(action: Action, ttl: bigint, body: EffectBody): Promise<Ran>;
  close(): void;
}

/** A PostgreSQL store URL: `postgres://USER@HOST:PORT/DB?schema=NAME[&clock=db][&sslmode=…]`. */
export type PostgresUrl = `postgres://${string}` | `postgresql://${string}`;

export interface PostgresOptions extends Omit<OpenOptions, 'clock' | 'busyTimeout'> {
  /** Kernel workers (a thread, an instance and a connection each) at most; default 16. */
  maxConnections?: number;
  /** How long a call waits for a free worker, and for a lock another transaction holds (ms, default 5000). */
  connectionWait?: number;
}

/** Every call of `T` answered by a promise. */
export type Promised<T> = {
  readonly [K in keyof T]: T[K] extends (...args: infer A) => infer R ? (...args: A) => Promise<R> : never;
};

/**
 * What a body of the kernel of promises gets: `Downstream`'s calls, each a
 * promise answered in the call's transaction on its kernel worker.
 */
export interface AsyncDownstream {
  get(key: string): Promise<string | undefined>;
  put(key: string, value: string): Promise<void>;
  /** One statement in the kernel's transaction (PostgreSQL: parameters only; transaction control refused). */
  query(sql: string, params?: unknown[]): Promise<{ rows: Record<string, unknown>[]; rowCount: number | null; command: string }>;
  readonly postgres: { query: AsyncDownstream['query'] };
}

/**
 * The kernel on PostgreSQL: every call returns a promise and runs on a
 * kernel worker (a thread with its own instance and connection), so the
 * event loop never waits for the server. The queue `Worker` and `Runner`
 * take it as they take a `Kernel`. A body that runs inside a call's
 * transaction (`writeFenced`, `withDownstream`) runs on this thread and
 * may be async; a kernel call from inside it is refused (`invalid-input`).
 */
export declare class PostgresKernel {
  readonly checkpoint: Promised<Omit<Checkpoint, 'kernel'>>;
  readonly commitgate: Promised<Omit<Commitgate, 'kernel'>>;
  readonly sideeffect: Promised<Omit<Sideeffect, 'kernel' | 'writeFenced'>> & {
    /** As `Kernel.sideeffect.writeFenced`, the body async and on this thread. */
    writeFenced(resource: string, presented: bigint, body: (down: AsyncDownstream) => unknown): Promise<void>;
  };
  readonly taskboard: Promised<Omit<Taskboard, 'kernel'>>;
  readonly retention: Promised<Omit<Retention, 'kernel'>>;
  readonly store: { describe(): string };
  /** Kernel workers started so far. */
  readonly workers: number;
  /** Read (or seed) the `downstream` table, or your own tables, in a transaction of its own; the value must be structured-cloneable. */
  withDownstream<T>(fn: (down: AsyncDownstream) => T | Promise<T>): Promise<T>;
  /** As `Kernel.runEffect`: the body runs on this thread, the calls on kernel workers. */
  runEffect(action: Action, ttl: bigint, body: EffectBody): Promise<Ran>;
  /** Stops every worker; their connections close with them. */
  close(): Promise<void>;
}

/**
 * Open a kernel. Memory and SQLite answer synchronously (`Kernel`);
 * PostgreSQL answers with promises (`PostgresKernel`), unless
 * `blocking: true` asks for a `Kernel` whose calls block the calling
 * thread on the server (for worker threads and tools).
 */
export declare function openKernel(store: PostgresUrl, options?: PostgresOptions & { blocking?: false }): Promise<PostgresKernel>;
export declare function openKernel(store: PostgresUrl, options: OpenOptions & { blocking: true; connectionWait?: number }): Promise<Kernel>;
export declare function openKernel(store: string | Backend, options?: OpenOptions): Promise<Kernel>;

export declare function runEffect(kernel: Kernel, action: Action, ttl: bigint, body: EffectBody): Promise<Ran>;

/** Records a run's progress, one snapshot per finished step. */
export declare class Committer {
  static resume(kernel: Kernel, runId: string, fence?: bigint): Committer;
  readonly snapshot: Snapshot;
  stepDone(step: string): void;
}

/** bigint -> number (exact below 2^53), Uint8Array -> base64, undefined fields dropped. */
export declare function toJSON(value: unknown): unknown;
export declare function stringify(value: unknown, space?: string | number): string;

/** Where the component is looked up (see `OpenOptions.component`). */
export declare function componentPath(explicit?: string): string;
export declare function loadComponent(path?: string): Promise<{ path: string; dir: string }>;
