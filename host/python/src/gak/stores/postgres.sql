-- gak's PostgreSQL schema and its five functions, shared by every host that
-- binds PostgreSQL (Rust `host/rust/src/store/postgres`, Python
-- `host/python/src/gak/stores/postgres.py`, JavaScript
-- `host/js/src/store/postgres.js`; see `host/HOSTS.md`).
--
-- @schema@ stands for the schema's name, validated by the host before it is
-- put here ([a-z_][a-z0-9_]{0,62}, not pg_*): never data. Hosts run this
-- whole file in one transaction after `SELECT pg_advisory_xact_lock(7135862)`
-- (which serializes concurrent set-ups), every time they open the schema:
-- each statement is idempotent. The functions are versioned by name
-- (`_v1`): a definition, once released, never changes, so hosts of
-- different versions can share one schema.
--
-- Kernel tables hold the component's JSON records (jsonb, readable with
-- psql); `downstream` holds whatever fenced sink bodies write (text). Keys
-- are COLLATE "C": byte order, as every binding range-reads.
CREATE SCHEMA IF NOT EXISTS "@schema@";
CREATE TABLE IF NOT EXISTS "@schema@"."snapshots" (key text COLLATE "C" PRIMARY KEY, value jsonb NOT NULL);
CREATE TABLE IF NOT EXISTS "@schema@"."outcomes" (key text COLLATE "C" PRIMARY KEY, value jsonb NOT NULL);
CREATE TABLE IF NOT EXISTS "@schema@"."actions" (key text COLLATE "C" PRIMARY KEY, value jsonb NOT NULL);
CREATE TABLE IF NOT EXISTS "@schema@"."resources" (key text COLLATE "C" PRIMARY KEY, value jsonb NOT NULL);
CREATE TABLE IF NOT EXISTS "@schema@"."sinks" (key text COLLATE "C" PRIMARY KEY, value jsonb NOT NULL);
CREATE TABLE IF NOT EXISTS "@schema@"."tasks" (key text COLLATE "C" PRIMARY KEY, value jsonb NOT NULL);
CREATE TABLE IF NOT EXISTS "@schema@"."indexes" (key text COLLATE "C" PRIMARY KEY, value jsonb NOT NULL);
CREATE TABLE IF NOT EXISTS "@schema@"."meta" (key text COLLATE "C" PRIMARY KEY, value jsonb NOT NULL);
CREATE TABLE IF NOT EXISTS "@schema@"."downstream" (key text COLLATE "C" PRIMARY KEY, value text NOT NULL);

-- Read keys of any tables, in one statement: lock every key first (a
-- transaction-scoped advisory lock per key, named '<schema>/<table>/<key>'
-- and hashed by the server, so every host locks the same 64-bit id; all of
-- them in lock-id order, which keeps deadlocks rare; a lock also covers a
-- key that has no row yet), then read them in statements of their own: in a
-- VOLATILE function under READ COMMITTED every statement takes a fresh
-- snapshot, so the read sees the commit of the lock's previous holder.
-- Answers one element per key, in order (NULL: no row); with `clock`, one
-- element more: the server's clock_timestamp() in ms since the Unix epoch,
-- read after the locks.
CREATE OR REPLACE FUNCTION "@schema@".gak_read_v1(tables text[], keys text[], clock boolean)
RETURNS text[] LANGUAGE plpgsql VOLATILE AS $fn$
-- One plain statement per key, chosen by its table (a key is read by its
-- primary key): measured on the server, 2 keys in ~27 µs, where one
-- statement over all of them (unnest, a CASE of per-table subqueries,
-- array_agg) took ~55-65 µs even with a generic plan, and ~130 µs with the
-- custom plan PostgreSQL picks for array parameters.
DECLARE
  found text[] := '{}';
  v text;
