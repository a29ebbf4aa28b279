// The PostgreSQL I/O thread, and the lines that reach it.
//
// The component's store import is synchronous and node-postgres is not, so
// the binding's statements run on a thread of their own (this file, as a
// worker): a thread that needs the server — the main thread for the
// blocking kernel, a kernel worker of `PostgresKernel` — holds a *line*, a
// MessageChannel port plus a shared flag, posts a request on it and waits
// with `Atomics.wait` until the I/O thread has posted the answer and raised
// the flag (the `synckit` pattern, bytecodealliance/jco#39). One I/O thread
// serves every line of a process; each line is one connection (its own
// `pg.Client`), so the callers of different lines never wait for each other
// there. A line's requests run in order.
//
// Requests: {op: 'connect', config}, {op: 'run', statements: [{text,
// values, name?}]} (pipelined: all on the wire at once, one round trip and
// one hop between the threads for all of them), {op:
// 'close'}. Answers:
// {ok: true} | {results: [{rows, command} | {error}], status} | {error},
// where `status` is the connection's transaction status after the last
// statement ('I' idle, 'T' in a transaction, 'E' in a failed one, null: the
// connection is gone).
import { MessageChannel, Worker, isMainThread, parentPort, receiveMessageOnPort, workerData } from 'node:worker_threads';
import { deserialize, serialize } from 'node:v8';
import { StoreFailure } from './errors.js';

