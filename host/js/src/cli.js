// The command line: `gak.mjs demo [--store URL] [--component FILE]`,
// `gak.mjs conformance [--store URL] [--component FILE] [FILE_OR_DIR…]`.
import { builtin, loadPaths, render, run, UrlTarget } from './conformance/index.js';
import { runDemo } from './demo.js';
import { loadComponent } from './component.js';

const USAGE = `gak (JavaScript host) — a crash-safe coordination kernel

usage:
  node host/js/bin/gak.mjs demo [--store URL] [--component FILE]
      the reference-runtime story, step by step
  node host/js/bin/gak.mjs conformance [--store URL] [--component FILE] [FILE_OR_DIR...]
      replay vector files (default: the built-in suite, tests/vectors)

store URLs: memory:   sqlite:PATH[?synchronous=normal]
  demo default: sqlite:gak-demo.db      conformance default: memory:
component: --component FILE, else $GAK_COMPONENT, else
  $CARGO_TARGET_DIR/component/gak.wasm, else <repo>/target/component/gak.wasm
  (published by \`cargo build -p gak\`)`;

class UsageError extends Error {}

function parse(rest) {
  const args = { store: undefined, component: undefined, paths: [] };
  for (let i = 0; i < rest.length; i++) {
    const a = rest[i];
    const value = (flag) => {
      if (a.startsWith(`${flag}=`)) return a.slice(flag.length + 1);
      const v = rest[++i];
      if (v === undefined) throw new UsageError(`${flag} needs a value`);
      return v;
    };
    if (a === '--store' || a.startsWith('--store=')) args.store = value('--store');
    else if (a === '--component' || a.startsWith('--component=')) args.component = value('--component');
    else if (a.startsWith('-')) throw new UsageError(`unknown option ${a}\n\n${USAGE}`);
    else args.paths.push(a);
  }
  return args;
}

async function conformance(args) {
  // A missing component is one error, not a failure per scenario.
  await loadComponent(args.component);
  const target = new UrlTarget(args.store ?? 'memory:', args.component);
  const files = args.paths.length === 0 ? builtin() : loadPaths(args.paths);
  const verdicts = await run(target, files);
  process.stdout.write(render(verdicts));
  return verdicts.length > 0 && verdicts.every((v) => v.failure === undefined) ? 0 : 1;
}

async function demo(args) {
  if (args.paths.length > 0) throw new UsageError('demo takes no paths');
  return runDemo(args.store ?? 'sqlite:gak-demo.db', args.component);
}

/** Run the CLI; returns the exit code. */
export async function runCli(argv) {
  const [command, ...rest] = argv;
  try {
    switch (command) {
      case 'demo':
        return await demo(parse(rest));
      case 'conformance':
        return await conformance(parse(rest));
      case '-h':
      case '--help':
      case 'help':
        console.log(USAGE);
        return 0;
      case undefined:
        console.log(USAGE);
        return 2;
      default:
        throw new UsageError(`unknown command ${JSON.stringify(command)}\n\n${USAGE}`);
    }
  } catch (e) {
    console.error(`gak: ${e.message}`);
    return 2;
  }
}
