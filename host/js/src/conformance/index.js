// The conformance runner for the language-neutral vectors (VECTORS.md):
// `node host/js/bin/gak.mjs conformance [--store URL] [--component FILE] [FILE_OR_DIR…]`.
//
// Same arguments, output and closing line as `gak conformance` (the Rust
// runner, `host/rust/cli/src/conformance/`): each scenario runs on a fresh,
// empty store with the fake clock at 0; a line per scenario, then
// `N passed, M failed`.
import { readFileSync, readdirSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { openKernel } from '../kernel.js';
import { REPO_DIR } from '../component.js';
import { PostgresBackend, hidePassword, isPostgresUrl } from '../store/index.js';
import { POSTGRES_DEFAULT_SCHEMA, USAGE } from '../store/facts.js';
import { parsePostgresUrl } from '../store/pg-url.js';
import { parseFile, runScenario } from './vector.js';

/** The vectors shipped in the repository (`tests/vectors/*.json`), as `[name, text]`. */
export function builtin() {
  const dir = join(REPO_DIR, 'tests', 'vectors');
  return readdirSync(dir)
    .filter((f) => f.endsWith('.json'))
    .sort()
    .map((f) => [`builtin:${f}`, readFileSync(join(dir, f), 'utf8')]);
}

/** Read vector files from paths (files, or directories of `*.json`). */
export function loadPaths(paths) {
  const files = [];
  const readOne = (path) => {
    // An unreadable file becomes text that does not parse: a failure naming
    // the file, never a skip.
    try {
      return [path, readFileSync(path, 'utf8')];
    } catch (e) {
      return [path, `<unreadable: ${e.message}>`];
    }
  };
  for (const path of paths) {
    let isDir = false;
    try {
      isDir = statSync(path).isDirectory();
    } catch {
      // not there: reported by readOne
    }
    if (isDir) {
      const entries = readdirSync(path)
        .filter((f) => f.endsWith('.json'))
        .map((f) => join(path, f))
        .sort();
      files.push(...entries.map(readOne));
    } else {
      files.push(readOne(path));
    }
  }
  return files;
}

function removeDb(path) {
  for (const suffix of ['', '-wal', '-shm']) rmSync(`${path}${suffix}`, { force: true });
}

/**
 * A target from a store URL: `memory:`, `sqlite:PATH` (each scenario a
 * new database file next to PATH, removed afterwards) or `postgres://…`
 * (each scenario a new schema, dropped afterwards).
 */
export class UrlTarget {
  #url;
  #count = 0;
  #last;
  #kernel;

  constructor(url, component) {
    if (!(url === 'memory' || url === 'memory:' || url.startsWith('sqlite:') || isPostgresUrl(url))) {
      throw new Error(`unknown store ${JSON.stringify(hidePassword(url))}: expected ${USAGE}`);
    }
    this.#url = url;
    this.component = component;
  }

  cleanup() {
    if (this.#kernel?.store instanceof PostgresBackend) {
      try {
        this.#kernel.store.dropSchema();
      } catch {
        // left for the operator: the schema's name says which run made it
      }
    }
    this.#kernel?.close();
    this.#kernel = undefined;
    if (this.#last) removeDb(this.#last);
    this.#last = undefined;
  }

  async fresh(clock) {
    this.cleanup();
    this.#count += 1;
    let url = this.#url;
    if (url.startsWith('sqlite:')) {
      const spec = url.slice('sqlite:'.length);
      const q = spec.indexOf('?');
      const base = (q < 0 ? spec : spec.slice(0, q)) || 'gak-conformance.db';
      const query = q < 0 ? '' : spec.slice(q);
      const stem = base.endsWith('.db') ? base.slice(0, -3) : base;
      const path = `${stem}-${process.pid}-${this.#count}.db`;
      removeDb(path);
      this.#last = path;
      url = `sqlite:${path}${query}`;
    }
    if (isPostgresUrl(url)) {
      // Each scenario a schema of its own, dropped afterwards (a repeated
      // parameter's last value wins).
      const base = parsePostgresUrl(url).params.schema ?? POSTGRES_DEFAULT_SCHEMA;
      const query = url.slice(url.lastIndexOf('@') + 1).includes('?');
      url = `${url}${query ? '&' : '?'}schema=${base}_c${process.pid}_${this.#count}`;
      new PostgresBackend(url, { create: false }).dropSchema();
    }
    this.#kernel = await openKernel(url, { clock, component: this.component, blocking: true });
    return this.#kernel;
  }
}

/** Run every scenario of `files` ([name, text]) on `target`: a list of verdicts. */
export async function run(target, files) {
  const verdicts = [];
  for (const [name, text] of files) {
    let scenarios;
    try {
      scenarios = parseFile(text);
    } catch (e) {
      verdicts.push({ name, failure: `cannot parse: ${e.message}` });
      continue;
    }
    for (const [i, scenario] of scenarios.entries()) {
      const label = scenario.name ?? `#${i}`;
      let failure;
      try {
        await runScenario(target, scenario, name, i);
      } catch (e) {
        failure = e.message;
      }
      verdicts.push({ name: `${name} :: ${label}`, failure });
    }
  }
  target.cleanup?.();
  return verdicts;
}

/** The runner's output: a line per scenario, then `N passed, M failed`. */
export function render(verdicts) {
  let out = '';
  for (const v of verdicts) out += v.failure === undefined ? `ok   ${v.name}\n` : `FAIL ${v.name}: ${v.failure}\n`;
  const failed = verdicts.filter((v) => v.failure !== undefined).length;
  return `${out}${verdicts.length - failed} passed, ${failed} failed\n`;
}
