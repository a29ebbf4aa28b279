// The PostgreSQL binding: the shared schema, the blocking kernel and the
// kernel of promises on one schema, the event loop kept free, bounded pools
// and lock waits, an ambiguous COMMIT never re-run, TLS as libpq reads
// sslmode, and no password in any message.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { Agent, createServer, get } from 'node:http';
import { Worker } from 'node:worker_threads';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import pg from 'pg';
import { GakError, Worker as QueueWorker, openKernel } from '../src/index.js';
import { PostgresKernel } from '../src/pg-kernel.js';
import { PostgresBackend } from '../src/store/index.js';
import { POSTGRES_MANY_KEYS_FROM } from '../src/store/facts.js';
import { refusal } from '../src/store/pg-lex.js';
import { Wire } from '../src/store/pg-wire.js';
import { DSN, needsPostgres, schemaUrl } from './fixtures/pg.mjs';

const MINUTE = 60_000n;

async function query(sql, values) {
  const client = new pg.Client({ connectionString: DSN });
  await client.connect();
  try {
    return (await client.query(sql, values)).rows;
  } finally {
    await client.end();
  }
}

test('the schema is the shared file: the Rust and Python hosts\' tables and functions', needsPostgres, async (t) => {
  const url = schemaUrl(t, 'ddl');
  const kernel = await openKernel(url, { blocking: true });
  kernel.close();
  const schema = new URL(url.replace(/^postgres(ql)?:/, 'http:')).searchParams.getAll('schema').at(-1);
  const tables = await query('SELECT table_name FROM information_schema.tables WHERE table_schema = $1 ORDER BY 1', [schema]);
  assert.deepEqual(
    tables.map((r) => r.table_name),
    ['actions', 'downstream', 'indexes', 'meta', 'outcomes', 'resources', 'sinks', 'snapshots', 'tasks'],
  );
  const functions = await query(
    "SELECT p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = $1 ORDER BY 1",
    [schema],
  );
  assert.deepEqual(functions.map((r) => r.proname), ['gak_read_many_v1', 'gak_read_v1', 'gak_try_read_v1', 'gak_write_many_v1', 'gak_write_v1']);
});

test('a blocking kernel and a kernel of promises share one schema: one wins, the other sees taken', needsPostgres, async (t) => {
  const url = schemaUrl(t, 'share');
  const blocking = await openKernel(url, { blocking: true });
  const kernel = await openKernel(url);
  t.after(async () => {
    blocking.close();
    await kernel.close();
  });
  assert.ok(kernel instanceof PostgresKernel);
  blocking.taskboard.seed([{ id: 'x' }]);
  const won = await kernel.taskboard.claim('x', 'a', MINUTE);
  assert.equal(won.fence, 1n);
  assert.throws(() => blocking.taskboard.claim('x', 'b', MINUTE), (e) => e instanceof GakError && e.code === 'taken');
  await assert.rejects(kernel.taskboard.claim('x', 'c', MINUTE), (e) => e instanceof GakError && e.code === 'taken');
  blocking.taskboard.complete('x', won.token);
  assert.equal((await kernel.taskboard.get('x')).state, 'done');
  // The stored record is the component's JSON, readable with psql.
  const schema = new URL(url.replace(/^postgres(ql)?:/, 'http:')).searchParams.getAll('schema').at(-1);
  const [row] = await query(`SELECT value->>'state' AS state FROM "${schema}".tasks WHERE key = $1`, ['x']);
  assert.equal(row.state, 'done');
});

test('the queue on PostgreSQL: batches, group limits and dead tasks through the promises', needsPostgres, async (t) => {
  const url = schemaUrl(t, 'queue');
  const kernel = await openKernel(url, { maxConnections: 4 });
  t.after(() => kernel.close());
  await kernel.taskboard.seed(Array.from({ length: 30 }, (_, i) => ({ id: `t${String(i).padStart(2, '0')}`, group: 'g', maxAttempts: 1 })));
  await kernel.taskboard.setGroupLimit('g', 5);
  const grants = await Promise.all(Array.from({ length: 8 }, (_, i) => kernel.taskboard.claimBatch(`w${i}`, MINUTE, 3)));
  const ids = grants.flat().map((g) => g.id);
  assert.equal(ids.length, 5, 'at most the group limit is live');
  assert.equal(new Set(ids).size, 5, 'no task granted twice');
  assert.equal((await kernel.taskboard.getGroup('g')).live, 5);
  const one = grants.flat()[0];
  await kernel.taskboard.fail(one.id, one.token, 'boom', undefined);
  assert.equal((await kernel.taskboard.get(one.id)).state, 'dead');
  const rest = grants.flat().slice(1);
  const done = await kernel.taskboard.completeBatch(rest.map((g) => ({ id: g.id, token: g.token })));
  assert.equal(done.length, 4);
  assert.equal((await kernel.taskboard.getGroup('g')).live, 0);
  await kernel.taskboard.revive(one.id);
  assert.equal((await kernel.taskboard.get(one.id)).state, 'open');
});

