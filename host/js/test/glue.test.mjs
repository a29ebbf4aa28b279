// The edits to jco's generated glue (PATCHES in src/component.js): they
// apply to what jco emits for this component exactly as often as they say,
// a glue of another shape is refused rather than half-patched, and the
// direct import path is the one that runs.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { componentPath, patchGlue } from '../src/component.js';
import { MemoryBackend, openKernel } from '../src/index.js';

let raw;
async function rawGlue() {
  if (raw === undefined) {
    const { transpileBytes } = await import('@bytecodealliance/jco-transpile');
    const out = await transpileBytes(new Uint8Array(readFileSync(componentPath())), {
      name: 'gak',
      instantiation: 'sync',
      noComponentErrorWrapping: true,
    });
    raw = Buffer.from(out.files['gak.js']).toString('utf8');
  }
  return raw;
}

const DIRECT = [
  'gak:kernel/clock@0.2.0#now',
  'gak:kernel/store@0.2.0#_delete',
  'gak:kernel/store@0.2.0#get',
  'gak:kernel/store@0.2.0#getMany',
  'gak:kernel/store@0.2.0#put',
  'gak:kernel/store@0.2.0#scan',
  'wasi:random/insecure-seed@0.2.6#insecureSeed',
  'wasi:random/random@0.2.6#getRandomU64',
];

test('the patches apply to the glue jco emits for this component', async () => {
  const patched = patchGlue(await rawGlue());
  const direct = [...patched.matchAll(/(_trampoline\d+)\.fnName = '([^']+)';\n {2}\1\.gakDirect = true;/g)]
    .map((m) => m[2])
    .sort();
  assert.deepEqual(direct, DIRECT);
  // Every other import still goes through jco's wrapper.
  const wrapped = patched.match(/: _trampoline\d+\.manuallyAsync \? new WebAssembly\.Suspending/g)?.length;
  assert.equal(wrapped, 21);
});

test('a glue of another shape is refused, not half-patched', async () => {
  const glue = await rawGlue();
  // One direct trampoline whose task set-up changed upstream.
  const at = glue.indexOf("_trampoline14.fnName = 'gak:kernel/store");
  assert.ok(at > 0);
  const start = glue.lastIndexOf('const hostProvided = true;', at);
  const changed = glue.slice(0, start) + 'const hostProvided = !false;' + glue.slice(start + 26);
  assert.throws(() => patchGlue(changed), /no longer applies to gak:kernel\/store@0\.2\.0#get/);
  // One more _debugLog call than counted.
  assert.throws(() => patchGlue(glue + '\n_debugLog("x");\n'), /found 240, expected 239/);
  // A wrapper site that moved.
  assert.throws(
    () => patchGlue(glue.replace('let trampoline14 = _trampoline14.manuallyAsync ?', 'let trampoline14 = (_trampoline14.manuallyAsync) ?')),
    /found 20, expected 21/,
  );
});

test('store and clock imports run without the task wrapper', async () => {
  const stacks = [];
  class Probe extends MemoryBackend {
    session() {
      const inner = super.session();
      return {
        begin: () => {
          const txn = inner.begin();
          const probe = {
            commit: () => txn.commit(),
            rollback: () => txn.rollback(),
            isOpen: () => txn.isOpen(),
            lend: (report) => txn.lend(report),
          };
          for (const op of ['get', 'getMany', 'put', 'delete', 'scan']) {
            probe[op] = (...args) => {
              stacks.push(new Error().stack);
              return txn[op](...args);
            };
          }
          return probe;
        },
        close: () => inner.close(),
      };
    }
  }
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = 100;
  try {
    const kernel = await openKernel(new Probe());
    kernel.taskboard.seed([{ id: 't' }]);
    kernel.taskboard.claim('t', 'w', 60_000n);
  } finally {
    Error.stackTraceLimit = limit;
  }
  assert.ok(stacks.length >= 2);
  for (const stack of stacks) {
    // From the host function down to the glue's trampoline and the frame
    // that called it (wasm, not jco's lowering wrapper): no task machinery.
    // (The export's own task frames lie further down and are not looked at.)
    const frames = stack.split('\n');
    const at = frames.findIndex((f) => /_trampoline\d+/.test(f));
    assert.ok(at > 0, `no trampoline frame in\n${stack}`);
    const upper = frames.slice(0, at + 2).join('\n');
    assert.doesNotMatch(upper, /_lowerImportBackwardsCompat|_withGlobalCurrentTaskMeta|_trackHostOperation/);
  }
});
