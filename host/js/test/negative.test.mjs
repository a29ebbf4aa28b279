// Negative controls: deliberately broken hosts must FAIL the built-in
// vectors, or the suite proves nothing about the host it passes.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { builtin, run } from '../src/conformance/index.js';
import { ManualClock, MemoryBackend, openKernel } from '../src/index.js';

/** A memory store that commits a transaction even when the call failed. */
class LeakyBackend extends MemoryBackend {
  session() {
    const inner = super.session();
    return {
      begin() {
        const txn = inner.begin();
        // Every method of the honest transaction, but a rollback commits.
        return new Proxy(txn, {
          get: (target, name) => (name === 'rollback' ? () => target.commit() : target[name].bind(target)),
        });
      },
      close: () => inner.close(),
    };
  }
}

async function failures(fresh) {
  const verdicts = await run({ fresh }, builtin());
  return verdicts.filter((v) => v.failure !== undefined).map((v) => v.name);
}

test('a binding that commits refused calls fails the vectors', async () => {
  const failed = await failures((clock) => openKernel(new LeakyBackend(), { clock }));
  assert.ok(failed.some((n) => n.includes('sink/failed-body-rolls-back')), failed.join('\n'));
});

test('a host that ignores the injected clock fails the vectors', async () => {
  const failed = await failures(() => openKernel('memory:', { clock: new ManualClock(0n) }));
  assert.ok(failed.some((n) => n.includes('taskboard/expired-claim-taken-over')), failed.join('\n'));
  assert.ok(failed.length > 20, `${failed.length} failures`);
});

test('the same suite passes on the honest memory binding', async () => {
  assert.deepEqual(await failures((clock) => openKernel('memory:', { clock })), []);
});