// The figure (p99 < 5 ms) is measured here and reported, not
// asserted: on a loaded 2-core machine a scheduler's tail is not the
// kernel's to promise (speed lives in measurements). What is asserted is
// that the loop answered throughout and every claim landed; the test after
// this one proves the loop never waits for the server.
test('the event loop answers /health while 8 callers run 1,000 claims (p99 reported)', needsPostgres, async (t) => {
  const url = schemaUrl(t, 'loop');
  const kernel = await openKernel(url, { maxConnections: 8 });
  t.after(() => kernel.close());
  const ids = Array.from({ length: 1000 }, (_, i) => `t${i}`);
  for (let i = 0; i < ids.length; i += 250) await kernel.taskboard.seed(ids.slice(i, i + 250).map((id) => ({ id })));
  // The eight workers started (each loads the component on its own thread).
  await Promise.all(Array.from({ length: 8 }, () => kernel.taskboard.get('t0')));
  assert.equal(kernel.workers, 8);
  const server = createServer((_, res) => res.end('ok'));
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(() => {
    server.closeAllConnections();
    server.close();
  });
  const { port } = server.address();
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  const health = () =>
    new Promise((resolve, reject) => {
      const start = performance.now();
      get({ host: '127.0.0.1', port, path: '/health', agent }, (res) => {
        res.on('error', reject);
        res.resume();
        res.on('end', () => resolve(performance.now() - start));
      }).on('error', reject);
    });
  // A request every 2 ms or so, as a load balancer's health checks, not a
  // flood that would take a core from the callers.
  let running = true;
  const samples = [];
  const prober = (async () => {
    while (running) {
      samples.push(await health());
      await new Promise((resolve) => setTimeout(resolve, 2));
    }
  })();
  let next = 0;
  const claimed = [];
  const callers = Array.from({ length: 8 }, async (_, w) => {
    while (next < ids.length) {
      const id = ids[next++];
      claimed.push((await kernel.taskboard.claim(id, `w${w}`, MINUTE)).id);
    }
  });
  const loop = monitorEventLoopDelay({ resolution: 1 });
  loop.enable();
  const started = performance.now();
  await Promise.all(callers);
  loop.disable();
  const seconds = (performance.now() - started) / 1000;
  running = false;
  await prober;
  agent.destroy();
  assert.equal(new Set(claimed).size, 1000);
  assert.ok(samples.length >= 50, `the prober got ${samples.length} answers`);
  samples.sort((a, b) => a - b);
  const p99 = samples[Math.floor(samples.length * 0.99)];
  t.diagnostic(`event loop delay p99 ${(loop.percentile(99) / 1e6).toFixed(2)} ms, max ${(loop.max / 1e6).toFixed(2)} ms`);
  t.diagnostic(`1,000 claims in ${seconds.toFixed(2)} s (${(1000 / seconds).toFixed(0)}/s); /health: ${samples.length} answers, p50 ${samples[samples.length >> 1].toFixed(2)} ms, p99 ${p99.toFixed(2)} ms`);
});

test('a call waiting on the server never holds the event loop', needsPostgres, async (t) => {
  const url = schemaUrl(t, 'wait');
  const schema = new URL(url.replace(/^postgres(ql)?:/, 'http:')).searchParams.getAll('schema').at(-1);
  const kernel = await openKernel(url, { connectionWait: 30_000 });
  t.after(() => kernel.close());
  await kernel.taskboard.seed([{ id: 'x' }]);
  const holder = new pg.Client({ connectionString: DSN });
  await holder.connect();
  t.after(() => holder.end());
  await holder.query('BEGIN');
  await holder.query("SELECT pg_advisory_xact_lock(hashtextextended($1 || '/tasks/x', 0))", [schema]);
  // The claim waits on the server for the lock; meanwhile the loop runs.
  let settled = false;
  const claim = kernel.taskboard.claim('x', 'w', MINUTE).finally(() => {
    settled = true;
  });
  let ticks = 0;
  while (ticks < 50) {
    await new Promise((resolve) => setImmediate(resolve));
    ticks += 1;
  }
  await new Promise((resolve) => setTimeout(resolve, 50));
  assert.equal(settled, false, 'the claim waits for the lock');
  // A blocking kernel on this thread would have answered none of these.
  assert.equal(ticks, 50);
  await holder.query('ROLLBACK');
  const won = await claim;
  assert.equal(won.fence, 1n);
});

test('bounded pools: a caller beyond maxConnections waits connectionWait, then storage', needsPostgres, async (t) => {
  const url = schemaUrl(t, 'pool');
  const schema = new URL(url.replace(/^postgres(ql)?:/, 'http:')).searchParams.getAll('schema').at(-1);
  const kernel = await openKernel(url, { maxConnections: 2, connectionWait: 300 });
  t.after(() => kernel.close());
  await kernel.taskboard.seed([{ id: 'a' }, { id: 'b' }, { id: 'c' }]);
  // A transaction outside the kernel holds the key locks of a and b.
  const holder = new pg.Client({ connectionString: DSN });
  await holder.connect();
  t.after(() => holder.end());
  await holder.query('BEGIN');
  await holder.query(
    "SELECT pg_advisory_xact_lock(hashtextextended($1 || '/tasks/' || k, 0)) FROM unnest($2::text[]) AS k",
    [schema, ['a', 'b']],
  );
  const blocked = [kernel.taskboard.claim('a', 'w', MINUTE), kernel.taskboard.claim('b', 'w', MINUTE)];
  // Both workers wait on the locks; a third caller finds none free.
  await assert.rejects(kernel.taskboard.claim('c', 'w', MINUTE), (e) => e.code === 'storage' && /no connection free within 300 ms/.test(e.message));
  // The lock waits are bounded by the same wait: busy, re-run, then storage.
  for (const r of await Promise.allSettled(blocked)) {
    assert.equal(r.status, 'rejected');
    assert.equal(r.reason.code, 'storage');
    assert.match(r.reason.message, /conflicts persisted/);
  }
  await holder.query('ROLLBACK');
  assert.equal((await kernel.taskboard.claim('a', 'w', MINUTE)).fence, 1n, 'nothing was written by the refused calls');
  assert.ok(kernel.workers <= 2);
});

