// The PostgreSQL I/O thread, and the lines that reach it.
//
// The component's store import is synchronous and node-postgres is not. A
// thread that needs the server — the main thread for the blocking kernel,
// a kernel worker of `PostgresKernel` — holds a *line*: one connection,
// which node-postgres opens on the process's one I/O thread (this file, as
// a worker: TLS, authentication, start-up parameters) and then hands over.
// The line's thread encodes its statements and decodes the answers itself
// (`./pg-wire.js`). On a plain socket it then reads and writes the
// connection's descriptor itself, blocking (a *direct* line: no hop at
// all). Under TLS, which only the event loop can run, the I/O thread moves
// the bytes: the line posts a request on its MessageChannel port and waits
// with `Atomics.wait` until the answer is in the line's shared memory and
// the flag is raised (the `synckit` pattern, bytecodealliance/jco#39). The
// callers of different lines never wait for each other; a line's requests
// run in order.
//
// Requests: {op: 'connect', config, direct?} (node-postgres opens the
// connection, then hands it over: with `direct`, a plain socket to the
// caller, {ok, fd}), {op:
// 'run', bytes, count, quiet?} (a request's messages, encoded by the
// caller's `Wire` (./pg-wire.js): written as they are, pipelined, and the
// server's bytes handed back at the request's `count`-th ReadyForQuery,
// a quiet request's answer ahead of the next one's), {op: 'close'}. The
// caller's `Line.call({op: 'run', statements})` answers {results: [{rows,
// command, rowCount} | {error}], status} — `status` the connection's
// transaction status after the last statement ('I' idle, 'T' in a
// transaction, 'E' in a failed one) — or {error, gone: true} when the
// connection is closed.
import { MessageChannel, Worker, isMainThread, parentPort, receiveMessageOnPort, workerData } from 'node:worker_threads';
import { readSync, writeSync } from 'node:fs';
import { deserialize, serialize } from 'node:v8';
import { StoreFailure } from './errors.js';
import { Wire, said } from './pg-wire.js';

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

/** How long a connection is idle before the system's keepalive probes start. */
const KEEPALIVE_MS = 10_000;

/**
 * Whether a connection can be handed to its caller thread (a *direct*
 * line): a plain socket (no TLS: the caller cannot run TLS synchronously),
 * on a system where its file descriptor can be made blocking, with nothing
 * read ahead of the caller.
 */
function directable(stream) {
  return (
    process.platform !== 'win32' &&
    stream.encrypted !== true &&
    typeof stream._handle?.setBlocking === 'function' &&
    Number.isInteger(stream._handle.fd) &&
    stream._handle.fd >= 0 &&
    stream.readableLength === 0
  );
}

