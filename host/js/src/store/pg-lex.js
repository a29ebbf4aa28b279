// What a SQL text is to PostgreSQL: its statements and their leading words,
// read by the rules of the server's own scanner (src/backend/parser/scan.l),
// as the Python host's `pg_lex.py` and the Rust host's `store/postgres/lex.rs`
// read it. A sink body's lent handle (`./postgres.js`) must not let a body
// end the kernel's transaction (HOSTS.md rule 12); matching "the first word"
// misses what the server skips before it:
//
// - whitespace is [ \t\n\r\f\v]; `--` comments end at \n or \r; `/* */` nest;
// - '…' with ''; E'…' with backslash escapes; B'…' / X'…' (no ''); U&'…';
//   a literal followed by whitespace holding a newline and another ' goes
//   on (string continuation); "…" and U&"…" identifiers with "";
// - $tag$…$tag$ (tag: a letter, _ or non-ASCII character, then those or
//   digits; or empty); a $ that continues an identifier, number or
//   parameter ($1) opens nothing;
// - every non-ASCII character is an identifier character;
// - ; separates statements; empty ones do not count.
//
// A text the scanner would reject (unterminated comment, literal, dollar
// quote) runs to its end here: no more refused than its parts, and the
// server refuses it anyway.
import { TRANSACTION_CONTROL } from './facts.js';

/** The phrases (upper-case word lists) that begin, end or split a transaction. */
const PHRASES = TRANSACTION_CONTROL.map((p) => p.split(' '));
const WORDS = Math.max(...PHRASES.map((p) => p.length));

const SPACE = new Set([' ', '\t', '\n', '\r', '\f', '\v']);
const HORIZONTAL = new Set([' ', '\t', '\f', '\v']);
const NEWLINE = new Set(['\n', '\r']);
const ASCII = /^[\x00-\x7f]*$/;

