// `runEffect`: the body of an effect runs at most once per idempotency key,
// whatever crashes in between.
//
// Exactly-once at a remote system needs the remote to deduplicate too: pass
// `lease.key` (the idempotency key) to the remote API — e.g. as an
// `Idempotency-Key` header — and `lease.fence` to any store that can
// compare it. That wiring is the embedder's; the kernel guarantees the local
// half: it never *starts* the body twice for one key.
import { GakError } from './errors.js';
import * as v from './values.js';

/**
 * Thrown by an effect body that definitely did NOT apply its effect (refused
 * before sending): the key is abandoned and may be granted again. Any other
 * error means "may have applied": the key becomes uncertain.
 */
export class NotApplied extends Error {
  constructor(message, options) {
    super(message, options);
    this.name = 'NotApplied';
  }
}

/**
 * acquire → (replayed | uncertain | in-flight | contended: return without
 * calling `body`) | granted → `await body(lease)` → complete.
 *
 * Answers one of:
 * - `{tag: 'applied', result}`: the body ran now; its result is recorded;
 * - `{tag: 'replayed', result}`: the key completed before; body not called;
 * - `{tag: 'uncertain', reason, error?}`: the key may have been applied and
 *   must be reconciled. With `error`, the body ran and threw: the key was
 *   marked uncertain and its hold released;
 * - `{tag: 'not-applied', error}`: the body threw `NotApplied`; the key was
 *   abandoned and may be granted again;
 * - `{tag: 'in-flight'}` / `{tag: 'contended', until}`: another attempt or
 *   key holds it; body not called.
 *
 * Throws `GakError` when the kernel refuses or the store fails. If recording
 * the result fails after the body ran, the intent stays and the key surfaces
 * as uncertain once the lease expires: never as a second grant.
 */
export async function runEffect(kernel, action, ttl, body) {
  if (typeof body !== 'function') throw new GakError('invalid-input', 'body: expected a function');
  const gate = kernel.sideeffect;
  const acquired = gate.acquire(action, ttl);
  if (acquired.tag !== 'granted') return acquired;
  const { lease } = acquired;
  let result;
  try {
    result = v.bytes('body result', await body(lease));
  } catch (error) {
    if (error instanceof NotApplied) {
      bestEffort(() => gate.abandon(action, lease, 'body reported not applied'));
      return { tag: 'not-applied', error };
    }
    // Best effort: if either call fails, the intent is still there and the
    // key turns uncertain when the lease expires.
    bestEffort(() => gate.markUncertain(action, lease, 'body failed'));
    bestEffort(() => gate.release(action, lease));
    return { tag: 'uncertain', reason: 'body failed', error };
  }
  return { tag: 'applied', result: gate.complete(action, lease, result) };
}

function bestEffort(call) {
  try {
    call();
  } catch {
    // see the callers
  }
}
