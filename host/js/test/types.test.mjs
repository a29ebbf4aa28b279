// The shipped .d.ts (contract.d.ts, generated from the WIT, and index.d.ts)
// under `tsc --strict`: it compiles, accepts what the README shows and
// rejects what it must (test/types/usage.ts, which then runs against the
// real kernel: what the types take, kernel.js takes; what they reject, it
// refuses; its answers have the declared types); its contract types are what
// the component this host loads takes and answers, as jco types them
// (test/types/component.ts, generated); and the API objects kernel.js makes
// have exactly the methods it declares.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import ts from 'typescript';
import { loadComponent, openKernel } from '../src/index.js';

const pkg = fileURLToPath(new URL('..', import.meta.url));
const tsc = join(pkg, 'node_modules', 'typescript', 'bin', 'tsc');
const OPTIONS = {
  strict: true,
  noEmit: true,
  target: 'es2022',
  module: 'nodenext',
  moduleResolution: 'nodenext',
  lib: ['es2022'],
  skipLibCheck: false,
  types: [],
};

/** `tsc -p` on a tsconfig of `files` (paths from the package) with `compilerOptions` added. */
function compile(files, compilerOptions = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'gak-tsc-'));
  try {
    const config = join(dir, 'tsconfig.json');
    const tsconfig = { compilerOptions: { ...OPTIONS, ...compilerOptions }, files: files.map((f) => join(pkg, f)) };
    writeFileSync(config, JSON.stringify(tsconfig, null, 2));
    const r = spawnSync(process.execPath, [tsc, '-p', config], { cwd: pkg, encoding: 'utf8' });
    assert.equal(r.status, 0, `${r.stdout}\n${r.stderr}`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

test('the .d.ts type-checks a typical use under tsc --strict, and the use runs as typed', async () => {
  compile(['test/types/usage.ts']);
  const source = readFileSync(join(pkg, 'test', 'types', 'usage.ts'), 'utf8');
  const { outputText } = ts.transpileModule(source, {
    compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 },
  });
  // Beside usage.ts, so its imports resolve as they were type-checked.
  const runnable = join(pkg, 'test', 'types', `.usage-${process.pid}.mjs`);
  writeFileSync(runnable, outputText);
  try {
    const usage = await import(pathToFileURL(runnable).href);
    await usage.main();
  } finally {
    rmSync(runnable, { force: true });
  }
});

test('the contract types are what the component takes and answers (its jco .d.ts)', async () => {
  const { dir } = await loadComponent();
  compile(['test/types/component.ts'], { paths: { 'jco/*': [join(dir, 'interfaces', '*')] } });
});

test('each interface object has exactly the methods the .d.ts declares: the component\'s, and the host\'s own', async () => {
  // Declared by hand in index.d.ts (`SideeffectHost`, `RetentionHost`);
  // `sinkAdvance` is reached only through `writeFenced`.
  const added = { sideeffect: ['writeFenced'], retention: ['pruneDryRun'] };
  const hidden = { sideeffect: ['sinkAdvance'] };
  const component = await loadComponent();
  const kernel = await openKernel('memory:', { component: component.path });
  const exports = component.instantiate(
    new Proxy({}, { get: () => new Proxy({}, { get: () => () => undefined }) }),
  );
  try {
    for (const [name, functions] of Object.entries(exports).filter(([n]) => !n.includes(':'))) {
      const want = [...Object.keys(functions).filter((f) => !hidden[name]?.includes(f)), ...(added[name] ?? [])].sort();
      const methods = [];
      for (let p = Object.getPrototypeOf(kernel[name]); p !== Object.prototype; p = Object.getPrototypeOf(p)) {
        methods.push(...Object.getOwnPropertyNames(p).filter((m) => m !== 'constructor'));
      }
      assert.deepEqual([...new Set(methods)].sort(), want, name);
    }
  } finally {
    kernel.close();
  }
});
