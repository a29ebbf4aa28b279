// The shipped .d.ts compiles, and rejects what it must (u64 as number, an
// unknown error code): test/types/usage.ts under `tsc --strict`.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const pkg = fileURLToPath(new URL('..', import.meta.url));

test('the .d.ts type-checks a typical use under tsc --strict', () => {
  const tsc = fileURLToPath(new URL('../node_modules/typescript/bin/tsc', import.meta.url));
  const r = spawnSync(
    process.execPath,
    [tsc, '--noEmit', '--strict', '--target', 'es2022', '--module', 'nodenext', '--moduleResolution', 'nodenext',
      '--lib', 'es2022', '--skipLibCheck', 'false', 'test/types/usage.ts'],
    { cwd: pkg, encoding: 'utf8' },
  );
  assert.equal(r.status, 0, `${r.stdout}\n${r.stderr}`);
});
