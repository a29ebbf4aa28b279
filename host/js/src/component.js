// Finding the kernel component, turning it into JavaScript with jco, and
// instantiating it.
//
// The component (`gak.wasm`, built by `cargo build -p gak`) is transpiled
// once by `@bytecodealliance/jco-transpile` into `host/js/gen/<key>/`, an
// ignored folder, keyed by the component's SHA-256, the jco version and the
// patch set below: a rebuilt component or a `--component FILE` gets its own
// folder, and an unchanged one is never transpiled again. `npm run build`
// does it ahead of time; `loadComponent` does it on demand.
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

import { GakError } from './errors.js';
import { CONTRACT, CONTRACT_VERSION } from './contract.js';

const HERE = dirname(fileURLToPath(import.meta.url));
/** The package folder, `host/js`. */
export const PACKAGE_DIR = resolve(HERE, '..');
/** The repository root (the package sits at `host/js`). */
export const REPO_DIR = resolve(PACKAGE_DIR, '..', '..');
const GEN_DIR = join(PACKAGE_DIR, 'gen');

/**
 * Where the component is: `explicit` if given, else `$GAK_COMPONENT`, else
 * `$CARGO_TARGET_DIR/component/gak.wasm`, else
 * `<repo>/target/component/gak.wasm` (where `cargo build -p gak` publishes it).
 */
export function componentPath(explicit) {
  if (explicit) return resolve(explicit);
  if (process.env.GAK_COMPONENT) return resolve(process.env.GAK_COMPONENT);
  const target = process.env.CARGO_TARGET_DIR
    ? resolve(process.env.CARGO_TARGET_DIR)
    : join(REPO_DIR, 'target');
  return join(target, 'component', 'gak.wasm');
}

// Edits to the generated glue, each applied exactly as often as `count`
// says or the transpile fails: a jco upgrade that changes the glue must make
// us look again, never silently drop a patch.
const PATCHES = [
  {
    why:
      'jco 1.35 checks process.env.JCO_DEBUG on every _debugLog call (dozens per ' +
      'export call); process.env is a slow C++ accessor, and profiling put a third ' +
      'of a claim there. Read it once, at instantiation.',
    find: /const _debugLog = \(\.\.\.args\) => \{\s*if \(!globalThis\?\.process\?\.env\?\.JCO_DEBUG\) \{ return; \}\s*console\.debug\(\.\.\.args\);\s*\};/g,
    replace:
      'const _JCO_DEBUG = !!globalThis?.process?.env?.JCO_DEBUG; ' +
      'const _debugLog = _JCO_DEBUG ? (...args) => { console.debug(...args); } : () => {};',
    count: 1,
  },
  {
    why:
      'Even a no-op _debugLog call builds its arguments first: most call sites pass a fresh ' +
      'object literal, dozens per export call, and a profile put ~15 % of a claim in garbage ' +
      'collection. Guard every call site so the arguments are only built when debugging.',
    find: /(?<![\w.])_debugLog\(/g,
    replace: '_JCO_DEBUG && _debugLog(',
    // The glue's own helpers plus the sites jco emits per imported and
    // exported function (3 per export): the count follows the component's
    // interface (its imports and exports), not its code, so a rebuilt 0.4.0
    // component keeps it. 0.3.0 had 227; 0.4.0's six taskboard exports
    // (claim-batch, complete-batch, fail, revive, set-group-limit,
    // get-group) add 18, list-groups and list-delayed 6 more,
    // taskboard list-group, count and recount 9 more,
    // sideeffect count and recount 6 more, and the
    // store's try-read import 3.
    count: 269,
  },
  {
    why:
      'jco 1.35 runs every import call through its async task machinery, even a sync-lowered ' +
      'import of a sync function: _lowerImportBackwardsCompat creates a subtask, the trampoline ' +
      'a task, and both go through resolve/exit bookkeeping; a profile put ~40 % of a memory ' +
      'claim there. Our own imports (store.read, try-read, write) and wasi:random take no resources ' +
      'and never block, so their trampolines call the host function directly (see rewriteTrampoline).',
    find: /const (_trampoline\d+) = function\(([^)]*)\) \{\n([\s\S]*?)\n {2}\}\n {2}\1\.fnName = '((?:gak:kernel\/|wasi:random\/)[^']*)';/g,
    replace: rewriteTrampoline,
    // gak:kernel@0.4.0: store.read, store.try-read, store.write, and the one
    // wasi:random function the component imports (insecure-seed; std's hash
    // seeds).
    count: 4,
  },
  {
    why:
      'Every field the glue reads or writes in guest memory goes through dataView(memory0), which ' +
      'compared dv.buffer with memory0.buffer each time: WebAssembly.Memory#buffer is a slow C++ ' +
      'accessor, and 0.3.0+ answers (values, pages, entropy) touch dozens of fields per read, ~3 % ' +
      'of a memory claim. Keep the view while it is of the same memory and its buffer is not ' +
      'detached (memory.grow detaches the old buffer of a non-shared memory, and the component ' +
      'has no shared memory), so a grown memory still gets a fresh view.',
    find: /\n {2}let dv = new DataView\(new ArrayBuffer\(\)\);\n {2}const dataView = mem => dv\.buffer === mem\.buffer \? dv : dv = new DataView\(mem\.buffer\);/g,
    replace:
      '\n  let dv = new DataView(new ArrayBuffer());\n  let dvMemory;\n' +
      '  const dataView = mem => dvMemory === mem && dv.buffer.byteLength !== 0 ? dv : ' +
      '(dvMemory = mem, dv = new DataView(mem.buffer));',
    count: 1,
  },
  {
    why: 'The stand-in task the direct trampolines hold (only their error paths touch it).',
    find: /\nfunction _trackHostOperation\(operation\) \{/g,
    replace: `\nconst _GAK_NO_TASK = Object.freeze({
  id: () => -1, componentIdx: () => -1, getParentSubtask: () => undefined,
  setErrored() {}, reject() {}, resolve() {}, exit() {},
});
function _trackHostOperation(operation) {`,
    count: 1,
  },
  {
    why: 'Lower the rewritten trampolines as they are, without the subtask wrapper.',
    find: /let (trampoline\d+) = (_trampoline\d+)\.manuallyAsync \?/g,
    replace: 'let $1 = $2.gakDirect ? $2 : $2.manuallyAsync ?',
    // Every lowered import: the 4 direct ones and 13 of WASI.
    count: 17,
  },
];
// Names the patch set in the cache key and meta.json: p3 was the 0.2.0
// glue (store get/get-many/put/delete/scan, clock, wasi:random), p4 the
// 0.3.0 glue (store read/write, wasi:random; the memory view kept), p5 the
// 0.4.0 glue (the same imports; six more taskboard exports), p6 the 0.4.0
// glue with the store's try-read import.
const PATCH_SET = 'p6';

