// A PostgreSQL store URL, split by the grammar every host shares
// (tests/store-facts/cases.json → `postgres-url`; HOSTS.md rule 14), as the
// Python host's `pg_url.py` and the Rust host's `store/postgres/url.rs` do:
//
//   postgres[ql]://[USER[:PASSWORD]@][HOST[:PORT][,HOST[:PORT]…]][/DBNAME][?NAME=VALUE[&…]]
//
// A password may hold any character, `/ ? # @ :` and spaces included, when
// whoever wrote the URL did not percent-encode it, so the user information
// runs to the LAST `@` after `://`; user and password split at its first
// `:`, each percent-decoded leniently (a `%` not followed by two hex digits
// stays as written). Then the hosts up to the first `/` or `?`, the database
// up to `?`, and `&`-separated NAME=VALUE parameters, strictly decoded; a
// repeated parameter's last value wins. No error message holds any of it.
import { POSTGRES_SCHEMES } from './facts.js';
import { StoreFailure } from './errors.js';

const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const HEX = /^[0-9A-Fa-f]{2}$/;

/** `text` with its %XX escapes decoded as UTF-8; `what` undefined: leniently. */
function decoded(text, what) {
  if (!text.includes('%')) return text;
  const bytes = [];
  const enc = new TextEncoder();
  for (let i = 0; i < text.length; ) {
    if (text[i] === '%' && HEX.test(text.slice(i + 1, i + 3))) {
      bytes.push(parseInt(text.slice(i + 1, i + 3), 16));
      i += 3;
      continue;
    }
    if (text[i] === '%' && what !== undefined) {
      throw new StoreFailure(`postgres URL: ${what} holds a '%' that is no percent escape (%XX)`);
    }
    const cp = text.codePointAt(i);
    const ch = String.fromCodePoint(cp);
    bytes.push(...enc.encode(ch));
    i += ch.length;
  }
  const buf = Uint8Array.from(bytes);
  if (what === undefined) return new TextDecoder('utf-8').decode(buf);
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(buf);
  } catch {
    throw new StoreFailure(`postgres URL: ${what} holds percent escapes that are not UTF-8`);
  }
}

function port(text) {
  if (!/^[0-9]+$/.test(text) || Number(text) < 1 || Number(text) > 65535) {
    throw new StoreFailure(`postgres URL: port ${JSON.stringify(text)} (expected a number from 1 to 65535)`);
  }
  return Number(text);
}

function host(item) {
  let name;
  let portText;
  if (item.startsWith('[')) {
    const close = item.indexOf(']');
    if (close < 0) throw new StoreFailure("postgres URL: a host's '[' has no ']'");
    name = item.slice(1, close);
    const rest = item.slice(close + 1);
    if (rest && !rest.startsWith(':')) throw new StoreFailure("postgres URL: a host's ']' is followed by neither ':' nor ','");
    portText = rest ? rest.slice(1) : undefined;
  } else {
    const colon = item.indexOf(':');
    name = colon < 0 ? item : item.slice(0, colon);
    portText = colon < 0 ? undefined : item.slice(colon + 1);
  }
  const p = portText === undefined ? null : port(portText);
  name = decoded(name, 'a host');
  if (name.includes(',')) throw new StoreFailure("postgres URL: a host name holds ','");
  return [name, p];
}

/**
 * Split a PostgreSQL URL: `{user, password, hosts: [[name, port|null]],
 * dbname, params}` (null: absent). Throws `StoreFailure` naming no part of it.
 */
export function parsePostgresUrl(url) {
  const scheme = POSTGRES_SCHEMES.find((s) => url.startsWith(s));
  if (scheme === undefined) throw new StoreFailure(`not a PostgreSQL URL (expected ${POSTGRES_SCHEMES.join(' or ')})`);
  let user = null;
  let password = null;
  let rest = url.slice(scheme.length);
  const start = scheme.length;
  const at = url.lastIndexOf('@');
  if (at >= start) {
    const info = url.slice(start, at);
    const colon = info.indexOf(':');
    user = decoded(colon < 0 ? info : info.slice(0, colon), undefined);
    password = colon < 0 ? null : decoded(info.slice(colon + 1), undefined);
    rest = url.slice(at + 1);
  }
  const cuts = [rest.indexOf('/'), rest.indexOf('?')].filter((i) => i >= 0);
  const cut = cuts.length ? Math.min(...cuts) : rest.length;
  const authority = rest.slice(0, cut);
  rest = rest.slice(cut);
  const hosts = authority
    .split(',')
    .filter((item) => item !== '')
    .map(host);
  let dbname = null;
  let query;
  if (rest.startsWith('/')) {
    const q = rest.indexOf('?');
    const path = q < 0 ? rest.slice(1) : rest.slice(1, q);
    query = q < 0 ? '' : rest.slice(q + 1);
    dbname = decoded(path, 'the database name') || null;
  } else {
    query = rest.slice(1);
  }
  const params = {};
  for (const pair of query.split('&')) {
    if (pair === '') continue;
    const eq = pair.indexOf('=');
    const name = decoded(eq < 0 ? pair : pair.slice(0, eq), 'a parameter name');
    if (!NAME.test(name)) throw new StoreFailure("postgres URL: a parameter name that is not a plain word (letters, digits, '_')");
    if (eq < 0) throw new StoreFailure(`postgres URL: parameter ${JSON.stringify(name)} has no value (expected ${name}=VALUE)`);
    params[name] = decoded(pair.slice(eq + 1), `parameter ${JSON.stringify(name)}`);
  }
  return { user, password, hosts, dbname, params };
}

/** Where a split URL points, for messages: hosts and database, never the user information. */
export function target(parts) {
  const hosts = parts.hosts.map(([h, p]) => (h.includes(':') ? `[${h}]` : h) + (p === null ? '' : `:${p}`)).join(',');
  return `${hosts || parts.params.host || 'localhost'}/${parts.dbname ?? ''}`;
}
