// The edits to jco's generated glue (PATCHES in src/component.js): they
// apply to what jco emits for this component exactly as often as they say,
// a glue of another shape is refused rather than half-patched, and the
// direct import path is the one that runs.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { componentPath, loadComponent, patchGlue } from '../src/component.js';
import { Kernel } from '../src/kernel.js';
import { ManualClock, MemoryBackend } from '../src/index.js';

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

// gak:kernel@0.4.0's store import, and the one wasi:random function the
// component imports.
const DIRECT = [
  'gak:kernel/store@0.4.0#read',
  'gak:kernel/store@0.4.0#tryRead',
  'gak:kernel/store@0.4.0#write',
  'wasi:random/insecure-seed@0.2.6#insecureSeed',
];

test('the patches apply to the glue jco emits for this component', async () => {
  const patched = patchGlue(await rawGlue());
  const direct = [...patched.matchAll(/(_trampoline\d+)\.fnName = '([^']+)';\n {2}\1\.gakDirect = true;/g)]
    .map((m) => m[2])
    .sort();
  assert.deepEqual(direct, DIRECT);
  // Every lowering site is patched (the direct ones skip jco's wrapper, the
  // other 13, WASI's, keep it).
  const wrapped = patched.match(/= (_trampoline\d+)\.gakDirect \? \1 : \1\.manuallyAsync \? new WebAssembly\.Suspending/g)?.length;
  assert.equal(wrapped, 17);
  // The memory view is kept until the memory grows.
  assert.match(patched, /const dataView = mem => dvMemory === mem && dv\.buffer\.byteLength !== 0 \? dv :/);
  // The 0.3.0+ read's call spans lines: it is called directly, whole.
  assert.match(patched, /const hostRet\d+ = read\(\{\s*keys: result\d+,\s*ranges: result\d+,[^;]*entropy: clampGuest\(arg\d+, 0, 255\),\s*\}\);/);
});