BEGIN
  PERFORM pg_advisory_xact_lock(l.h)
     FROM (SELECT DISTINCT hashtextextended('@schema@/' || x.t || '/' || x.k, 0) AS h
             FROM unnest(tables, keys) AS x(t, k)) AS l
    ORDER BY l.h;
  FOR i IN 1 .. coalesce(array_length(keys, 1), 0) LOOP
    CASE tables[i]
      WHEN 'snapshots' THEN SELECT value::text INTO v FROM "@schema@"."snapshots" WHERE key = keys[i];
      WHEN 'outcomes' THEN SELECT value::text INTO v FROM "@schema@"."outcomes" WHERE key = keys[i];
      WHEN 'actions' THEN SELECT value::text INTO v FROM "@schema@"."actions" WHERE key = keys[i];
      WHEN 'resources' THEN SELECT value::text INTO v FROM "@schema@"."resources" WHERE key = keys[i];
      WHEN 'sinks' THEN SELECT value::text INTO v FROM "@schema@"."sinks" WHERE key = keys[i];
      WHEN 'tasks' THEN SELECT value::text INTO v FROM "@schema@"."tasks" WHERE key = keys[i];
      WHEN 'indexes' THEN SELECT value::text INTO v FROM "@schema@"."indexes" WHERE key = keys[i];
      WHEN 'meta' THEN SELECT value::text INTO v FROM "@schema@"."meta" WHERE key = keys[i];
      WHEN 'downstream' THEN SELECT value INTO v FROM "@schema@"."downstream" WHERE key = keys[i];
    END CASE;
    found := found || v;
  END LOOP;
  IF clock THEN
    found := found || ((extract(epoch FROM clock_timestamp()) * 1000)::int8)::text;
  END IF;
  RETURN found;
END
$fn$;

-- Probe keys of any tables, in one statement (store.try-read, SPEC 10's
-- skip-locked claiming): for each key, try its advisory lock (the same id
-- gak_read_v1 locks) without waiting; a key whose lock another transaction
-- holds is answered held (and neither read nor locked), the others are
-- locked and read as gak_read_v1 reads them. A lock this transaction holds
-- already is granted again. Answers one element per key in each array, in
-- order (vals: NULL for no row, or for a held key).
CREATE OR REPLACE FUNCTION "@schema@".gak_try_read_v1(tables text[], keys text[], OUT held boolean[], OUT vals text[])
LANGUAGE plpgsql VOLATILE AS $fn$
DECLARE
  v text;
BEGIN
  held := '{}';
  vals := '{}';
  FOR i IN 1 .. coalesce(array_length(keys, 1), 0) LOOP
    IF NOT pg_try_advisory_xact_lock(hashtextextended('@schema@/' || tables[i] || '/' || keys[i], 0)) THEN
      held := held || true;
      vals := vals || NULL::text;
      CONTINUE;
    END IF;
    CASE tables[i]
      WHEN 'snapshots' THEN SELECT value::text INTO v FROM "@schema@"."snapshots" WHERE key = keys[i];
      WHEN 'outcomes' THEN SELECT value::text INTO v FROM "@schema@"."outcomes" WHERE key = keys[i];
      WHEN 'actions' THEN SELECT value::text INTO v FROM "@schema@"."actions" WHERE key = keys[i];
      WHEN 'resources' THEN SELECT value::text INTO v FROM "@schema@"."resources" WHERE key = keys[i];
      WHEN 'sinks' THEN SELECT value::text INTO v FROM "@schema@"."sinks" WHERE key = keys[i];
      WHEN 'tasks' THEN SELECT value::text INTO v FROM "@schema@"."tasks" WHERE key = keys[i];
      WHEN 'indexes' THEN SELECT value::text INTO v FROM "@schema@"."indexes" WHERE key = keys[i];
      WHEN 'meta' THEN SELECT value::text INTO v FROM "@schema@"."meta" WHERE key = keys[i];
      WHEN 'downstream' THEN SELECT value INTO v FROM "@schema@"."downstream" WHERE key = keys[i];
    END CASE;
    held := held || false;
    vals := vals || v;
  END LOOP;
END
$fn$;