/** What the server or the connection said, as plain data. */
function said(e) {
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

/** node-postgres's `ssl` for the TLS a binding asked for ({mode, ca?, system?}: libpq's `sslmode`). */
function ssl(tls) {
  if (tls.mode === 'disable') return false;
  if (tls.mode === 'prefer' || tls.mode === 'require') return { rejectUnauthorized: false };
  // verify-*: nothing but the given roots is trusted (or Node's own, for
  // sslrootcert=system); verify-ca checks the chain, not the name.
  const roots = tls.system ? undefined : tls.ca;
  const verified = { rejectUnauthorized: true, ...(roots === undefined ? {} : { ca: roots }) };
  if (tls.mode === 'verify-ca') verified.checkServerIdentity = () => undefined;
  return verified;
}

async function connect(config) {
  const { default: pg } = await import('pg');
  const c = new pg.Client({ ...config, pipeline: true });
  // Errors between requests mark the line lost (the next request says so).
  c.on('error', () => {});
  try {
    await c.connect();
  } catch (e) {
    c.end().catch(() => {});
    throw e;
  }
  return c;
}

/**
 * A line's shared memory: [0] the flag (0 waiting, 1 the answer is in the
 * buffer, 2 it is on the port), [1] the answer's length; the answer's bytes
 * (v8-serialized) from byte 8. An answer that does not fit goes on the port.
 */
const HEADER = 8;
const ANSWER_BYTES = 256 * 1024;

/** The I/O thread's side of one line. */
function serve(port, shared) {
  const flag = new Int32Array(shared, 0, 2);
  const bytes = new Uint8Array(shared, HEADER);
  let client;
  let lost = false;
  let chain = Promise.resolve();
  const answer = (msg) => {
    // In the shared buffer when it fits: no message port, so nothing wakes
    // the waiting thread's event loop for an answer it already read.
    const data = serialize(msg);
    if (data.length <= bytes.length) {
      bytes.set(data);
      Atomics.store(flag, 1, data.length);
      Atomics.store(flag, 0, 1);
    } else {
      port.postMessage(msg);
      Atomics.store(flag, 0, 2);
    }
    Atomics.notify(flag, 0);
  };
  const end = async () => {
    const c = client;
    client = undefined;
    if (c) await c.end().catch(() => {});
  };
  const handle = async (req) => {
    if (req.op === 'connect') {
      await end();
      const { tls, ...config } = req.config;
      try {
        client = await connect({ ...config, ssl: ssl(tls) });
      } catch (e) {
        // `prefer`, as libpq: TLS when the server offers it, else plain.
        if (tls.mode !== 'prefer' || !/does not support SSL/i.test(String(e?.message))) throw e;
        client = await connect({ ...config, ssl: false });
      }
      lost = false;
      client.on('error', () => {
        lost = true;
      });
      client.on('end', () => {
        lost = true;
      });
      return { ok: true };
    }
    if (req.op === 'close') {
      await end();
      return { ok: true };
    }
    if (req.op === 'run') {
      if (!client || lost) return { error: { code: null, severity: null, message: 'the connection to PostgreSQL is closed' }, gone: true };
      const c = client;
      // Pipelined: every statement goes on the wire before any answer is
      // read (one round trip); after an error inside the transaction the
      // server refuses the rest (25P02), and the first error is the one
      // that counts.
      // Corked: the statements' messages leave in one write.
      const stream = c.connection?.stream;
      stream?.cork?.();
      const pending = req.statements.map((s) =>
          c.query({
            text: s.text,
            values: s.values?.map(bytesAsBuffer),
            name: s.name,
            // A body's statement: always the extended protocol (one
            // statement per message; the server refuses several), rows as
            // objects.
            queryMode: s.extended ? 'extended' : undefined,
            rowMode: s.objects ? undefined : 'array',
          }),
        );
      stream?.uncork?.();
      if (req.quiet) {
        // Not waited for: the next request's statements go on the wire
        // right behind these (pipeline mode); an error shows there.
        for (const p of pending) p.catch(() => {});
        return undefined;
      }
      const settled = await Promise.allSettled(pending);
      const results = [];
      for (const r of settled) {
        results.push(
          r.status === 'fulfilled'
            ? { rows: r.value.rows, command: r.value.command, rowCount: r.value.rowCount }
            : { error: said(r.reason) },
        );
        if (r.status === 'rejected') break;
      }
      const status = lost ? null : (c.getTransactionStatus?.() ?? c._txStatus ?? null);
      return { results, status };
    }
    return { error: { code: null, severity: null, message: `unknown request ${JSON.stringify(req.op)}` } };
  };
  port.on('message', (req) => {
    // A quiet request (a read-only transaction's end) is not answered: the
    // next request's answer is the next one the caller waits for.
    const reply = req.quiet ? () => {} : answer;
    chain = chain.then(
      () => handle(req).then(reply, (e) => reply({ error: said(e) })),
    );
    if (req.op === 'close') chain = chain.then(() => port.close());
  });
  // The thread that held the line gave it up (or is gone): so is the connection.
  port.on('close', () => {
    chain = chain.then(end);
  });
}

/** Control messages: a new line ({line, flag}) or another control port ({control}). */
function control(msg) {
  if (msg?.line) serve(msg.line, msg.flag);
  if (msg?.control) msg.control.on('message', control);
}

if (!isMainThread && parentPort && workerData?.gakPgIo === true) {
  parentPort.on('message', control);
}

let thread;

/**
 * This thread's way to the process's I/O thread: a control port. On the
 * main thread the I/O thread is started on first use (not keeping the
 * process alive); a kernel worker gets its port from whoever started it.
 */
let controlPort;

/** Use `port` (a control port to an I/O thread) for this thread's lines. */
export function useIoPort(port) {
  controlPort = port;
  port.unref?.();
}

function ioPort() {
  if (controlPort) return controlPort;
  if (!thread) {
    thread = new Worker(new URL(import.meta.url), { workerData: { gakPgIo: true } });
    thread.unref();
  }
  return thread;
}

/** A new control port to the I/O thread, to hand to a kernel worker (transfer it). */
export function ioControlPort() {
  const { port1, port2 } = new MessageChannel();
  ioPort().postMessage({ control: port2 }, [port2]);
  return port1;
}

/** One connection's way to the I/O thread: synchronous requests. */
export class Line {
  #port;
  #flag;
  #bytes;
  #broken = false;

  constructor() {
    const { port1, port2 } = new MessageChannel();
    const shared = new SharedArrayBuffer(HEADER + ANSWER_BYTES);
    ioPort().postMessage({ line: port2, flag: shared }, [port2]);
    port1.unref();
    this.#port = port1;
    this.#flag = new Int32Array(shared, 0, 2);
    this.#bytes = new Uint8Array(shared, HEADER);
  }

  /**
   * Send `req` and wait (blocking this thread) for its answer, at most
   * `timeoutMs`. No answer in time: the line is broken (a late answer must
   * never be read as the next request's) and `StoreFailure` is thrown.
   */
  call(req, timeoutMs) {
    if (this.#broken) throw new StoreFailure('the line to the PostgreSQL I/O thread is broken (an earlier request had no answer)');
    Atomics.store(this.#flag, 0, 0);
    this.#port.postMessage(req);
    // The flag, not the wake-up, says the answer is there: the notify of
    // the previous answer can arrive late (the I/O thread raises the flag,
    // then notifies) and wake this wait early.
    const deadline = performance.now() + timeoutMs;
    while (Atomics.load(this.#flag, 0) === 0) {
      const left = deadline - performance.now();
      if (left <= 0) break;
      Atomics.wait(this.#flag, 0, 0, left);
    }
    const where = Atomics.load(this.#flag, 0);
    if (where === 1) return deserialize(this.#bytes.subarray(0, Atomics.load(this.#flag, 1)));
    const got = receiveMessageOnPort(this.#port);
    if (got === undefined && where === 0) {
      this.#broken = true;
      throw new StoreFailure(`PostgreSQL did not answer within ${timeoutMs} ms`);
    }
    if (got === undefined) {
      this.#broken = true;
      throw new StoreFailure('the PostgreSQL I/O thread answered nothing');
    }
    return got.message;
  }

  /** Send `req` without waiting for (or ever reading) an answer. */
  post(req) {
    if (this.#broken) throw new StoreFailure('the line to the PostgreSQL I/O thread is broken (an earlier request had no answer)');
    this.#port.postMessage({ ...req, quiet: true });
  }

  get broken() {
    return this.#broken;
  }

  /** Close the connection and the line (best effort; never throws). */
  close() {
    if (this.#broken) {
      this.#port.close();
      return;
    }
    try {
      this.call({ op: 'close' }, 5000);
    } catch {
      // the I/O thread drops the connection when the port closes
    }
    this.#broken = true;
    this.#port.close();
  }
}