async function connect(config) {
  const { default: pg } = await import('pg');
  // Keepalive probes bound how long a direct line (below) can wait on a
  // connection whose peer vanished without a word.
  const c = new pg.Client({ ...config, keepAlive: true, keepAliveInitialDelayMillis: KEEPALIVE_MS });
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
 * A line's shared memory: [0] the flag (0 waiting; 1 an answer object is
 * in the buffer, v8-serialized; 2 it is on the port; 3 a run's answer —
 * the server's bytes — is in the buffer; 4 they are on the port), [1] the
 * answer's length; the answer from byte 8. An answer that does not fit
 * goes on the port.
 */
const HEADER = 8;
const ANSWER_BYTES = 256 * 1024;
const OBJECT = 1;
const OBJECT_ON_PORT = 2;
const BYTES = 3;
const BYTES_ON_PORT = 4;

/** ReadyForQuery's type byte ('Z'): every statement's answer ends with one. */
const READY = 0x5a;

/**
 * Walk `data`'s whole messages from `at`, counting ReadyForQuery on from
 * `seen`, and stop just past the `want`-th (0: none is waited for; every
 * one is counted): `{at, seen, end}`, `end` the answer's end there, or -1
 * when the walk reached the first incomplete message first. Both ways of a
 * line cut answers with it: the I/O thread's and a direct line's.
 */
function walkReady(data, at, seen, want) {
  while (at + 5 <= data.length) {
    const end = at + 1 + data.readUInt32BE(at + 1);
    if (end > data.length) break;
    const ready = data[at] === READY;
    at = end;
    if (ready && ++seen === want) return { at, seen, end };
  }
  return { at, seen, end: -1 };
}


/**
 * The I/O thread's side of one line: a connection that node-postgres
 * opened (TLS, authentication, the start-up parameters) and then hands
 * over. From then on this thread only moves bytes (see `./pg-wire.js`): a
 * run request's messages go on the wire as they came, and what the server
 * sends back is gathered until the request's last ReadyForQuery — counted
 * from the messages' headers, quiet requests' included — and handed back
 * in one piece.
 */
function serve(port, shared) {
  const flag = new Int32Array(shared, 0, 2);
  const bytes = new Uint8Array(shared, HEADER);
  let client;
  let stream;
  /** The connection's socket was handed to the caller thread: this thread never reads or writes it. */
  let direct = false;
  let lost = false;
  let chain = Promise.resolve();
  /** ReadyForQuery messages sent for, seen, and the count a waiting caller's answer ends at (0: none waits). */
  let expected = 0;
  let seen = 0;
  let answerAt = 0;
  /** What the server sent since the last answer, and how far its messages were counted. */
  let pending = Buffer.alloc(0);
  let scanned = 0;
  const raise = (where, length = 0) => {
    Atomics.store(flag, 1, length);
    Atomics.store(flag, 0, where);
    Atomics.notify(flag, 0);
  };
  /**
   * An answer to the waiting thread: `data` in the shared buffer when it
   * fits — no message port, so nothing wakes the waiting thread's event
   * loop for an answer it already read —, else `posted` on the port.
   */
  const deliver = (data, posted, [inBuffer, onPort]) => {
    if (data.length <= bytes.length) {
      bytes.set(data);
      raise(inBuffer, data.length);
    } else {
      port.postMessage(posted);
      raise(onPort);
    }
  };
  const answer = (msg) => deliver(serialize(msg), msg, [OBJECT, OBJECT_ON_PORT]);
  const answerBytes = (data) => deliver(data, data, [BYTES, BYTES_ON_PORT]);
  /** The connection is gone: a caller waiting for a run's answer is told so (nothing it sent is known to have run). */
  const gone = () => {
    lost = true;
    if (answerAt > 0) {
      answerAt = 0;
      answer({ error: { code: null, severity: null, message: 'Connection terminated unexpectedly' }, gone: true });
    }
  };
  const received = (chunk) => {
    pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
    for (;;) {
      const walked = walkReady(pending, scanned, seen, answerAt);
      scanned = walked.at;
      seen = walked.seen;
      if (walked.end < 0) return;
      answerAt = 0;
      answerBytes(pending.subarray(0, walked.end));
      pending = pending.subarray(walked.end);
      scanned = 0;
    }
  };
  const end = async () => {
    const c = client;
    const s = stream;
    client = undefined;
    stream = undefined;
    s?.removeListener('data', received);
    if (direct) {
      // The caller thread said goodbye (Terminate) itself, or is gone: the
      // socket is closed here, where libuv owns it.
      direct = false;
      s?.destroy();
      return;
    }
    if (c) await c.end().catch(() => {});
  };
  const handle = async (req) => {
    if (req.op === 'connect') {
      await end();
      const { tls, ...config } = req.config;
      let c;
      try {
        c = await connect({ ...config, ssl: ssl(tls) });
      } catch (e) {
        // `prefer`, as libpq: TLS when the server offers it, else plain.
        if (tls.mode !== 'prefer' || !/does not support SSL/i.test(String(e?.message))) throw e;
        c = await connect({ ...config, ssl: false });
      }
      client = c;
      lost = false;
      expected = 0;
      seen = 0;
      answerAt = 0;
      pending = Buffer.alloc(0);
      scanned = 0;
      c.on('error', gone);
      c.on('end', gone);
      // node-postgres is idle (connected: its last message was
      // ReadyForQuery); the connection's bytes are this thread's now —
      // or, on a plain socket, the caller thread's: it reads and writes
      // the descriptor itself, blocking, and no hop is left.
      stream = c.connection.stream;
      stream.removeAllListeners('data');
      if (req.direct && directable(stream)) {
        // libuv stops reading it now (pausing alone lets it read ahead
        // into the stream's buffer), then the descriptor turns blocking.
        stream.pause();
        stream._handle.reading = false;
        stream._handle.readStop();
        if (stream._handle.setBlocking(true) === 0) {
          direct = true;
          return { ok: true, fd: stream._handle.fd };
        }
        stream.on('data', received);
        stream.resume();
        return { ok: true };
      }
      stream.on('data', received);
      return { ok: true };
    }
    if (req.op === 'close') {
      await end();
      return { ok: true };
    }
    return { error: { code: null, severity: null, message: `unknown request ${JSON.stringify(req.op)}` } };
  };
  /** A run request: its messages on the wire now, its answer when its last ReadyForQuery arrives. */
  const run = (req) => {
    if (!client || lost) {
      if (!req.quiet) answer({ error: { code: null, severity: null, message: 'the connection to PostgreSQL is closed' }, gone: true });
      return;
    }
    expected += req.count;
    if (!req.quiet) answerAt = expected;
    if (req.bytes.length > 0) stream.write(Buffer.from(req.bytes.buffer, req.bytes.byteOffset, req.bytes.byteLength));
    if (answerAt !== 0 && seen === answerAt) {
      // Nothing new to wait for (every statement was refused before sending).
      answerAt = 0;
      answerBytes(pending.subarray(0, scanned));
      pending = pending.subarray(scanned);
      scanned = 0;
    }
  };
  port.on('message', (req) => {
    if (req.op === 'run') {
      // In order behind a connect or close still running.
      chain = chain.then(() => run(req));
      return;
    }
    chain = chain.then(() => handle(req).then(answer, (e) => answer({ error: said(e) })));
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

const EMPTY = Buffer.alloc(0);

/** A system call on a direct line's socket, again when a signal interrupted it. */
function retried(syscall) {
  for (;;) {
    try {
      return syscall();
    } catch (e) {
      if (e?.code !== 'EINTR') throw e;
    }
  }
}
/** Terminate ('X'): the connection's last message. */
const TERMINATE = Buffer.from([0x58, 0, 0, 0, 4]);
const READ_BYTES = 64 * 1024;
/** Whether lines on plain sockets go direct (GAK_PG_DIRECT=0: every line through the I/O thread, to compare). */
const DIRECT = process.env.GAK_PG_DIRECT !== '0';

/** One connection's way to the I/O thread: synchronous requests. */
export class Line {
  #port;
  #flag;
  #bytes;
  #broken = false;
  /** The connection's codec (`./pg-wire.js`): a new one for each connection. */
  #wire = new Wire();
  /** A direct line's socket (a blocking descriptor this thread reads and writes), else undefined. */
  #fd;
  /** A direct line's bytes read past the last answer (a notice, say), and its read buffer. */
  #leftover = EMPTY;
  #chunk;

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
   * `{op: 'run', statements}` answers `{results, status}` (or `{error,
   * gone}`: the connection is closed); the others answer an object.
   */
  call(req, timeoutMs) {
    if (this.#broken) throw new StoreFailure('the line to the PostgreSQL I/O thread is broken (an earlier request had no answer)');
    if (req.op === 'connect') {
      this.#wire = new Wire();
      this.#fd = undefined;
      const answer = this.#await({ ...req, direct: DIRECT }, timeoutMs);
      if (answer.fd !== undefined) {
        this.#fd = answer.fd;
        this.#leftover = EMPTY;
        this.#chunk ??= Buffer.allocUnsafe(READ_BYTES);
      }
      return answer.fd === undefined ? answer : { ok: answer.ok };
    }
    if (req.op === 'close' && this.#fd !== undefined) this.#goodbye();
    if (req.op !== 'run') return this.#await(req, timeoutMs);
    const { bytes, plan } = this.#wire.encode(req.statements);
    const want = this.#wire.expected(plan);
    if (want === 0) return this.#wire.decode(EMPTY, plan);
    const answer = this.#fd === undefined ? this.#await(this.#message(bytes, plan.syncs, false), timeoutMs) : this.#direct(bytes, want);
    if (!(answer instanceof Uint8Array)) return answer;
    try {
      return this.#wire.decode(answer, plan);
    } catch (e) {
      this.#broken = true;
      throw new StoreFailure(`PostgreSQL's answer cannot be read: ${e.message}`);
    }
  }

  /**
   * A direct line's round trip: the request written and its answer read
   * on this thread, blocking (no hop: the I/O thread is not involved).
   * The connection closed or failed: `{error, gone}`, as the I/O thread
   * answers, and the line is closed.
   */
  #direct(bytes, want) {
    try {
      this.#writeAll(bytes);
      return this.#readAnswer(want);
    } catch (e) {
      this.#fd = undefined;
      this.#broken = true;
      this.#release();
      return { error: { code: null, severity: null, message: `Connection terminated unexpectedly (${e.code ?? e.message})` }, gone: true };
    }
  }

  #writeAll(bytes) {
    let at = 0;
    while (at < bytes.length) at += retried(() => writeSync(this.#fd, bytes, at, bytes.length - at));
  }

  /** Read until the `want`-th ReadyForQuery; the bytes up to it (what follows is kept for the next answer). */
  #readAnswer(want) {
    let data = this.#leftover;
    let borrowed = false;
    let scanned = 0;
    let seen = 0;
    for (;;) {
      const walked = walkReady(data, scanned, seen, want);
      scanned = walked.at;
      seen = walked.seen;
      const { end } = walked;
      if (end >= 0) {
        // Copied out of the read buffer, which the next read reuses.
        const answer = Buffer.from(data.subarray(0, end));
        this.#leftover = end === data.length ? EMPTY : Buffer.from(data.subarray(end));
        return answer;
      }
      // `data` may be a view of the read buffer, which this read reuses.
      if (borrowed) data = Buffer.from(data);
      const n = retried(() => readSync(this.#fd, this.#chunk, 0, this.#chunk.length, null));
      if (n === 0) throw Object.assign(new Error('the server closed the connection'), { code: 'EOF' });
      const fresh = this.#chunk.subarray(0, n);
      borrowed = data.length === 0;
      data = borrowed ? fresh : Buffer.concat([data, fresh]);
    }
  }

  /** A direct line's end: Terminate, best effort (the I/O thread closes the socket). */
  #goodbye() {
    try {
      this.#writeAll(TERMINATE);
    } catch {
      // gone already
    }
    this.#fd = undefined;
  }

  /** Tell the I/O thread to close a direct line's socket, without waiting. */
  #release() {
    try {
      this.#port.postMessage({ op: 'close' });
    } catch {
      // the port is closed: the I/O thread closes the socket when it sees that
    }
  }

  /** A run request as it crosses: its bytes in a buffer of their own, moved, not copied. */
  #message(bytes, count, quiet) {
    const own = new Uint8Array(bytes);
    return [{ op: 'run', bytes: own, count, quiet }, [own.buffer]];
  }

  #await(req, timeoutMs) {
    Atomics.store(this.#flag, 0, 0);
    if (Array.isArray(req)) this.#port.postMessage(...req);
    else this.#port.postMessage(req);
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
    if (where === OBJECT) return deserialize(this.#bytes.subarray(0, Atomics.load(this.#flag, 1)));
    if (where === BYTES) return Buffer.from(this.#bytes.subarray(0, Atomics.load(this.#flag, 1)));
    const got = receiveMessageOnPort(this.#port);
    if (got === undefined && where === 0) {
      this.#broken = true;
      throw new StoreFailure(`PostgreSQL did not answer within ${timeoutMs} ms`);
    }
    if (got === undefined) {
      this.#broken = true;
      throw new StoreFailure('the PostgreSQL I/O thread answered nothing');
    }
    return where === BYTES_ON_PORT ? Buffer.from(got.message.buffer, got.message.byteOffset, got.message.byteLength) : got.message;
  }

  /** Send `req` (a run) without waiting for (or ever reading) an answer; it is skipped in the next one. */
  post(req) {
    if (this.#broken) throw new StoreFailure('the line to the PostgreSQL I/O thread is broken (an earlier request had no answer)');
    const { bytes, plan } = this.#wire.encode(req.statements);
    if (plan.sent.length === 0) return;
    if (this.#fd === undefined) this.#port.postMessage(...this.#message(bytes, plan.syncs, true));
    else {
      try {
        this.#writeAll(bytes);
      } catch (e) {
        // Found at the next request, as on the I/O thread.
        this.#fd = undefined;
        this.#broken = true;
        this.#release();
        throw new StoreFailure(`the connection to PostgreSQL is closed (${e.code ?? e.message})`);
      }
    }
    this.#wire.sentQuietly(plan);
  }

  get broken() {
    return this.#broken;
  }

  /** Whether this thread reads and writes the connection itself (a plain socket), not through the I/O thread. */
  get direct() {
    return this.#fd !== undefined;
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
