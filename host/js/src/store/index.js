// Store URLs -> bindings. The same URLs as the Rust host, minus PostgreSQL
// (the JavaScript host binds memory and SQLite).
import { MemoryBackend } from './memory.js';
import { SqliteBackend } from './sqlite.js';
import { StoreFailure } from './errors.js';

export { MemoryBackend } from './memory.js';
export { SqliteBackend } from './sqlite.js';
export { StoreConflict, StoreFailure } from './errors.js';
export { TABLES, compareKeys, prefixEnd } from './keys.js';

/**
 * Open a binding from a store URL: `memory:`, `sqlite:PATH[?synchronous=normal]`
 * (or a bare path ending in `.db` / `.sqlite`).
 */
export function openStore(url, options = {}) {
  if (typeof url !== 'string') throw new StoreFailure('a store URL must be a string');
  if (url === 'memory' || url === 'memory:') return new MemoryBackend();
  if (url.startsWith('sqlite:')) return new SqliteBackend(url.slice('sqlite:'.length), options);
  if (url.endsWith('.db') || url.endsWith('.sqlite')) return new SqliteBackend(url, options);
  throw new StoreFailure(
    `unknown store ${JSON.stringify(url)}: expected memory: or sqlite:PATH ` +
      '(PostgreSQL is bound by the Rust host only)',
  );
}
