-- gak's PostgreSQL schema and its two functions, shared by every host that
-- binds PostgreSQL (Rust `host/rust/src/store/postgres`, Python
-- `host/python/src/gak/stores/postgres.py`; see `host/HOSTS.md`).
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
-- key that has no row yet), then read them in a statement of its own: in a
-- VOLATILE function under READ COMMITTED every statement takes a fresh
-- snapshot, so the read sees the commit of the lock's previous holder.
-- Answers one element per key, in order (NULL: no row); with `clock`, one
-- element more: the server's clock_timestamp() in ms since the Unix epoch,
-- read after the locks.
CREATE OR REPLACE FUNCTION "@schema@".gak_read_v1(tables text[], keys text[], clock boolean)
RETURNS text[] LANGUAGE plpgsql VOLATILE
-- A generic plan, cached once per session: a custom plan per call (what
-- PostgreSQL picks for array parameters) costs ~5x the read itself.
SET plan_cache_mode = force_generic_plan AS $fn$
DECLARE
  found text[];
BEGIN
  PERFORM pg_advisory_xact_lock(l.h)
     FROM (SELECT DISTINCT hashtextextended('@schema@/' || x.t || '/' || x.k, 0) AS h
             FROM unnest(tables, keys) AS x(t, k)) AS l
    ORDER BY l.h;
  SELECT array_agg(CASE x.t
      WHEN 'snapshots' THEN (SELECT value::text FROM "@schema@"."snapshots" WHERE key = x.k)
      WHEN 'outcomes' THEN (SELECT value::text FROM "@schema@"."outcomes" WHERE key = x.k)
      WHEN 'actions' THEN (SELECT value::text FROM "@schema@"."actions" WHERE key = x.k)
      WHEN 'resources' THEN (SELECT value::text FROM "@schema@"."resources" WHERE key = x.k)
      WHEN 'sinks' THEN (SELECT value::text FROM "@schema@"."sinks" WHERE key = x.k)
      WHEN 'tasks' THEN (SELECT value::text FROM "@schema@"."tasks" WHERE key = x.k)
      WHEN 'indexes' THEN (SELECT value::text FROM "@schema@"."indexes" WHERE key = x.k)
      WHEN 'meta' THEN (SELECT value::text FROM "@schema@"."meta" WHERE key = x.k)
      WHEN 'downstream' THEN (SELECT value FROM "@schema@"."downstream" WHERE key = x.k)
    END ORDER BY x.i)
    INTO found
    FROM unnest(tables, keys) WITH ORDINALITY AS x(t, k, i);
  found := coalesce(found, '{}'::text[]);
  IF clock THEN
    found := found || ((extract(epoch FROM clock_timestamp()) * 1000)::int8)::text;
  END IF;
  RETURN found;
END
$fn$;

