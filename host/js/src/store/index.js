// Store URLs -> bindings. The same URLs as the Rust host, minus PostgreSQL
// (the JavaScript host binds memory and SQLite).
import { MemoryBackend } from './memory.js';
import { SqliteBackend } from './sqlite.js';
import { StoreFailure } from './errors.js';
import { hidePassword } from './secrets.js';

export { MemoryBackend } from './memory.js';
export { SqliteBackend } from './sqlite.js';
export { StoreConflict, StoreFailure } from './errors.js';
export { TABLES, compareKeys, prefixEnd } from './keys.js';
export { hidePassword } from './secrets.js';

/** A URL that names a PostgreSQL server (bound by the Rust and Python hosts). */
export const isPostgresUrl = (url) => /^postgres(ql)?:\/\//i.test(url);

/**
 * Open a binding from a store URL: `memory:`, `sqlite:PATH[?synchronous=normal]`
 * (or a bare path ending in `.db` / `.sqlite`). Errors name the URL with its
 * password hidden.
 */
export function openStore(url, options = {}) {
  if (typeof url !== 'string') throw new StoreFailure('a store URL must be a string');
  if (url === 'memory' || url === 'memory:') return new MemoryBackend();
  if (url.startsWith('sqlite:')) return new SqliteBackend(url.slice('sqlite:'.length), options);
  if (isPostgresUrl(url)) {
    throw new StoreFailure(
      `cannot open ${JSON.stringify(hidePassword(url))}: the JavaScript host has no PostgreSQL binding ` +
        '(the Rust and Python hosts have one)',
    );
  }
  if (!url.includes('://') && (url.endsWith('.db') || url.endsWith('.sqlite'))) return new SqliteBackend(url, options);
  throw new StoreFailure(`unknown store ${JSON.stringify(hidePassword(url))}: expected memory: or sqlite:PATH`);
}