/**
 * A TCP proxy to the server that cuts both connections once it has passed a
 * COMMIT on, in a thread of its own (the blocking kernel blocks this one).
 * `state[0]`: armed; `state[1]`: cuts so far; `state[2]`: milliseconds a
 * lone COMMIT or ROLLBACK (the end of a transaction that wrote nothing) is
 * held before it goes on, what follows it waiting behind it.
 */
async function commitCutter(t) {
  const { hostname, port } = new URL(DSN.replace(/^postgres(ql)?:/, 'http:'));
  const state = new Int32Array(new SharedArrayBuffer(12));
  const code = `
    const net = require('node:net');
    const { parentPort, workerData: { host, port, state } } = require('node:worker_threads');
    const server = net.createServer((client) => {
      const upstream = net.connect(port, host);
      let cutting = false;
      let queue = Promise.resolve();
      const lone = (chunk) => {
        const sql = chunk.length > 5 && chunk[0] === 0x51 ? chunk.subarray(5).toString() : '';
        return chunk.readInt32BE(1) === chunk.length - 1 && (sql === 'COMMIT\\0' || sql === 'ROLLBACK\\0');
      };
      client.on('data', (chunk) => {
        const hold = chunk.length > 5 && lone(chunk) ? Atomics.load(state, 2) : 0;
        queue = queue
          .then(() => hold > 0 && new Promise((resolve) => setTimeout(resolve, hold)))
          .then(() => upstream.write(chunk));
        if (chunk.includes('COMMIT\\0') && Atomics.compareExchange(state, 0, 1, 0) === 1) {
          Atomics.add(state, 1, 1);
          cutting = true;
        }
      });
      upstream.on('data', (chunk) => {
        // The server answered the COMMIT (its CommandComplete tag): it is
        // durable, and the client never hears so.
        if (cutting && chunk.includes('COMMIT\\0')) {
          client.destroy();
          upstream.destroy();
          return;
        }
        if (client.writable) client.write(chunk);
      });
      client.on('error', () => upstream.destroy());
      upstream.on('error', () => client.destroy());
      client.on('close', () => upstream.destroy());
    });
    server.listen(0, '127.0.0.1', () => parentPort.postMessage(server.address().port));
  `;
  const worker = new Worker(code, { eval: true, workerData: { host: hostname || '127.0.0.1', port: Number(port || 5432), state } });
  t.after(() => worker.terminate());
  const listening = await new Promise((resolve, reject) => {
    worker.once('message', resolve);
    worker.once('error', reject);
  });
  return {
    port: listening,
    arm: () => Atomics.store(state, 0, 1),
    cuts: () => Atomics.load(state, 1),
    slowQuietEnds: (ms) => Atomics.store(state, 2, ms),
  };
}

/**
 * A fresh schema, a blocking kernel on it directly and one through a new
 * `commitCutter` (plain: the proxy reads the protocol), both closed after
 * the test.
 */
async function throughProxy(t, label) {
  const url = schemaUrl(t, label);
  const proxy = await commitCutter(t);
  const { hostname, port } = new URL(DSN.replace(/^postgres(ql)?:/, 'http:'));
  const via = url.replace(`${hostname}:${port || 5432}`, `127.0.0.1:${proxy.port}`);
  assert.notEqual(via, url);
  const direct = await openKernel(url, { blocking: true });
  const proxied = await openKernel(`${via}&sslmode=disable`, { blocking: true });
  t.after(() => {
    direct.close();
    proxied.close();
  });
  return { proxy, direct, proxied };
}

test('an ambiguous COMMIT (the connection lost with it) is storage and never re-run', needsPostgres, async (t) => {
  const { proxy: cutter, direct, proxied } = await throughProxy(t, 'ambig');
  direct.taskboard.seed([{ id: 'x' }]);
  cutter.arm();
  assert.throws(() => proxied.taskboard.claim('x', 'w', MINUTE), (e) => e instanceof GakError && e.code === 'storage');
  assert.equal(cutter.cuts(), 1);
  // The COMMIT landed; a re-run would have met `taken` (or claimed again).
  const task = direct.taskboard.get('x');
  assert.equal(task.state, 'claimed');
  assert.equal(task.fence, 1n);
  // The next call reconnects.
  assert.throws(() => proxied.taskboard.claim('x', 'w', MINUTE), (e) => e.code === 'taken');
});