test('a glue of another shape is refused, not half-patched', async () => {
  const glue = await rawGlue();
  // One direct trampoline whose task set-up changed upstream.
  const at = glue.indexOf("fnName = 'gak:kernel/store@0.4.0#read'");
  assert.ok(at > 0);
  const start = glue.lastIndexOf('const hostProvided = true;', at);
  const changed = glue.slice(0, start) + 'const hostProvided = !false;' + glue.slice(start + 26);
  assert.throws(() => patchGlue(changed), /no longer applies to gak:kernel\/store@0\.4\.0#read/);
  // A host call wrapped differently (its statement no longer ends there).
  const call = glue.indexOf('fn: () => _trackHostOperation(() => write(', start);
  assert.ok(call > 0);
  const end = glue.indexOf('})\n      ;', call);
  const unwrapped = glue.slice(0, end) + '}).then?.()\n      ;' + glue.slice(end + '})\n      ;'.length);
  assert.throws(() => patchGlue(unwrapped), /no longer applies to gak:kernel\/store@0\.4\.0#write/);
  // One more _debugLog call than counted.
  assert.throws(() => patchGlue(glue + '\n_debugLog("x");\n'), /found 270, expected 269/);
  // A wrapper site that moved.
  const site = glue.match(/let (trampoline\d+) = (_trampoline\d+)\.manuallyAsync \?/);
  assert.ok(site);
  assert.throws(
    () => patchGlue(glue.replace(site[0], `let ${site[1]} = (${site[2]}.manuallyAsync) ?`)),
    /found 16, expected 17/,
  );
  // A component importing a fifth store or random function.
  const fourth = glue.replace("fnName = 'wasi:cli/exit@0.2.6#exit';", "fnName = 'wasi:random/random@0.2.6#getRandomU64';");
  assert.notEqual(fourth, glue);
  assert.throws(() => patchGlue(fourth), /found 5, expected 4/);
});

test('store and random imports run without the task wrapper', async () => {
  // The host's own functions, each wrapped to take its stack.
  const stacks = new Map();
  const take = (name, fn) =>
    function (...args) {
      if (!stacks.has(name)) stacks.set(name, new Error().stack);
      return fn.apply(this, args);
    };
  const entry = await loadComponent();
  const component = {
    ...entry,
    instantiate(imports) {
      const out = { ...imports };
      for (const [name, impl] of Object.entries(imports)) {
        const bare = name.split('@')[0];
        if (bare === 'gak:kernel/store') out[name] = { read: take('read', impl.read), tryRead: take('tryRead', impl.tryRead), write: take('write', impl.write) };
        if (bare === 'wasi:random/insecure-seed') out[name] = { insecureSeed: take('insecureSeed', impl.insecureSeed) };
      }
      return entry.instantiate(out);
    },
  };
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = 100;
  try {
    const kernel = new Kernel(component, new MemoryBackend(), new ManualClock(1000n));
    kernel.taskboard.seed([{ id: 't' }]);
    kernel.taskboard.claim('t', 'w', 60_000n);
    kernel.taskboard.seed([{ id: 'u' }]);
    kernel.taskboard.claimNext('w', 60_000n); // probes its candidates: try-read
  } finally {
    Error.stackTraceLimit = limit;
  }
  assert.deepEqual([...stacks.keys()].sort(), ['insecureSeed', 'read', 'tryRead', 'write']);
  for (const [name, stack] of stacks) {
    // From the host function down to the glue's trampoline and the frame
    // that called it (wasm, not jco's lowering wrapper): no task machinery.
    // (The export's own task frames lie further down and are not looked at.)
    const frames = stack.split('\n');
    const at = frames.findIndex((f) => /_trampoline\d+/.test(f));
    assert.ok(at > 0, `${name}: no trampoline frame in\n${stack}`);
    const upper = frames.slice(0, at + 2).join('\n');
    assert.doesNotMatch(upper, /_lowerImportBackwardsCompat|_withGlobalCurrentTaskMeta|_trackHostOperation/, name);
    assert.match(frames[at + 1], /wasm/, `${name}: the trampoline's caller is not the guest:\n${upper}`);
  }
});

test('the kept memory view follows the memory when it grows', async () => {
  // Each call copies a megabyte into the guest and back (the result, the
  // JSON the component writes, the answers it reads back), so its memory
  // grows several times over; a stale view would read or write the old,
  // detached buffer, and throw or misread.
  const entry = await loadComponent();
  const glue = await import(pathToFileURL(join(entry.dir, 'gak.js')).href);
  const memories = [];
  const component = {
    ...entry,
    instantiate: (imports) =>
      glue.instantiate(
        (name) => new WebAssembly.Module(readFileSync(join(entry.dir, name))),
        imports,
        (module, importObject) => {
          const instance = new WebAssembly.Instance(module, importObject);
          if (instance.exports.memory instanceof WebAssembly.Memory) memories.push(instance.exports.memory);
          return instance;
        },
      ),
  };
  const kernel = new Kernel(component, new MemoryBackend(), new ManualClock(1000n));
  kernel.taskboard.seed([{ id: 'warm-up' }]); // instantiated
  assert.equal(memories.length, 1);
  const before = memories[0].buffer.byteLength;
  const big = (i) => `${i}`.padEnd(1_000_000, String.fromCharCode(97 + i));
  const text = (bytes) => new TextDecoder().decode(bytes);
  for (let i = 0; i < 8; i++) {
    const action = { key: `big-${i}`, resource: 'r' };
    const granted = kernel.sideeffect.acquire(action, 100n);
    assert.equal(granted.tag, 'granted');
    assert.equal(text(kernel.sideeffect.complete(action, granted.lease, big(i))), big(i));
  }
  const grewTo = memories[0].buffer.byteLength;
  assert.ok(grewTo > before, `the memory never grew (${before} bytes)`);
  for (let i = 0; i < 8; i++) {
    const replayed = kernel.sideeffect.acquire({ key: `big-${i}`, resource: 'r' }, 100n);
    assert.equal(replayed.tag, 'replayed');
    assert.equal(text(replayed.result), big(i), `big-${i}`);
  }
});
