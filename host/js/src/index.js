// gak — a crash-safe coordination kernel, embedded in JavaScript.
//
// Every judgement lives in one WebAssembly component (the same `gak.wasm`
// the Rust and Python hosts load); this package runs it with jco and binds
// its store import to SQLite (better-sqlite3), PostgreSQL (node-postgres, on
// worker threads: `await kernel.taskboard.claim(…)`) or memory.
//
//   import { openKernel } from 'gak';
//   const kernel = await openKernel('sqlite:gak.db');
//   kernel.taskboard.seed([{ id: 'send-invoice' }]);
//   const task = kernel.taskboard.claim('send-invoice', 'worker-1', 30_000n);
//   // or, as a queue: await new Worker(kernel, { agent: 'worker-1' }).run(async (task) => …);
export { openKernel, Kernel } from './kernel.js';
export { PostgresKernel } from './pg-kernel.js';
export { GakError } from './errors.js';
export * from './contract.js';
export { Heartbeat, NotApplied, Runner, runEffect } from './effects.js';
export { Committer } from './committer.js';
export { Worker, DEFAULT_BACKOFF, backoffDelay, failReason } from './worker.js';
export { SystemClock, ManualClock } from './clock.js';
export { toJSON, stringify } from './json.js';
export { componentPath, loadComponent } from './component.js';
export { openStore, hidePassword, MemoryBackend, PostgresBackend, SqliteBackend, StoreConflict, StoreFailure, TABLES } from './store/index.js';