// COPY's rows cross the connection in a data exchange of their own that the
// lent handle does not speak: sent, FROM STDIN ended the connection (the
// call then `storage`) and TO STDOUT answered "ok" with the rows dropped.
// The guard refuses both up front (invalid-input), as the Rust and Python
// hosts' guards do; a COPY that names a server file is a statement like any.
test('a COPY through the connection is refused up front, and the call goes on', needsPostgres, async (t) => {
  for (const sql of ['COPY t FROM STDIN', 'copy (select 1) to stdout', '/* rows */ COPY "t" (a) TO\nSTDOUT', 'COPY t FROM stdin -- ;']) {
    assert.match(refusal(sql) ?? '', /COPY FROM STDIN \/ TO STDOUT refused/, sql);
  }
  for (const sql of ["COPY t FROM 'stdin'", `COPY "stdin" FROM '/tmp/rows.csv'`, "COPY t TO '/tmp/x' -- STDOUT", 'SELECT stdin FROM t', 'INSERT INTO t SELECT * FROM stdout']) {
    assert.equal(refusal(sql), undefined, sql);
  }
  const url = schemaUrl(t, 'copy');
  const kernel = await openKernel(url, { blocking: true });
  t.after(() => kernel.close());
  const schema = new URL(url.replace(/^postgres(ql)?:/, 'http:')).searchParams.get('schema');
  const refused = [];
  kernel.sideeffect.writeFenced('copy', 1n, (down) => {
    down.put('before', '1');
    for (const sql of [`COPY "${schema}".downstream FROM STDIN`, `COPY "${schema}".downstream TO STDOUT`, 'COPY (SELECT 1) TO STDOUT']) {
      try {
        down.query(sql);
      } catch (e) {
        refused.push(e);
      }
    }
    down.put('after', '1');
  });
  assert.equal(refused.length, 3);
  for (const e of refused) assert.ok(e instanceof GakError && e.code === 'invalid-input', String(e));
  assert.equal(kernel.sideeffect.sinkSeen('copy'), 1n);
  assert.deepEqual(kernel.withDownstream((down) => [down.get('before'), down.get('after')]), ['1', '1']);
});

// A call that read a task and wrote nothing has released the task's lock
// when it returns: a claimer that passes over held tasks (SPEC 10) may pass
// over only what an overlapping call holds. The proxy holds every lone
// COMMIT / ROLLBACK for 300 ms; a binding that answered before its end was
// through would leave the task locked after the call, and the claim below
// would find nothing.
test('a read-only call leaves no task held after it returns', needsPostgres, async (t) => {
  const { proxy, direct, proxied } = await throughProxy(t, 'quiet');
  direct.taskboard.seed([{ id: 't' }]);
  assert.equal(proxied.taskboard.get('t').state, 'open'); // the line and its statements, ready
  proxy.slowQuietEnds(300);
  const calls = {
    'a get': () => proxied.taskboard.get('t'),
    'a refused complete': () => assert.throws(() => proxied.taskboard.complete('t', '0123456789abcdef'), GakError),
  };
  for (const [what, call] of Object.entries(calls)) {
    call();
    const claimed = direct.taskboard.claimNext('w', MINUTE);
    assert.ok(claimed, `after ${what}, the open task was passed over: its lock outlived the call`);
    assert.equal(claimed.id, 't');
    direct.taskboard.release('t', claimed.token);
  }
  proxy.slowQuietEnds(0);
});

test('TLS follows sslmode as libpq reads it; verify-* trusts only the given roots', needsPostgres, async (t) => {
  const url = schemaUrl(t, 'tls');
  const [ssl] = await query('SELECT setting FROM pg_settings WHERE name = $1', ['ssl']);
  const plain = await openKernel(`${url}&sslmode=disable`, { blocking: true });
  plain.taskboard.seed([{ id: 'p' }]);
  plain.close();
  await assert.rejects(openKernel(`${url}&sslmode=sometimes`, { blocking: true }), (e) => e.code === 'storage' && e.message.includes('sslmode=sometimes'));
  await assert.rejects(openKernel(`${url}&sslmode=verify-full`, { blocking: true, }), (e) => e.code === 'storage' && e.message.includes('sslrootcert'));
  if (ssl.setting !== 'on') {
    t.diagnostic('the server does not offer TLS: only sslmode=disable and the refusals are checked');
    return;
  }
  const required = await openKernel(`${url}&sslmode=require`, { blocking: true });
  required.taskboard.seed([{ id: 'r' }]);
  required.close();
  // A self-signed certificate is not among the system's roots.
  await assert.rejects(
    openKernel(`${url}&sslmode=verify-ca&sslrootcert=system`, { blocking: true }),
    (e) => e.code === 'storage' && e.message.includes('cannot connect to PostgreSQL at'),
  );
  const snakeoil = '/etc/ssl/certs/ssl-cert-snakeoil.pem';
  const [cert] = await query('SELECT setting FROM pg_settings WHERE name = $1', ['ssl_cert_file']);
  if (cert.setting !== snakeoil || !existsSync(snakeoil)) {
    t.diagnostic(`the server's certificate is ${cert.setting}: the verified modes are checked only against the Debian snakeoil one`);
    return;
  }
  // Its own root: verify-ca accepts it; verify-full only under its name (localhost).
  const ca = await openKernel(`${url}&sslmode=verify-ca&sslrootcert=${snakeoil}`, { blocking: true });
  ca.taskboard.seed([{ id: 'c' }]);
  ca.close();
  await assert.rejects(
    openKernel(`${url.replace('127.0.0.1', '127.0.0.2')}&sslmode=verify-full&sslrootcert=${snakeoil}`, { blocking: true }),
    (e) => e.code === 'storage' && e.message.includes('cannot connect'),
  );
  if (url.includes('127.0.0.1')) {
    const full = await openKernel(`${url.replace('127.0.0.1', 'localhost')}&sslmode=verify-full&sslrootcert=${snakeoil}`, { blocking: true });
    assert.equal(full.taskboard.get('c').id, 'c');
    full.close();
  }
});