// Inside one trampoline of a sync import: each edit must apply exactly once.
const TRAMPOLINE_EDITS = [
  // The task (and the parent's subtask it attaches to) becomes the stand-in.
  [/\n\s*const hostProvided = true;\s*let parentTask;\s*let task;\s*let subtask;[\s\S]*?const started = task\.enterSync\(\);/, '\n    const task = _GAK_NO_TASK;'],
  // No current-task bookkeeping around the host call, and no check for a
  // promise (our imports are synchronous). The call may span lines (0.3.0+'s
  // `read({keys, ranges, clock, entropy})`): it ends where the wrapper's
  // `})` and the statement's `;` do.
  [/_withGlobalCurrentTaskMeta\(\{\s*componentIdx: task\.componentIdx\(\),\s*taskID: task\.id\(\),\s*fn: \(\) => _trackHostOperation\(\(\) => ([\s\S]*?)\),\s*\}\)\s*;/, '$1;'],
  // Nothing to resolve: the trampoline returns (or writes) the result itself.
  [/task\.resolve\(\[.*\]\);\s*task\.exit\(\);/, ''],
];

function rewriteTrampoline(whole, name, params, body, fnName) {
  let out = body;
  for (const [find, replace] of TRAMPOLINE_EDITS) {
    const found = out.match(new RegExp(find.source, 'g'))?.length ?? 0;
    if (found !== 1) {
      throw new Error(`jco glue patch no longer applies to ${fnName} (edit ${find} found ${found} times, expected 1)`);
    }
    out = out.replace(find, replace);
  }
  return `const ${name} = function(${params}) {\n${out}\n  }\n  ${name}.fnName = '${fnName}';\n  ${name}.gakDirect = true;`;
}

// The contract this host implements (`wit/world.wit`): CONTRACT,
// CONTRACT_VERSION, generated from the WIT (contract.js).
export { CONTRACT, CONTRACT_VERSION };

/**
 * The names a component imports and exports at its top level, read from
 * its binary (the component model's import section, id 10, and export
 * section, id 11; everything else is skipped by its size). Enough to see
 * which contract a component speaks before jco is asked to transpile it:
 * jco transpiles a component of any version, and what fails then is a
 * link error naming a missing import, which says nothing about versions.
 * Throws on bytes that are not a component.
 */
