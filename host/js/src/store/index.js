// Store URLs -> bindings: the same URLs as the Rust host (memory, SQLite,
// PostgreSQL).
//
// The session protocol every binding speaks (the engine, `../engine.js`,
// drives it; a test binding can wrap it, as `test/fixtures/scripted.mjs`
// does to count and fail each phase):
//
//   backend.session()   -> session: one connection, used by one kernel
//   session.begin()     -> txn. Throws StoreConflict (busy: nothing opened,
//                          try again) or StoreFailure (nothing opened).
//   txn.read(keys, ranges) -> {values, pages}   (WIT `store.read` without
//                          the clock and entropy, which the engine adds):
//                          `keys` [table, key] pairs -> one value or
//                          undefined each; `ranges` {table, prefix, after,
//                          limit} -> one [[key, value], ...] page each, in
//                          UTF-8 byte order of the keys. Sees the
//                          transaction's own writes.
//   txn.tryRead(keys)      (WIT `store.try-read`, optional) -> one
//                          {held: true} or {held: false, value} per key:
//                          keys another transaction holds are passed over,
//                          not waited for. A binding without it (memory,
//                          SQLite: transactions exclude each other) has
//                          every key read as `read` reads it.
//   txn.write(changes)     (WIT `store.write`) the call's write set,
//                          {table, key, value} with value undefined (or
//                          null) for a delete, applied in the transaction.
//                          Both throw StoreConflict or StoreFailure; a sink
//                          body's `downstream` get / put are a one-key read
//                          and a one-entry write.
//   txn.commit()        Throws StoreConflict: NOT applied (busy); or
//                          StoreFailure: may have been applied. Either way
//                          nothing is left open: no rollback follows.
//   txn.rollback()      never throws; nothing is left open (a no-op when the
//                          transaction already ended).
//   txn.isOpen()        false once the transaction ended (SQLite: also when
//                          the database ended it behind the binding's back).
//   txn.lend(report)    the driver handle a sink body may use in this
//                          transaction (SQLite: a guarded connection), or
//                          undefined; `report(fault)` hears every store error
//                          the body meets through it. Revoked after the body.
//   session.close()
import { MemoryBackend } from './memory.js';
import { SqliteBackend } from './sqlite.js';
import { PostgresBackend } from './postgres.js';
import { StoreFailure } from './errors.js';
import { hidePassword } from './secrets.js';
import { SQLITE_SCHEME, USAGE, storeKind } from './facts.js';

export { MemoryBackend } from './memory.js';
export { SqliteBackend } from './sqlite.js';
export { PostgresBackend } from './postgres.js';
export { StoreConflict, StoreFailure } from './errors.js';
export { compareKeys } from './keys.js';
export { TABLES, prefixEnd } from './facts.js';
export { hidePassword } from './secrets.js';

/** A URL that names a PostgreSQL server. */
export const isPostgresUrl = (url) => storeKind(url) === 'postgres';

/**
 * Open a binding from a store URL: `memory:`, `sqlite:PATH[?synchronous=normal]`
 * (or a bare path ending in `.db` / `.sqlite`), `postgres://…` (the
 * blocking binding: each request waits for the I/O thread). Errors name the URL with its
 * password hidden.
 */
export function openStore(url, options = {}) {
  if (typeof url !== 'string') throw new StoreFailure('a store URL must be a string');
  const kind = storeKind(url);
  if (kind === 'memory') return new MemoryBackend();
  if (kind === 'sqlite' && url.startsWith(SQLITE_SCHEME)) {
    return new SqliteBackend(url.slice(SQLITE_SCHEME.length), options);
  }
  if (kind === 'postgres') return new PostgresBackend(url, options);
  if (kind === 'sqlite' && !url.includes('://')) return new SqliteBackend(url, options);
  throw new StoreFailure(`unknown store ${JSON.stringify(hidePassword(url))}: expected ${USAGE}`);
}