-- Apply a write set in one statement: lock every key (as gak_read_v1 does;
-- free for a key this transaction already locked), then per table delete
-- the keys whose value is NULL and upsert the others. Every key appears at
-- most once.
CREATE OR REPLACE FUNCTION "@schema@".gak_write_v1(tables text[], keys text[], vals text[])
RETURNS void LANGUAGE plpgsql VOLATILE
SET plan_cache_mode = force_generic_plan AS $fn$
BEGIN
  PERFORM pg_advisory_xact_lock(l.h)
     FROM (SELECT DISTINCT hashtextextended('@schema@/' || x.t || '/' || x.k, 0) AS h
             FROM unnest(tables, keys) AS x(t, k)) AS l
    ORDER BY l.h;
  IF 'snapshots' = ANY(tables) THEN
    DELETE FROM "@schema@"."snapshots" WHERE key IN
      (SELECT x.k FROM unnest(tables, keys, vals) AS x(t, k, v) WHERE x.t = 'snapshots' AND x.v IS NULL);
    INSERT INTO "@schema@"."snapshots" (key, value)
      SELECT x.k, x.v::jsonb FROM unnest(tables, keys, vals) AS x(t, k, v) WHERE x.t = 'snapshots' AND x.v IS NOT NULL
      ON CONFLICT (key) DO UPDATE SET value = excluded.value;
  END IF;
  IF 'outcomes' = ANY(tables) THEN
    DELETE FROM "@schema@"."outcomes" WHERE key IN
      (SELECT x.k FROM unnest(tables, keys, vals) AS x(t, k, v) WHERE x.t = 'outcomes' AND x.v IS NULL);
    INSERT INTO "@schema@"."outcomes" (key, value)
      SELECT x.k, x.v::jsonb FROM unnest(tables, keys, vals) AS x(t, k, v) WHERE x.t = 'outcomes' AND x.v IS NOT NULL
      ON CONFLICT (key) DO UPDATE SET value = excluded.value;
  END IF;
  IF 'actions' = ANY(tables) THEN
    DELETE FROM "@schema@"."actions" WHERE key IN
      (SELECT x.k FROM unnest(tables, keys, vals) AS x(t, k, v) WHERE x.t = 'actions' AND x.v IS NULL);
    INSERT INTO "@schema@"."actions" (key, value)
      SELECT x.k, x.v::jsonb FROM unnest(tables, keys, vals) AS x(t, k, v) WHERE x.t = 'actions' AND x.v IS NOT NULL
      ON CONFLICT (key) DO UPDATE SET value = excluded.value;
  END IF;
  IF 'resources' = ANY(tables) THEN
    DELETE FROM "@schema@"."resources" WHERE key IN
      (SELECT x.k FROM unnest(tables, keys, vals) AS x(t, k, v) WHERE x.t = 'resources' AND x.v IS NULL);
    INSERT INTO "@schema@"."resources" (key, value)
      SELECT x.k, x.v::jsonb FROM unnest(tables, keys, vals) AS x(t, k, v) WHERE x.t = 'resources' AND x.v IS NOT NULL
      ON CONFLICT (key) DO UPDATE SET value = excluded.value;
  END IF;
  IF 'sinks' = ANY(tables) THEN
    DELETE FROM "@schema@"."sinks" WHERE key IN
      (SELECT x.k FROM unnest(tables, keys, vals) AS x(t, k, v) WHERE x.t = 'sinks' AND x.v IS NULL);
    INSERT INTO "@schema@"."sinks" (key, value)
      SELECT x.k, x.v::jsonb FROM unnest(tables, keys, vals) AS x(t, k, v) WHERE x.t = 'sinks' AND x.v IS NOT NULL
      ON CONFLICT (key) DO UPDATE SET value = excluded.value;
  END IF;
  IF 'tasks' = ANY(tables) THEN
    DELETE FROM "@schema@"."tasks" WHERE key IN
      (SELECT x.k FROM unnest(tables, keys, vals) AS x(t, k, v) WHERE x.t = 'tasks' AND x.v IS NULL);
    INSERT INTO "@schema@"."tasks" (key, value)
      SELECT x.k, x.v::jsonb FROM unnest(tables, keys, vals) AS x(t, k, v) WHERE x.t = 'tasks' AND x.v IS NOT NULL
      ON CONFLICT (key) DO UPDATE SET value = excluded.value;
  END IF;
  IF 'indexes' = ANY(tables) THEN
    DELETE FROM "@schema@"."indexes" WHERE key IN
      (SELECT x.k FROM unnest(tables, keys, vals) AS x(t, k, v) WHERE x.t = 'indexes' AND x.v IS NULL);
    INSERT INTO "@schema@"."indexes" (key, value)
      SELECT x.k, x.v::jsonb FROM unnest(tables, keys, vals) AS x(t, k, v) WHERE x.t = 'indexes' AND x.v IS NOT NULL
      ON CONFLICT (key) DO UPDATE SET value = excluded.value;
  END IF;
  IF 'meta' = ANY(tables) THEN
    DELETE FROM "@schema@"."meta" WHERE key IN
      (SELECT x.k FROM unnest(tables, keys, vals) AS x(t, k, v) WHERE x.t = 'meta' AND x.v IS NULL);
    INSERT INTO "@schema@"."meta" (key, value)
      SELECT x.k, x.v::jsonb FROM unnest(tables, keys, vals) AS x(t, k, v) WHERE x.t = 'meta' AND x.v IS NOT NULL
      ON CONFLICT (key) DO UPDATE SET value = excluded.value;
  END IF;
  IF 'downstream' = ANY(tables) THEN
    DELETE FROM "@schema@"."downstream" WHERE key IN
      (SELECT x.k FROM unnest(tables, keys, vals) AS x(t, k, v) WHERE x.t = 'downstream' AND x.v IS NULL);
    INSERT INTO "@schema@"."downstream" (key, value)
      SELECT x.k, x.v FROM unnest(tables, keys, vals) AS x(t, k, v) WHERE x.t = 'downstream' AND x.v IS NOT NULL
      ON CONFLICT (key) DO UPDATE SET value = excluded.value;
  END IF;
END
$fn$;
