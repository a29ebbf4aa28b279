// The PostgreSQL wire protocol on the thread that waits for the server.
//
// A line's statements are encoded here, on the caller's thread, with
// node-postgres's own serializer (`pg-protocol`) as node-postgres sends
// them (a statement with values, a name or `extended` as Parse — once per
// connection for a named one —, Bind, Describe, Execute, Sync; any other
// as one simple Query), except that a run of the kernel's statements
// (`chain`) shares one Sync, and the server's answer is decoded here
// with node-postgres's parser and its `Result` (the same type parsers,
// `rowMode: 'array'` unless `objects`). The I/O thread (`./pg-io.js`) only
// moves bytes: it writes a request's messages to the connection and hands
// back everything the server said up to the request's last ReadyForQuery.
// So the work of a statement is done by the thread that needs its answer —
// in parallel across kernel workers — and the one I/O thread that serves
// them all stays light (measured: 258 µs of the I/O thread per claim with
// node-postgres there, 8 callers).
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const { serialize } = require('pg-protocol');
const { Parser } = require('pg-protocol/dist/parser.js');
const Result = require('pg/lib/result.js');
const { prepareValue } = require('pg/lib/utils.js');

const DESCRIBE = serialize.describe({ type: 'P', name: '' });
const EXECUTE = serialize.execute();
const SYNC = serialize.sync();

/** What the server or the client said, as plain data. */
export function said(e) {
  return {
    code: typeof e?.code === 'string' && /^[0-9A-Z]{5}$/.test(e.code) ? e.code : null,
    severity: typeof e?.severity === 'string' ? e.severity : null,
    message: String(e?.message ?? e),
  };
}

/** Bytes that crossed threads arrive as a Uint8Array; node-postgres sends a Buffer as bytea. */
function bytesAsBuffer(v) {
  return v instanceof Uint8Array && !Buffer.isBuffer(v) ? Buffer.from(v.buffer, v.byteOffset, v.byteLength) : v;
}

/** Whether node-postgres would send `s` on the extended protocol (its `requiresPreparation`). */
function extended(s) {
  return Boolean(s.extended || s.name || (s.values && s.values.length > 0));
}

/**
 * One connection's codec. `encode` a request's statements, `decode` the
 * bytes its answer came back as; a request sent without waiting for its
 * answer (`quiet`) is counted, and its answer skipped in the next one.
 */
export class Wire {
  /** Named statements the server has parsed on this connection (or is parsing: sent, not refused). */
  #parsed = new Set();
  #parser = new Parser();
  /** The transaction status of the last ReadyForQuery ('I', 'T', 'E'). */
  #status = 'I';
  /** Statements sent quietly whose answers come first in the next answer. */
  #quiet = 0;

