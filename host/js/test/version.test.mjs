// world.wit: "A host MUST refuse, when it opens, a component of a contract
// version it does not implement, naming both versions." The real
// gak:kernel@0.2.0 component (tests/golden/gak-0.2.0.wasm) is refused
// before jco transpiles it, with both versions named — not with a link
// error about a missing `gak:kernel/clock` import.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CONTRACT, PACKAGE_DIR, REPO_DIR, checkContract, componentNames, componentPath, transpileComponent } from '../src/component.js';
import { GakError, openKernel } from '../src/index.js';

const OLD = join(REPO_DIR, 'tests', 'golden', 'gak-0.2.0.wasm');
const REFUSAL = /is gak:kernel@0\.2\.0; this host implements gak:kernel@0\.4\.0/;
const skipOld = existsSync(OLD) ? undefined : `${OLD} is missing`;

/** Folders of gen/ whose meta.json names `path`. */
function transpiledFrom(path) {
  const gen = join(PACKAGE_DIR, 'gen');
  if (!existsSync(gen)) return [];
  return readdirSync(gen).filter((d) => {
    const meta = join(gen, d, 'meta.json');
    return existsSync(meta) && JSON.parse(readFileSync(meta, 'utf8')).component === path;
  });
}

test('this host implements gak:kernel@0.4.0 (the WIT package), and the component it loads is one', () => {
  assert.equal(CONTRACT, 'gak:kernel@0.4.0');
  const world = readFileSync(join(REPO_DIR, 'wit', 'world.wit'), 'utf8');
  assert.ok(world.includes(`package ${CONTRACT};`), `wit/world.wit does not declare ${CONTRACT}`);
  const { imports, exports } = componentNames(readFileSync(componentPath()));
  assert.ok(imports.includes('gak:kernel/store@0.4.0'), imports.join());
  for (const e of ['checkpoint', 'commitgate', 'sideeffect', 'taskboard', 'retention']) {
    assert.ok(exports.includes(`gak:kernel/${e}@0.4.0`), exports.join());
  }
  checkContract(readFileSync(componentPath()), 'the component');
});

test('the 0.2.0 component is refused at open, naming both versions, and never transpiled', { skip: skipOld }, async () => {
  await assert.rejects(
    openKernel('memory:', { component: OLD }),
    (e) => e instanceof GakError && e.code === 'storage' && REFUSAL.test(e.message) && e.message.includes(OLD),
  );
  await assert.rejects(transpileComponent(OLD), REFUSAL);
  assert.deepEqual(transpiledFrom(OLD), []);
});

test('npm run build refuses the 0.2.0 component with the same message', { skip: skipOld }, () => {
  const script = fileURLToPath(new URL('../scripts/transpile.mjs', import.meta.url));
  const r = spawnSync(process.execPath, [script, OLD], { encoding: 'utf8' });
  assert.notEqual(r.status, 0);
  assert.match(r.stderr, REFUSAL);
});

/** A component binary holding only an import section with these names (types are not checked). */
function componentImporting(names) {
  const leb = (n) => {
    const out = [];
    do {
      let b = n & 0x7f;
      n >>>= 7;
      if (n !== 0) b |= 0x80;
      out.push(b);
    } while (n !== 0);
    return out;
  };
  const body = [...leb(names.length)];
  for (const name of names) {
    const s = [...Buffer.from(name)];
    body.push(0x00, ...leb(s.length), ...s, 0x05, 0x00); // an instance of type 0
  }
  return new Uint8Array([0x00, 0x61, 0x73, 0x6d, 0x0d, 0x00, 0x01, 0x00, 10, ...leb(body.length), ...body]);
}

test('any other or missing version is refused, naming what the component is', () => {
  const refused = (names, pattern) =>
    assert.throws(() => checkContract(componentImporting(names), 'c.wasm'), (e) => e instanceof GakError && e.code === 'storage' && pattern.test(e.message), names.join());
  refused(['gak:kernel/store@0.3.0'], /^storage: c\.wasm is gak:kernel@0\.3\.0; this host implements gak:kernel@0\.4\.0$/);
  refused(['gak:kernel/store@0.5.0'], /^storage: c\.wasm is gak:kernel@0\.5\.0; this host implements gak:kernel@0\.4\.0$/);
  refused(['gak:kernel/store@0.4.0', 'gak:kernel/clock@0.2.0'], /is gak:kernel@0\.2\.0; this host implements/);
  refused(['gak:kernel/store'], /is gak:kernel \(unversioned\); this host implements gak:kernel@0\.4\.0/);
  refused(['wasi:random/random@0.2.6'], /^storage: c\.wasm is not a gak:kernel component; this host implements gak:kernel@0\.4\.0$/);
  checkContract(componentImporting(['gak:kernel/store@0.4.0', 'wasi:random/insecure-seed@0.2.6']), 'c.wasm');
  assert.deepEqual(componentNames(componentImporting(['a:b/c@1.0.0'])), { imports: ['a:b/c@1.0.0'], exports: [] });
});

test('bytes that are not a component are refused as such', () => {
  const core = new Uint8Array([0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00]);
  for (const bytes of [new Uint8Array([1, 2, 3]), core, componentImporting(['gak:kernel/store@0.4.0']).subarray(0, 14)]) {
    assert.throws(() => checkContract(bytes, 'x.wasm'), /x\.wasm is not a gak:kernel component \(not a WebAssembly component .*\); this host implements gak:kernel@0\.4\.0$/);
  }
});
