// Store URLs carry passwords (`postgres://alice:S3CRET@db/x`), and every
// error and description that names a store shows its URL: HOSTS.md rule 14,
// secrets never reach a message.

/**
 * `url` with its user information and every `password=` option value
 * replaced by `***`, by the URL grammar every host shares
 * (`tests/store-facts/cases.json` → `postgres-url`): the user information
 * runs from `://` to the LAST `@` — a password may hold `/ ? # @ :` and
 * spaces unencoded, so neither the first `@` nor the first `/` or `?` ends
 * it — and all of it is hidden, user included (`postgres://***@db/x`):
 * hiding too much is safe, and it spares every question of where a password
 * holding `:` begins. A `password=` value is hidden up to the next `&`.
 */
export function hidePassword(url) {
  let out = String(url);
  const scheme = out.indexOf('://');
  if (scheme >= 0) {
    const start = scheme + 3;
    const at = out.lastIndexOf('@');
    if (at >= start) out = `${out.slice(0, start)}***${out.slice(at)}`;
  }
  return out.replace(/(password=)[^&]*/gi, '$1***');
}