const identStart = (c) => (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c === '_' || c >= '\x80';
const digit = (c) => c >= '0' && c <= '9';
const identCont = (c) => identStart(c) || digit(c) || c === '$';

function lineEnd(text, i) {
  while (i < text.length && !NEWLINE.has(text[i])) i++;
  return i;
}

function blockEnd(text, i) {
  let depth = 1;
  i += 2;
  while (i < text.length) {
    if (text.startsWith('/*', i)) {
      depth++;
      i += 2;
    } else if (text.startsWith('*/', i)) {
      depth--;
      i += 2;
      if (depth === 0) return i;
    } else {
      i++;
    }
  }
  return text.length;
}

/** The ' that continues the literal closed just before `i`, if one does. */
function continuation(text, i) {
  const n = text.length;
  let newline = false;
  while (i < n) {
    const c = text[i];
    if (NEWLINE.has(c)) {
      newline = true;
      i++;
    } else if (HORIZONTAL.has(c)) {
      i++;
    } else if (text.startsWith('--', i)) {
      i = lineEnd(text, i);
      if (i === n) return undefined;
    } else {
      break;
    }
  }
  return newline && i < n && text[i] === "'" ? i : undefined;
}

function literalEnd(text, i, backslash, doubled) {
  const n = text.length;
  i++;
  while (i < n) {
    const c = text[i];
    if (c === '\\' && backslash) {
      i += 2;
    } else if (c === "'") {
      if (doubled && i + 1 < n && text[i + 1] === "'") {
        i += 2;
        continue;
      }
      const more = continuation(text, i + 1);
      if (more === undefined) return i + 1;
      i = more + 1;
    } else {
      i++;
    }
  }
  return n;
}

function identifierEnd(text, i) {
  const n = text.length;
  i++;
  while (i < n) {
    if (text[i] === '"') {
      if (i + 1 < n && text[i + 1] === '"') {
        i += 2;
        continue;
      }
      return i + 1;
    }
    i++;
  }
  return n;
}

function dollarEnd(text, i) {
  const n = text.length;
  let j = i + 1;
  if (j < n && identStart(text[j])) {
    j++;
    while (j < n && (identStart(text[j]) || digit(text[j]))) j++;
  }
  if (j >= n || text[j] !== '$') return undefined;
  const tag = text.slice(i, j + 1);
  const end = text.indexOf(tag, j + 1);
  return end < 0 ? n : end + tag.length;
}

function wordEnd(text, i) {
  while (i < text.length && identCont(text[i])) i++;
  return i;
}

/**
 * The leading words (upper case, at most as many as a phrase has) of every
 * non-empty statement of `text`; [] for a statement that does not start with
 * a word. Each list's `stdio` says whether a word token of the statement
 * (not a literal or a quoted identifier) is STDIN or STDOUT.
 * `backslashQuotes`: read '…' as the server does after `SET
 * standard_conforming_strings = off`.
 */
export function statements(text, backslashQuotes = false) {
  const out = [];
  let words = [];
  words.stdio = false;
  let leading = true;
  let empty = true;
  const n = text.length;
  let i = 0;
  while (i < n) {
    const c = text[i];
    if (SPACE.has(c)) {
      i++;
      continue;
    }
    if (c === '-' && text.startsWith('--', i)) {
      i = lineEnd(text, i);
      continue;
    }
    if (c === '/' && text.startsWith('/*', i)) {
      i = blockEnd(text, i);
      continue;
    }
    if (c === ';') {
      if (!empty) out.push(words);
      words = [];
      words.stdio = false;
      leading = true;
      empty = true;
      i++;
      continue;
    }
    empty = false;
    if (identStart(c)) {
      const j = wordEnd(text, i);
      if (j === i + 1 && j < n) {
        // One letter before a quote: a prefixed literal, not a word.
        const next = text[j];
        let k = -1;
        if (next === "'" && 'eE'.includes(c)) k = literalEnd(text, j, true, true);
        else if (next === "'" && 'bBxX'.includes(c)) k = literalEnd(text, j, false, false);
        else if (next === "'" && 'nN'.includes(c)) k = literalEnd(text, j, backslashQuotes, true);
        else if ('uU'.includes(c) && text.startsWith("&'", j)) k = literalEnd(text, j + 1, false, true);
        else if ('uU'.includes(c) && text.startsWith('&"', j)) k = identifierEnd(text, j + 1);
        if (k >= 0) {
          leading = false;
          i = k;
          continue;
        }
      }
      if (j - i === 5 || j - i === 6) {
        // ASCII only, as the server folds keywords: 'ſtdin' is no STDIN.
        const word = text.slice(i, j);
        const upper = ASCII.test(word) ? word.toUpperCase() : word;
        if (upper === 'STDIN' || upper === 'STDOUT') words.stdio = true;
      }
      if (leading && words.length < WORDS) {
        const word = text.slice(i, j);
        // The server folds ASCII letters only.
        words.push(ASCII.test(word) ? word.toUpperCase() : word);
      }
      i = j;
      continue;
    }
    leading = false;
    if (c === "'") {
      i = literalEnd(text, i, backslashQuotes, true);
    } else if (c === '"') {
      i = identifierEnd(text, i);
    } else if (c === '$') {
      const end = dollarEnd(text, i);
      i = end !== undefined ? end : wordEnd(text, i + 1);
    } else if (digit(c) || (c === '.' && i + 1 < n && digit(text[i + 1]))) {
      i++;
      while (i < n && (identCont(text[i]) || text[i] === '.')) i++;
    } else {
      i++;
    }
  }
  if (!empty) out.push(words);
  return out;
}

/**
 * Why a body may not send `text` through the lent handle, or undefined: a
 * statement that begins, ends or splits the transaction, a COPY naming
 * STDIN or STDOUT (its rows would cross the connection, a protocol of its
 * own that the handle does not speak), or more than one statement — under
 * either reading of '…'.
 */
export function refusal(text) {
  const readings = [statements(text), statements(text, true)];
  for (const found of readings) {
    for (const words of found) {
      for (const phrase of PHRASES) {
        if (phrase.every((w, k) => words[k] === w)) {
          return `${phrase.join(' ')} refused: a body runs inside the kernel's transaction and must not end it`;
        }
      }
      if (words.stdio && words[0] === 'COPY') {
        return "COPY FROM STDIN / TO STDOUT refused: a body's handle runs statements, not COPY's data exchange (write rows with INSERT)";
      }
    }
  }
  if (readings.some((found) => found.length > 1)) {
    return "a text of more than one statement refused: a body's statement runs in the kernel's transaction, one per call";
  }
  return undefined;
}