test('no message shows the password or the user information', needsPostgres, async () => {
  const secret = 'hunter2-Pa55';
  for (const url of [
    `postgres://alice:${secret}@127.0.0.1:1/test`,
    `postgres://alice:${secret}@127.0.0.1:1/test?sslmode=bogus`,
    `postgres://alice:${secret}@127.0.0.1:1/test?schema=Bad`,
    `postgres://alice:p@${secret}@127.0.0.1:1/test?connect_timeout=1`,
  ]) {
    for (const blocking of [true, false]) {
      await assert.rejects(openKernel(url, { blocking }), (e) => {
        assert.ok(e instanceof GakError && e.code === 'storage', String(e));
        for (const text of [e.message, e.stack, JSON.stringify(e)]) {
          assert.ok(!text.includes(secret) && !text.includes('alice:'), `${url}: ${text}`);
        }
        return true;
      });
    }
  }
});

test('clock=db judges expiry by the server\'s clock', needsPostgres, async (t) => {
  const url = schemaUrl(t, 'clock', '&clock=db');
  const kernel = await openKernel(url, { blocking: true });
  t.after(() => kernel.close());
  kernel.taskboard.seed([{ id: 'x' }]);
  const [now] = await query('SELECT (extract(epoch FROM clock_timestamp()) * 1000)::int8 AS ms');
  const won = kernel.taskboard.claim('x', 'w', MINUTE);
  const expires = won.until;
  assert.equal(typeof expires, 'bigint');
  assert.ok(expires >= BigInt(now.ms) + MINUTE && expires < BigInt(now.ms) + MINUTE + 60_000n, `${expires} vs ${now.ms}`);
});

test('a fenced sink body writes its own tables in the kernel\'s transaction (down.query), all or nothing', needsPostgres, async (t) => {
  const url = schemaUrl(t, 'sink');
  const schema = new URL(url.replace(/^postgres(ql)?:/, 'http:')).searchParams.getAll('schema').at(-1);
  const kernel = await openKernel(url, { blocking: true });
  t.after(() => kernel.close());
  const table = `"${schema}".app_rows`;
  kernel.withDownstream((down) => down.query(`CREATE TABLE ${table} (k text PRIMARY KEY, v int8 NOT NULL)`));
  kernel.sideeffect.writeFenced('r', 1n, (down) => {
    assert.equal(down.query(`INSERT INTO ${table} VALUES ($1, $2)`, ['a', 7n]).rowCount, 1);
    assert.deepEqual(down.query('SELECT $1::int + 1 AS n', [41]).rows, [{ n: 42 }]);
    // Transaction control, in any spelling, is refused before anything is sent.
    for (const sql of ['COMMIT', '-- note\rCOMMIT', 'SELECT 1;ROLLBACK;BEGIN', '/* /* */ */ end']) {
      assert.throws(() => down.query(sql), (e) => e instanceof GakError && e.code === 'invalid-input', sql);
    }
  });
  // A zombie's lower fence: refused, its body never runs.
  let ran = false;
  assert.throws(
    () => kernel.sideeffect.writeFenced('r', 0n, () => {
      ran = true;
    }),
    (e) => e.code === 'fence-stale',
  );
  assert.equal(ran, false);
  // A body that throws rolls back its rows with the fence.
  assert.throws(
    () =>
      kernel.sideeffect.writeFenced('r', 2n, (down) => {
        down.query(`INSERT INTO ${table} VALUES ($1, $2)`, ['b', 1]);
        throw new Error('nope');
      }),
    (e) => e.code === 'write-failed',
  );
  const rows = await query(`SELECT k, v FROM ${table} ORDER BY k`);
  assert.deepEqual(rows, [{ k: 'a', v: '7' }]);
  assert.equal(kernel.sideeffect.sinkSeen('r'), 1n);
  // A statement error the body swallowed ends the call with storage: nothing lands.
  assert.throws(
    () =>
      kernel.sideeffect.writeFenced('r', 3n, (down) => {
        down.query(`INSERT INTO ${table} VALUES ($1, $2)`, ['c', 1]);
        try {
          down.query(`INSERT INTO ${table} VALUES ($1, $2)`, ['a', 1]);
        } catch (e) {
          assert.equal(e.code, '23505');
        }
      }),
    (e) => e.code === 'storage',
  );
  assert.deepEqual(await query(`SELECT k FROM ${table} ORDER BY k`), [{ k: 'a' }]);
  assert.equal(kernel.sideeffect.sinkSeen('r'), 1n);
  // The handle dies with its body.
  let kept;
  kernel.sideeffect.writeFenced('r', 4n, (down) => {
    kept = down.postgres;
  });
  assert.throws(() => kept.query('SELECT 1'), (e) => e.code === 'invalid-input');
});

test('the queue Worker and runEffect take the kernel of promises', needsPostgres, async (t) => {
  const url = schemaUrl(t, 'promised');
  const kernel = await openKernel(url, { maxConnections: 4 });
  t.after(() => kernel.close());
  await kernel.taskboard.seed(Array.from({ length: 12 }, (_, i) => ({ id: `j${i}`, maxAttempts: 1 })));
  const seen = [];
  const worker = new QueueWorker(kernel, { agent: 'pw', batch: 5, concurrency: 3, ttl: 60_000 });
  const worked = await worker.runUntilIdle(async (task) => {
    seen.push(task.id);
    if (task.id === 'j3') throw new Error('boom');
  });
  assert.equal(seen.length, 12);
  assert.equal(worked.completed, 11);
  assert.equal(worked.failed, 1);
  assert.equal((await kernel.taskboard.get('j3')).state, 'dead');
  const mail = { key: 'mail/1', resource: 'smtp' };
  const sent = await kernel.runEffect(mail, 30_000n, async () => new TextEncoder().encode('id-1'));
  assert.equal(sent.tag, 'applied');
  const again = await kernel.runEffect(mail, 30_000n, () => {
    throw new Error('never called');
  });
  assert.equal(again.tag, 'replayed');
});