export function componentNames(bytes) {
  let at = 0;
  const fail = (why) => {
    throw new Error(`not a WebAssembly component (${why} at byte ${at})`);
  };
  const byte = () => (at < bytes.length ? bytes[at++] : fail('truncated'));
  const leb = () => {
    // u32 or s33: only skipped or read as a length, so the sign never matters.
    let value = 0;
    for (let shift = 0; ; shift += 7) {
      const b = byte();
      if (shift < 28) value += (b & 0x7f) * 2 ** shift;
      if ((b & 0x80) === 0) return value;
      if (shift > 28) fail('an overlong number');
    }
  };
  const string = () => {
    const n = leb();
    if (at + n > bytes.length) fail('a truncated name');
    const s = new TextDecoder('utf-8', { fatal: true }).decode(bytes.subarray(at, at + n));
    at += n;
    return s;
  };
  const name = () => {
    const form = byte();
    if (form > 2) fail(`name form ${form}`);
    const s = string();
    if (form === 2) {
      // Name options (implements, version suffix, external id): skipped.
      for (let i = leb(); i > 0; i--) {
        byte();
        string();
      }
    }
    return s;
  };
  const kind = () => {
    const k = byte();
    if (k === 0x00) byte(); // a core sort (0x11: module)
    else if (k > 0x05) fail(`sort ${k}`);
    return k;
  };
  const typeRef = () => {
    const k = kind();
    if (k === 0x03) {
      // A type bound: eq <typeidx>, or sub resource.
      if (byte() === 0x00) leb();
    } else {
      leb(); // a type index, or a value type (one byte or an s33)
    }
  };
  const magic = [0x00, 0x61, 0x73, 0x6d];
  if (bytes.length < 8 || magic.some((b, i) => bytes[i] !== b)) fail('no wasm magic');
  if (bytes[6] !== 0x01 || bytes[7] !== 0x00) fail('a core module, not a component');
  at = 8;
  const imports = [];
  const exports = [];
  while (at < bytes.length) {
    const id = byte();
    const size = leb();
    const end = at + size;
    if (end > bytes.length) fail('a truncated section');
    if (id === 10 || id === 11) {
      for (let n = leb(); n > 0; n--) {
        if (id === 10) {
          imports.push(name());
          typeRef();
        } else {
          exports.push(name());
          kind();
          leb(); // its index
          if (byte() === 0x01) typeRef(); // an ascribed type
        }
      }
      if (at !== end) fail(`a section that does not end where it says (${end})`);
    }
    at = end;
  }
  return { imports, exports };
}

/**
 * Refuse a component of another contract version, naming both (world.wit:
 * "a host MUST refuse, when it opens, a component of a contract version
 * it does not implement"). Every `gak:kernel/…` name it imports or exports
 * must carry this host's version.
 */
export function checkContract(bytes, where) {
  let names;
  try {
    names = componentNames(bytes);
  } catch (e) {
    throw new GakError('storage', `${where} is not a gak:kernel component (${e.message}); this host implements ${CONTRACT}`, { cause: e });
  }
  const versions = new Set();
  for (const n of [...names.imports, ...names.exports]) {
    const m = /^gak:kernel\/[^@]+(?:@(.+))?$/.exec(n);
    if (m) versions.add(m[1] === undefined ? 'gak:kernel (unversioned)' : `gak:kernel@${m[1]}`);
  }
  if (versions.size === 0) {
    // It imports and exports no gak:kernel interface at all.
    throw new GakError('storage', `${where} is not a gak:kernel component; this host implements ${CONTRACT}`);
  }
  const other = [...versions].filter((v) => v !== CONTRACT);
  if (other.length > 0) {
    throw new GakError('storage', `${where} is ${other.join(' and ')}; this host implements ${CONTRACT}`);
  }
}

function jcoVersion() {
  const pkg = join(PACKAGE_DIR, 'node_modules', '@bytecodealliance', 'jco-transpile', 'package.json');
  return JSON.parse(readFileSync(pkg, 'utf8')).version;
}

// The patches' own text (finds, replacements, counts, the trampoline
// edits): an edit to any of them makes a new cache key even if PATCH_SET
// was not bumped, so a cached folder always holds glue patched this way.
const PATCH_DIGEST = createHash('sha256')
  .update(
    JSON.stringify([
      PATCHES.map((p) => [p.find.source, p.find.flags, String(p.replace), p.count]),
      TRAMPOLINE_EDITS.map(([find, replace]) => [find.source, replace]),
      String(rewriteTrampoline),
    ]),
  )
  .digest('hex');