  /**
   * The messages of `statements`, in one buffer, and the plan to read
   * their answer: `sent` (per statement sent: its index, whether rows are
   * objects, the name it asked the server to parse) and `refused` (index
   * → error: refused here, nothing of it sent — a value that cannot be
   * sent, as node-postgres refuses it). Throws a DataCloneError, and
   * nothing changes, when a body's value cannot cross threads.
   */
  encode(statements) {
    // A body's values cross as they did when they were posted to the I/O
    // thread: structured-cloned. What cannot be cloned refuses the whole
    // request (DataCloneError) before anything is encoded.
    const cloned = statements.map((s) => (s.objects ? structuredClone(s.values ?? []).map(bytesAsBuffer) : s.values));
    const parts = [];
    const sent = [];
    const refused = new Map();
    for (let i = 0; i < statements.length; i += 1) {
      const s = statements[i];
      if (!extended(s)) {
        parts.push({ messages: [serialize.query(s.text)], chain: false, simple: true });
        sent.push({ index: i, objects: Boolean(s.objects), parses: undefined, synced: true });
        continue;
      }
      const name = s.name ?? '';
      const parses = name === '' || !this.#parsed.has(name);
      try {
        const values = cloned[i] ?? [];
        const parse = parses ? serialize.parse({ name, text: s.text }) : undefined;
        const bind = serialize.bind({ statement: name, values, valueMapper: prepareValue });
        parts.push({ messages: parse ? [parse, bind, DESCRIBE, EXECUTE] : [bind, DESCRIBE, EXECUTE], chain: Boolean(s.chain), simple: false });
      } catch (e) {
        refused.set(i, said(e));
        continue;
      }
      if (name !== '' && parses) this.#parsed.add(name);
      sent.push({ index: i, objects: Boolean(s.objects), parses: name !== '' && parses ? name : undefined, synced: true });
    }
    // A kernel statement followed by another shares its Sync: the server
    // answers the run of them at once (one flush, one read here) instead
    // of one ReadyForQuery each. An error skips the rest of the run, which
    // the answers never reach (they stop at the first error). A simple
    // Query, or a statement not marked `chain` (a body's), keeps its own.
    const chunks = [];
    for (let j = 0; j < sent.length; j += 1) {
      chunks.push(...parts[j].messages);
      if (parts[j].simple) continue; // a simple Query is its own end
      if (parts[j].chain && parts[j + 1]?.chain) sent[j].synced = false;
      else chunks.push(SYNC);
    }
    const syncs = sent.filter((p) => p.synced).length;
    const bytes = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks);
    return { bytes, plan: { count: statements.length, sent, refused, syncs } };
  }

  /** Statements went out without their answer being waited for. */
  sentQuietly(plan) {
    this.#quiet += plan.syncs;
  }

  /** How many ReadyForQuery the next answer ends with, counting the quiet ones before it. */
  expected(plan) {
    return this.#quiet + plan.syncs;
  }

  /**
   * The answers of a request (`{results, status}`, as node-postgres
   * settles them: in order, up to and including the first error) from the
   * bytes that came back for it — every message up to its last
   * ReadyForQuery, the quiet requests' answers first.
   */
  decode(bytes, plan) {
    const segments = [];
    let skip = this.#quiet;
    this.#quiet = 0;
    let k = 0;
    let current;
    // A statement of a shared Sync failed: the rest of its run was skipped.
    let skipping = false;
    const start = () => {
      const p = skip > 0 ? undefined : plan.sent[k];
      current = { plan: p, result: new Result(p?.objects ? undefined : 'array'), error: undefined, parsed: false, skipped: false };
    };
    const close = () => {
      if (current.plan?.parses && !current.parsed) this.#parsed.delete(current.plan.parses);
      segments.push(current);
      k += 1;
      start();
    };
    // Without its own Sync a statement ends at its CommandComplete or its error.
    const unsynced = () => skip === 0 && current.plan !== undefined && !current.plan.synced;
    start();
    this.#parser.parse(bytes, (msg) => {
      switch (msg.name) {
        case 'rowDescription':
          current.result.addFields(msg.fields);
          break;
        case 'dataRow':
          if (current.error === undefined) current.result.addRow(current.result.parseRow(msg.fields));
          break;
        case 'commandComplete':
          current.result.addCommandComplete(msg);
          if (unsynced()) close();
          break;
        case 'parseComplete':
          current.parsed = true;
          break;
        case 'error':
          current.error ??= said(msg);
          if (unsynced()) {
            close();
            skipping = true;
          }
          break;
        case 'readyForQuery':
          this.#status = msg.status;
          if (skip > 0) {
            skip -= 1;
            start();
          } else if (skipping) {
            // The statements from here to the run's last were skipped.
            skipping = false;
            for (;;) {
              const last = current.plan === undefined || current.plan.synced;
              current.skipped = true;
              close();
              if (last) break;
            }
          } else close();
          break;
        default:
        // notices, parameter status, notifications: not a statement's
      }
    });
    if (skip > 0 || segments.length !== plan.sent.length) {
      throw new Error(`the answer holds ${segments.length} of ${plan.sent.length} statements' answers`);
    }
    const byIndex = new Map(segments.map((s) => [s.plan.index, s]));
    const results = [];
    for (let i = 0; i < plan.count; i += 1) {
      const refused = plan.refused.get(i);
      if (refused) {
        results.push({ error: refused });
        break;
      }
      const s = byIndex.get(i);
      if (s.error) {
        results.push({ error: s.error });
        break;
      }
      if (s.skipped) {
        results.push({ error: { code: null, severity: null, message: 'not run: an earlier statement of its Sync failed' } });
        break;
      }
      results.push({ rows: s.result.rows, command: s.result.command, rowCount: s.result.rowCount });
    }
    return { results, status: this.#status };
  }
}