test('writeFenced and withDownstream on the kernel of promises: an async body on this thread, its statements in the worker\'s transaction', needsPostgres, async (t) => {
  const url = schemaUrl(t, 'asyncsink');
  const schema = new URL(url.replace(/^postgres(ql)?:/, 'http:')).searchParams.getAll('schema').at(-1);
  const kernel = await openKernel(url, { maxConnections: 2 });
  t.after(() => kernel.close());
  const table = `"${schema}".app_rows`;
  await kernel.withDownstream((down) => down.query(`CREATE TABLE ${table} (k text PRIMARY KEY, v int8 NOT NULL)`));
  await kernel.sideeffect.writeFenced('r', 1n, async (down) => {
    assert.equal((await down.query(`INSERT INTO ${table} VALUES ($1, $2)`, ['a', 1])).rowCount, 1);
    await down.put('seen/a', 'yes');
    assert.equal(await down.get('seen/a'), 'yes');
    await assert.rejects(down.query('COMMIT'), (e) => e instanceof GakError && e.code === 'invalid-input');
    // A call into the kernel from the body is refused, not deadlocked.
    await assert.rejects(kernel.sideeffect.sinkSeen('r'), (e) => e.code === 'invalid-input');
  });
  assert.equal(await kernel.sideeffect.sinkSeen('r'), 1n);
  await assert.rejects(kernel.sideeffect.writeFenced('r', 0n, async () => {}), (e) => e.code === 'fence-stale');
  const boom = new Error('nope');
  await assert.rejects(
    kernel.sideeffect.writeFenced('r', 2n, async (down) => {
      await down.query(`INSERT INTO ${table} VALUES ($1, $2)`, ['b', 2]);
      throw boom;
    }),
    (e) => e.code === 'write-failed' && e.cause === boom,
  );
  await assert.rejects(
    kernel.sideeffect.writeFenced('r', 3n, async (down) => {
      await down.query(`INSERT INTO ${table} VALUES ($1, $2)`, ['c', 3]);
      await down.query(`INSERT INTO ${table} VALUES ($1, $2)`, ['a', 3]).catch((e) => assert.equal(e.code, '23505'));
    }),
    (e) => e.code === 'storage',
  );
  const rows = await kernel.withDownstream(async (down) => (await down.query(`SELECT k FROM ${table} ORDER BY k`)).rows);
  assert.deepEqual(rows, [{ k: 'a' }]);
  assert.equal(await kernel.withDownstream((down) => down.get('seen/a')), 'yes');
  assert.equal(await kernel.sideeffect.sinkSeen('r'), 1n);
  // withDownstream rethrows the body's own error.
  const mine = new Error('mine');
  await assert.rejects(kernel.withDownstream(() => {
    throw mine;
  }), (e) => e === mine);
});

test('statement_timeout_ms bounds every statement server-side: a call stuck on a lock ends with storage', needsPostgres, async (t) => {
  const url = schemaUrl(t, 'stmt', '&statement_timeout_ms=100');
  const schema = new URL(url.replace(/^postgres(ql)?:/, 'http:')).searchParams.getAll('schema').at(-1);
  const kernel = await openKernel(url, { blocking: true, connectionWait: 60_000 });
  t.after(() => kernel.close());
  kernel.taskboard.seed([{ id: 'x' }]);
  // The lock holder runs on a thread of its own: this one blocks in the call.
  const holder = new Worker(
    `
    const pg = require(${JSON.stringify(new URL('../node_modules/pg/lib/index.js', import.meta.url).pathname)});
    const { parentPort, workerData: { dsn, schema } } = require('node:worker_threads');
    (async () => {
      const c = new pg.Client({ connectionString: dsn });
      await c.connect();
      await c.query('BEGIN');
      await c.query("SELECT pg_advisory_xact_lock(hashtextextended($1 || '/tasks/x', 0))", [schema]);
      parentPort.postMessage('held');
      parentPort.once('message', async () => { await c.query('ROLLBACK'); await c.end(); parentPort.postMessage('gone'); });
    })();
    `,
    { eval: true, workerData: { dsn: DSN, schema } },
  );
  await new Promise((resolve) => holder.once('message', resolve));
  assert.throws(
    () => kernel.taskboard.claim('x', 'w', MINUTE),
    (e) => e instanceof GakError && e.code === 'storage' && /57014|statement timeout/.test(e.message),
  );
  holder.postMessage('release');
  await new Promise((resolve) => holder.once('message', resolve));
  await holder.terminate();
  assert.equal(kernel.taskboard.claim('x', 'w', MINUTE).fence, 1n);
  assert.throws(() => new PostgresBackend(`${url}x`, { create: false }), /statement_timeout_ms=100x/);
});