-- Apply a write set in one statement: lock every key (as gak_read_v1 does;
-- free for a key this transaction already locked), then delete each key
-- whose value is NULL and upsert the others, one plain statement per key
-- (every key appears at most once; ~75 µs for a claim's 3 keys on the
-- server, where per-table statements over the unnested arrays took ~130 µs
-- and more).
CREATE OR REPLACE FUNCTION "@schema@".gak_write_v1(tables text[], keys text[], vals text[])
RETURNS void LANGUAGE plpgsql VOLATILE AS $fn$
BEGIN
  PERFORM pg_advisory_xact_lock(l.h)
     FROM (SELECT DISTINCT hashtextextended('@schema@/' || x.t || '/' || x.k, 0) AS h
             FROM unnest(tables, keys) AS x(t, k)) AS l
    ORDER BY l.h;
  FOR i IN 1 .. coalesce(array_length(keys, 1), 0) LOOP
    IF vals[i] IS NULL THEN
      CASE tables[i]
        WHEN 'snapshots' THEN DELETE FROM "@schema@"."snapshots" WHERE key = keys[i];
        WHEN 'outcomes' THEN DELETE FROM "@schema@"."outcomes" WHERE key = keys[i];
        WHEN 'actions' THEN DELETE FROM "@schema@"."actions" WHERE key = keys[i];
        WHEN 'resources' THEN DELETE FROM "@schema@"."resources" WHERE key = keys[i];
        WHEN 'sinks' THEN DELETE FROM "@schema@"."sinks" WHERE key = keys[i];
        WHEN 'tasks' THEN DELETE FROM "@schema@"."tasks" WHERE key = keys[i];
        WHEN 'indexes' THEN DELETE FROM "@schema@"."indexes" WHERE key = keys[i];
        WHEN 'meta' THEN DELETE FROM "@schema@"."meta" WHERE key = keys[i];
        WHEN 'downstream' THEN DELETE FROM "@schema@"."downstream" WHERE key = keys[i];
      END CASE;
    ELSE
      CASE tables[i]
        WHEN 'snapshots' THEN INSERT INTO "@schema@"."snapshots" (key, value) VALUES (keys[i], vals[i]::jsonb)
          ON CONFLICT (key) DO UPDATE SET value = excluded.value;
        WHEN 'outcomes' THEN INSERT INTO "@schema@"."outcomes" (key, value) VALUES (keys[i], vals[i]::jsonb)
          ON CONFLICT (key) DO UPDATE SET value = excluded.value;
        WHEN 'actions' THEN INSERT INTO "@schema@"."actions" (key, value) VALUES (keys[i], vals[i]::jsonb)
          ON CONFLICT (key) DO UPDATE SET value = excluded.value;
        WHEN 'resources' THEN INSERT INTO "@schema@"."resources" (key, value) VALUES (keys[i], vals[i]::jsonb)
          ON CONFLICT (key) DO UPDATE SET value = excluded.value;
        WHEN 'sinks' THEN INSERT INTO "@schema@"."sinks" (key, value) VALUES (keys[i], vals[i]::jsonb)
          ON CONFLICT (key) DO UPDATE SET value = excluded.value;
        WHEN 'tasks' THEN INSERT INTO "@schema@"."tasks" (key, value) VALUES (keys[i], vals[i]::jsonb)
          ON CONFLICT (key) DO UPDATE SET value = excluded.value;
        WHEN 'indexes' THEN INSERT INTO "@schema@"."indexes" (key, value) VALUES (keys[i], vals[i]::jsonb)
          ON CONFLICT (key) DO UPDATE SET value = excluded.value;
        WHEN 'meta' THEN INSERT INTO "@schema@"."meta" (key, value) VALUES (keys[i], vals[i]::jsonb)
          ON CONFLICT (key) DO UPDATE SET value = excluded.value;
        WHEN 'downstream' THEN INSERT INTO "@schema@"."downstream" (key, value) VALUES (keys[i], vals[i])
          ON CONFLICT (key) DO UPDATE SET value = excluded.value;
      END CASE;
    END IF;
  END LOOP;
END
$fn$;