function cacheKey(bytes) {
  return createHash('sha256')
    .update(bytes)
    .update(`\0jco-transpile ${jcoVersion()}\0${PATCH_SET}\0${PATCH_DIGEST}`)
    .digest('hex')
    .slice(0, 20);
}

/** Apply PATCHES to the generated module's source. */
export function patchGlue(source) {
  let out = source;
  for (const patch of PATCHES) {
    const found = out.match(patch.find)?.length ?? 0;
    if (found !== patch.count) {
      throw new Error(
        `jco glue patch no longer applies (found ${found}, expected ${patch.count}): ${patch.why}`,
      );
    }
    out = out.replace(patch.find, patch.replace);
  }
  return out;
}

// `gak:kernel/store@0.4.0` -> version, from the generated `.d.ts`, so imports
// can be given under both names (jco #708: the glue reads the unversioned
// one, its types name the versioned one).
function importVersions(dts) {
  const versions = {};
  const block = dts.match(/export interface ImportObject \{([\s\S]*?)\n\}/);
  for (const m of (block?.[1] ?? '').matchAll(/'([^'@]+)@([^']+)'/g)) versions[m[1]] = m[2];
  return versions;
}

/**
 * Transpile the component at `wasmPath` into `gen/<key>/` unless that is
 * already there. Returns the folder.
 */
export async function transpileComponent(wasmPath) {
  let bytes;
  try {
    bytes = readFileSync(wasmPath);
  } catch (e) {
    throw new Error(
      `cannot read the gak component at ${wasmPath} (${e.code ?? e.message}); build it with ` +
        '`cargo build -p gak`, or name it with --component FILE or GAK_COMPONENT',
    );
  }
  // Before the cache and before jco: a component of another contract is
  // never transpiled, and is refused with both versions named.
  checkContract(bytes, `the component at ${wasmPath}`);
  const dir = join(GEN_DIR, cacheKey(bytes));
  if (existsSync(join(dir, 'meta.json'))) return dir;
  const { transpileBytes } = await import('@bytecodealliance/jco-transpile');
  const out = await transpileBytes(new Uint8Array(bytes), {
    name: 'gak',
    instantiation: 'sync',
    noComponentErrorWrapping: true,
  });
  // Write everything into a private folder, then rename it into place: two
  // processes transpiling at once both succeed and neither sees half a folder.
  mkdirSync(GEN_DIR, { recursive: true });
  const tmp = join(GEN_DIR, `.tmp-${process.pid}-${randomBytes(4).toString('hex')}`);
  mkdirSync(tmp, { recursive: true });
  let dts = '';
  for (const [name, content] of Object.entries(out.files)) {
    const path = join(tmp, name);
    mkdirSync(dirname(path), { recursive: true });
    if (name === 'gak.js') {
      writeFileSync(path, patchGlue(Buffer.from(content).toString('utf8')));
    } else {
      writeFileSync(path, content);
      if (name === 'gak.d.ts') dts = Buffer.from(content).toString('utf8');
    }
  }
  writeFileSync(join(tmp, 'package.json'), '{ "type": "module" }\n');
  const meta = {
    component: wasmPath,
    imports: out.imports,
    versions: importVersions(dts),
    jcoTranspile: jcoVersion(),
    patches: PATCH_SET,
  };
  writeFileSync(join(tmp, 'meta.json'), JSON.stringify(meta, null, 2) + '\n');
  try {
    renameSync(tmp, dir);
  } catch (e) {
    rmSync(tmp, { recursive: true, force: true });
    if (!existsSync(join(dir, 'meta.json'))) throw e;
  }
  return dir;
}

const loaded = new Map();

/**
 * The transpiled component at `wasmPath` (see `componentPath`), loaded once
 * per process: `{ path, meta, instantiate(imports) }`. Core modules are
 * compiled once and shared by every instance.
 */
export async function loadComponent(wasmPath) {
  const path = componentPath(wasmPath);
  const dir = await transpileComponent(path);
  let entry = loaded.get(dir);
  if (!entry) {
    const meta = JSON.parse(readFileSync(join(dir, 'meta.json'), 'utf8'));
    const glue = await import(pathToFileURL(join(dir, 'gak.js')).href);
    const modules = new Map();
    const getCoreModule = (name) => {
      let module = modules.get(name);
      if (!module) {
        module = new WebAssembly.Module(readFileSync(join(dir, name)));
        modules.set(name, module);
      }
      return module;
    };
    entry = {
      path,
      dir,
      meta,
      instantiate: (imports) => glue.instantiate(getCoreModule, imports),
    };
    loaded.set(dir, entry);
  }
  return entry;
}