test('many keys (gak_read_many_v1 / gak_write_many_v1) read and write as the same keys one at a time do', needsPostgres, (t) => {
  const backend = new PostgresBackend(schemaUrl(t, 'bulk'));
  const session = backend.session();
  const held = new Map();
  const value = (table, key, n) => (table === 'downstream' ? `${table}:${key}:${n}` : JSON.stringify({ v: `${table}:${key}:${n}` }));
  const norm = (table, v) => (v === undefined || table === 'downstream' ? v : JSON.parse(v));
  const apply = (txn, changes) => {
    assert.ok(changes.length >= POSTGRES_MANY_KEYS_FROM);
    txn.write(changes.map(([table, key, v]) => ({ table, key, value: v ?? undefined })));
    for (const [table, key, v] of changes) {
      if (v === null) held.delete(`${table}/${key}`);
      else held.set(`${table}/${key}`, v);
    }
  };
  const asked = [
    ['meta', 'n07'], ['tasks', 'k00'], ['tasks', 'k07'], ['indexes', 'k03'], ['downstream', 'k09'], ['downstream', 'k08'],
    ['tasks', 'gone'], ['indexes', 'k09'], ['meta', 'k00'], ['snapshots', 'k00'], ['tasks', 'k07'], ['meta', 'n00'],
    ['indexes', 'k00'], ['tasks', 'k04'], ['tasks', 'k05'], ['meta', 'n09'], ['downstream', 'k00'], ['outcomes', 'x'],
  ];
  assert.ok(asked.length >= POSTGRES_MANY_KEYS_FROM);
  const check = (txn, what) => {
    const together = txn.read(asked, []).values;
    assert.deepEqual(
      together.map((v, i) => norm(asked[i][0], v)),
      asked.map(([table, key]) => norm(table, held.get(`${table}/${key}`))),
      what,
    );
    asked.forEach((key, i) => assert.deepEqual(txn.read([key], []).values, [together[i]], `${what}: ${key}`));
  };
  try {
    let txn = session.begin();
    apply(txn, ['tasks', 'indexes', 'meta', 'downstream'].flatMap((table) =>
      Array.from({ length: 10 }, (_, i) => [table, `k0${i}`, value(table, `k0${i}`, 0)])));
    txn.commit();
    const second = [];
    for (let i = 0; i < 5; i++) second.push(['tasks', `k0${i}`, null], ['indexes', `k0${i}`, value('indexes', `k0${i}`, 1)]);
    for (let i = 0; i < 10; i++) second.push(['meta', `n0${i}`, value('meta', `n0${i}`, 1)]);
    second.push(['downstream', 'k09', null], ['tasks', 'gone', null]);
    txn = session.begin();
    apply(txn, second);
    txn.commit();
    txn = session.begin();
    check(txn, 'committed');
    const own = [];
    for (let i = 5; i < 10; i++) {
      own.push(['tasks', `k0${i}`, null], ['meta', `n0${i}`, value('meta', `n0${i}`, 2)],
        ['downstream', `k0${i}`, value('downstream', `k0${i}`, 2)], ['snapshots', `k0${i - 5}`, value('snapshots', `k0${i - 5}`, 2)]);
    }
    apply(txn, own);
    check(txn, 'own writes');
    txn.rollback();

    // With the per-key statements broken, many keys still go through (the
    // `_many` functions carry them); one key fewer does not.
    const broken = { name: 'gak_broken', text: 'SELECT gak_no_such_function($1, $2, $3)' };
    session.sql = { ...session.sql, read: broken, write: broken };
    const n = POSTGRES_MANY_KEYS_FROM;
    const keys = Array.from({ length: n }, (_, i) => ['tasks', `m${String(i).padStart(2, '0')}`]);
    txn = session.begin();
    txn.write(keys.map(([table, key], i) => ({ table, key, value: JSON.stringify({ i }) })));
    assert.deepEqual(txn.read(keys, []).values.map((v) => JSON.parse(v).i), keys.map((_, i) => i));
    assert.throws(() => txn.read(keys.slice(1), []), /gak_no_such_function/);
    txn.rollback();
  } finally {
    session.close();
  }
});

/** The I/O thread's way and the direct way, as each URL of the local server takes it. */
async function transports(t) {
  const url = schemaUrl(t, 'wire');
  const [ssl] = await query('SELECT setting FROM pg_settings WHERE name = $1', ['ssl']);
  const ways = [{ name: 'plain (direct)', url: `${url}&sslmode=disable`, direct: true }];
  if (ssl.setting === 'on') ways.push({ name: 'TLS (through the I/O thread)', url: `${url}&sslmode=require`, direct: false });
  else t.diagnostic('the server does not offer TLS: the I/O thread\'s way is not checked here');
  return ways;
}