-- gak_read_v1 for many keys (a batch's): the same locks and the same
-- answer, the keys read by one join per table instead of one statement per
-- key (a `complete-batch` of 100 reads its 100 task records in one
-- statement). A host MAY send either for any number of keys; the Rust host
-- sends this one from 16 keys (`MANY_AT` in
-- host/rust/src/store/postgres/session.rs, where the figures are).
CREATE OR REPLACE FUNCTION "@schema@".gak_read_many_v1(tables text[], keys text[], clock boolean)
RETURNS text[] LANGUAGE plpgsql VOLATILE AS $fn$
DECLARE
  found text[] := array_fill(NULL::text, ARRAY[coalesce(array_length(keys, 1), 0)]);
  r record;
BEGIN
  PERFORM pg_advisory_xact_lock(l.h)
     FROM (SELECT DISTINCT hashtextextended('@schema@/' || x.t || '/' || x.k, 0) AS h
             FROM unnest(tables, keys) AS x(t, k)) AS l
    ORDER BY l.h;
  FOR r IN
    SELECT x.i, s.value::text AS value FROM unnest(tables, keys) WITH ORDINALITY AS x(t, k, i)
      JOIN "@schema@"."snapshots" s ON s.key = x.k WHERE x.t = 'snapshots'
    UNION ALL
    SELECT x.i, s.value::text AS value FROM unnest(tables, keys) WITH ORDINALITY AS x(t, k, i)
      JOIN "@schema@"."outcomes" s ON s.key = x.k WHERE x.t = 'outcomes'
    UNION ALL
    SELECT x.i, s.value::text AS value FROM unnest(tables, keys) WITH ORDINALITY AS x(t, k, i)
      JOIN "@schema@"."actions" s ON s.key = x.k WHERE x.t = 'actions'
    UNION ALL
    SELECT x.i, s.value::text AS value FROM unnest(tables, keys) WITH ORDINALITY AS x(t, k, i)
      JOIN "@schema@"."resources" s ON s.key = x.k WHERE x.t = 'resources'
    UNION ALL
    SELECT x.i, s.value::text AS value FROM unnest(tables, keys) WITH ORDINALITY AS x(t, k, i)
      JOIN "@schema@"."sinks" s ON s.key = x.k WHERE x.t = 'sinks'
    UNION ALL
    SELECT x.i, s.value::text AS value FROM unnest(tables, keys) WITH ORDINALITY AS x(t, k, i)
      JOIN "@schema@"."tasks" s ON s.key = x.k WHERE x.t = 'tasks'
    UNION ALL
    SELECT x.i, s.value::text AS value FROM unnest(tables, keys) WITH ORDINALITY AS x(t, k, i)
      JOIN "@schema@"."indexes" s ON s.key = x.k WHERE x.t = 'indexes'
    UNION ALL
    SELECT x.i, s.value::text AS value FROM unnest(tables, keys) WITH ORDINALITY AS x(t, k, i)
      JOIN "@schema@"."meta" s ON s.key = x.k WHERE x.t = 'meta'
    UNION ALL
    SELECT x.i, s.value AS value FROM unnest(tables, keys) WITH ORDINALITY AS x(t, k, i)
      JOIN "@schema@"."downstream" s ON s.key = x.k WHERE x.t = 'downstream'
  LOOP
    found[r.i] := r.value;
  END LOOP;
  IF clock THEN
    found := found || ((extract(epoch FROM clock_timestamp()) * 1000)::int8)::text;
  END IF;
  RETURN found;
END
$fn$;

-- gak_write_v1 for many keys (a batch's write set; the Rust host's from 16
-- keys): the same locks and the same effect, each table's deletes and upserts as one
-- statement over the arrays instead of one statement per key (every key
-- appears at most once, as for gak_write_v1).
CREATE OR REPLACE FUNCTION "@schema@".gak_write_many_v1(tables text[], keys text[], vals text[])
RETURNS void LANGUAGE plpgsql VOLATILE AS $fn$
DECLARE
  tb text;
BEGIN
  PERFORM pg_advisory_xact_lock(l.h)
     FROM (SELECT DISTINCT hashtextextended('@schema@/' || x.t || '/' || x.k, 0) AS h
             FROM unnest(tables, keys) AS x(t, k)) AS l
    ORDER BY l.h;
  FOR tb IN SELECT DISTINCT x.t FROM unnest(tables) AS x(t) LOOP
    CASE tb
      WHEN 'snapshots' THEN
        DELETE FROM "@schema@"."snapshots" s USING unnest(tables, keys, vals) AS x(t, k, v)
         WHERE x.t = 'snapshots' AND x.v IS NULL AND s.key = x.k;
        INSERT INTO "@schema@"."snapshots" (key, value)
          SELECT x.k, x.v::jsonb FROM unnest(tables, keys, vals) AS x(t, k, v)
           WHERE x.t = 'snapshots' AND x.v IS NOT NULL
          ON CONFLICT (key) DO UPDATE SET value = excluded.value;
      WHEN 'outcomes' THEN
        DELETE FROM "@schema@"."outcomes" s USING unnest(tables, keys, vals) AS x(t, k, v)
         WHERE x.t = 'outcomes' AND x.v IS NULL AND s.key = x.k;
        INSERT INTO "@schema@"."outcomes" (key, value)
          SELECT x.k, x.v::jsonb FROM unnest(tables, keys, vals) AS x(t, k, v)
           WHERE x.t = 'outcomes' AND x.v IS NOT NULL
          ON CONFLICT (key) DO UPDATE SET value = excluded.value;
      WHEN 'actions' THEN
        DELETE FROM "@schema@"."actions" s USING unnest(tables, keys, vals) AS x(t, k, v)
         WHERE x.t = 'actions' AND x.v IS NULL AND s.key = x.k;
        INSERT INTO "@schema@"."actions" (key, value)
          SELECT x.k, x.v::jsonb FROM unnest(tables, keys, vals) AS x(t, k, v)
           WHERE x.t = 'actions' AND x.v IS NOT NULL
          ON CONFLICT (key) DO UPDATE SET value = excluded.value;
      WHEN 'resources' THEN
        DELETE FROM "@schema@"."resources" s USING unnest(tables, keys, vals) AS x(t, k, v)
         WHERE x.t = 'resources' AND x.v IS NULL AND s.key = x.k;
        INSERT INTO "@schema@"."resources" (key, value)
          SELECT x.k, x.v::jsonb FROM unnest(tables, keys, vals) AS x(t, k, v)
           WHERE x.t = 'resources' AND x.v IS NOT NULL
          ON CONFLICT (key) DO UPDATE SET value = excluded.value;
      WHEN 'sinks' THEN
        DELETE FROM "@schema@"."sinks" s USING unnest(tables, keys, vals) AS x(t, k, v)
         WHERE x.t = 'sinks' AND x.v IS NULL AND s.key = x.k;
        INSERT INTO "@schema@"."sinks" (key, value)
          SELECT x.k, x.v::jsonb FROM unnest(tables, keys, vals) AS x(t, k, v)
           WHERE x.t = 'sinks' AND x.v IS NOT NULL
          ON CONFLICT (key) DO UPDATE SET value = excluded.value;
      WHEN 'tasks' THEN
        DELETE FROM "@schema@"."tasks" s USING unnest(tables, keys, vals) AS x(t, k, v)
         WHERE x.t = 'tasks' AND x.v IS NULL AND s.key = x.k;
        INSERT INTO "@schema@"."tasks" (key, value)
          SELECT x.k, x.v::jsonb FROM unnest(tables, keys, vals) AS x(t, k, v)
           WHERE x.t = 'tasks' AND x.v IS NOT NULL
          ON CONFLICT (key) DO UPDATE SET value = excluded.value;
      WHEN 'indexes' THEN
        DELETE FROM "@schema@"."indexes" s USING unnest(tables, keys, vals) AS x(t, k, v)
         WHERE x.t = 'indexes' AND x.v IS NULL AND s.key = x.k;
        INSERT INTO "@schema@"."indexes" (key, value)
          SELECT x.k, x.v::jsonb FROM unnest(tables, keys, vals) AS x(t, k, v)
           WHERE x.t = 'indexes' AND x.v IS NOT NULL
          ON CONFLICT (key) DO UPDATE SET value = excluded.value;
      WHEN 'meta' THEN
        DELETE FROM "@schema@"."meta" s USING unnest(tables, keys, vals) AS x(t, k, v)
         WHERE x.t = 'meta' AND x.v IS NULL AND s.key = x.k;
        INSERT INTO "@schema@"."meta" (key, value)
          SELECT x.k, x.v::jsonb FROM unnest(tables, keys, vals) AS x(t, k, v)
           WHERE x.t = 'meta' AND x.v IS NOT NULL
          ON CONFLICT (key) DO UPDATE SET value = excluded.value;
      WHEN 'downstream' THEN
        DELETE FROM "@schema@"."downstream" s USING unnest(tables, keys, vals) AS x(t, k, v)
         WHERE x.t = 'downstream' AND x.v IS NULL AND s.key = x.k;
        INSERT INTO "@schema@"."downstream" (key, value)
          SELECT x.k, x.v FROM unnest(tables, keys, vals) AS x(t, k, v)
           WHERE x.t = 'downstream' AND x.v IS NOT NULL
          ON CONFLICT (key) DO UPDATE SET value = excluded.value;
    END CASE;
  END LOOP;
END
$fn$;
