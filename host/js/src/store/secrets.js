// Store URLs carry passwords (`postgres://alice:S3CRET@db/x`), and every
// error and description that names a store shows its URL: HOSTS.md rule 14,
// secrets never reach a message.

/**
 * `url` with its password replaced by `***`: everything between the first
 * `:` after `://` and the LAST `@` (a password may hold `/ ? # @` and spaces
 * unencoded, so the authority cannot be told apart from the path by its
 * first `/`; hiding too much is safe, too little is not), and the value of
 * any `password=` option up to the next `&`.
 */
export function hidePassword(url) {
  let out = String(url);
  const scheme = out.indexOf('://');
  if (scheme >= 0) {
    const start = scheme + 3;
    const at = out.lastIndexOf('@');
    const colon = out.indexOf(':', start);
    if (at > start && colon >= 0 && colon < at) out = `${out.slice(0, colon + 1)}***${out.slice(at)}`;
  }
  return out.replace(/(password=)[^&]*/gi, '$1***');
}