test('a plain connection is read and written by its caller thread, a TLS one through the I/O thread, with the same answers', needsPostgres, async (t) => {
  for (const way of await transports(t)) {
    const backend = new PostgresBackend(way.url);
    const line = backend.connect();
    try {
      assert.equal(line.direct, way.direct, way.name);
      // Several statements, named and not, pipelined: node-postgres's answers (types parsed, arrays as arrays).
      const first = line.call(
        {
          op: 'run',
          statements: [
            { text: 'BEGIN' },
            { text: 'SELECT $1::text[] AS a, $2::int AS n, $3::bytea AS b', values: [['x', null, 'y'], 7, Buffer.from([1, 2])], name: 'gak_test_probe' },
            { text: 'SELECT $1::text AS t', values: ['again'], extended: true, objects: true },
            { text: 'COMMIT' },
          ],
        },
        10_000,
      );
      assert.equal(first.status, 'I', way.name);
      assert.deepEqual(first.results.map((r) => r.command), ['BEGIN', 'SELECT', 'SELECT', 'COMMIT']);
      assert.deepEqual(first.results[1].rows, [[['x', null, 'y'], 7, Buffer.from([1, 2])]]);
      assert.deepEqual(first.results[2].rows, [{ t: 'again' }]);
      // The named statement again (parsed once per connection), then an
      // error: the results stop at it, the transaction is failed.
      const second = line.call(
        {
          op: 'run',
          statements: [
            { text: 'BEGIN' },
            { text: 'SELECT $1::text[] AS a, $2::int AS n, $3::bytea AS b', values: [[], 1, null], name: 'gak_test_probe' },
            { text: 'SELECT 1/0' },
            { text: 'SELECT 1' },
          ],
        },
        10_000,
      );
      assert.equal(second.status, 'E', way.name);
      assert.equal(second.results.length, 3);
      assert.deepEqual(second.results[1].rows, [[[], 1, null]]);
      assert.equal(second.results[2].error.code, '22012');
      // A quiet request's answer is read ahead of the next one's; an
      // answer larger than any buffer of the way (300,000 bytes) whole.
      line.post({ op: 'run', statements: [{ text: 'ROLLBACK' }] });
      const big = line.call({ op: 'run', statements: [{ text: "SELECT repeat('x', 300000) AS big" }] }, 10_000);
      assert.equal(big.status, 'I');
      assert.equal(big.results[0].rows[0][0].length, 300_000);
      // The server ends the connection: the caller is told it is gone.
      const [{ pid }] = line.call({ op: 'run', statements: [{ text: 'SELECT pg_backend_pid() AS pid', extended: true, objects: true }] }, 10_000).results[0].rows;
      await query('SELECT pg_terminate_backend($1)', [pid]);
      const after = line.call({ op: 'run', statements: [{ text: 'SELECT 1' }] }, 10_000);
      assert.equal(after.gone, true, `${way.name}: ${JSON.stringify(after)}`);
    } finally {
      line.close();
    }
  }
});

test('the kernel\'s statements share one Sync: one ReadyForQuery for the run, an error skips the rest of it', needsPostgres, async (t) => {
  // The encoding: three chained statements end with one Sync; a statement
  // not marked `chain` (a body's) and a simple Query keep their own.
  const sync = Buffer.from([0x53, 0, 0, 0, 4]);
  const syncsIn = (bytes) => {
    let n = 0;
    for (let at = bytes.indexOf(sync); at >= 0; at = bytes.indexOf(sync, at + 1)) n += 1;
    return n;
  };
  const chained = (text, values) => ({ text, values, extended: true, chain: true });
  const run = new Wire().encode([chained('SELECT 1'), chained('SELECT 2'), chained('SELECT 3')]);
  assert.equal(run.plan.syncs, 1);
  assert.equal(syncsIn(run.bytes), 1);
  const mixed = new Wire().encode([chained('SELECT 1'), { text: 'SELECT $1::int', values: [2] }, chained('SELECT 3'), { text: 'COMMIT' }]);
  assert.equal(mixed.plan.syncs, 4);
  assert.equal(syncsIn(mixed.bytes), 3); // the simple Query is its own end
  for (const way of await transports(t)) {
    const backend = new PostgresBackend(way.url);
    const line = backend.connect();
    try {
      const named = (name, text, values) => ({ name, text, values, chain: true });
      const failed = line.call(
        {
          op: 'run',
          statements: [
            { text: 'BEGIN' },
            named('gak_test_chain_a', 'SELECT $1::int AS a', [1]),
            named('gak_test_chain_b', 'SELECT 1 / $1::int AS b', [0]),
            named('gak_test_chain_c', 'SELECT $1::text AS c', ['skipped']),
            named('gak_test_chain_d', 'SELECT $1::text AS d', ['skipped too']),
          ],
        },
        10_000,
      );
      assert.equal(failed.status, 'E', way.name);
      assert.equal(failed.results.length, 3, way.name);
      assert.deepEqual(failed.results[1].rows, [[1]]);
      assert.equal(failed.results[2].error.code, '22012');
      line.call({ op: 'run', statements: [{ text: 'ROLLBACK' }] }, 10_000);
      // The skipped statement's Parse never ran: it is parsed again, not
      // bound to a statement the server does not have.
      const again = line.call({ op: 'run', statements: [named('gak_test_chain_c', 'SELECT $1::text AS c', ['parsed']), named('gak_test_chain_a', 'SELECT $1::int AS a', [2])] }, 10_000);
      assert.equal(again.status, 'I', way.name);
      assert.deepEqual(again.results.map((r) => r.rows), [[['parsed']], [[2]]], way.name);
      // A quiet run's one ReadyForQuery is skipped ahead of the next answer.
      line.post({ op: 'run', statements: [named('gak_test_chain_a', 'SELECT $1::int AS a', [3]), named('gak_test_chain_c', 'SELECT $1::text AS c', ['quiet'])] });
      const next = line.call({ op: 'run', statements: [{ text: 'SELECT 4 AS d' }] }, 10_000);
      assert.deepEqual(next.results[0].rows, [[4]], way.name);
    } finally {
      line.close();
    }
  }
});
