package gak

/*
#include "gak.h"
*/
import "C"

import (
	"context"
	"time"
	"unsafe"
)

// Sideeffect is the idempotency gate, its verdicts, reconciliation and
// fenced sinks (SPEC 5).
type Sideeffect struct{ k *Kernel }

func retryNumber(r RetrySafety) (C.gak_retry_safety, error) {
	switch r {
	case "", Safe:
		return C.GAK_RETRY_SAFE, nil
	case Unsafe:
		return C.GAK_RETRY_UNSAFE, nil
	}
	return 0, refused(CodeInvalidInput, "unknown retry-safety "+quote(string(r)))
}

func retryName(n C.gak_retry_safety) RetrySafety {
	if n == C.GAK_RETRY_UNSAFE {
		return Unsafe
	}
	return Safe
}

func cAction(a Action) (C.gak_action, error) {
	safety, err := retryNumber(a.RetrySafety)
	return C.gak_action{
		key:          str(a.Key),
		resource:     str(a.Resource),
		retry_safety: safety,
		fingerprint:  str(a.Fingerprint),
	}, err
}

func cLease(l Lease) C.gak_lease {
	return C.gak_lease{
		key:      str(l.Key),
		resource: str(l.Resource),
		fence:    C.uint64_t(l.Fence),
		holder:   str(l.Holder),
		until:    C.uint64_t(l.Until),
	}
}

func goLease(l *C.gak_lease) Lease {
	return Lease{
		Key:      goStr(l.key),
		Resource: goStr(l.resource),
		Fence:    uint64(l.fence),
		Holder:   goStr(l.holder),
		Until:    uint64(l.until),
	}
}

func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// Acquire is the single atomic decision for action with a lease of ttl:
// Granted, Replayed, Uncertain, InFlight or Contended. Refused
// CodeKeyReused when the key was first used with another fingerprint.
func (s Sideeffect) Acquire(ctx context.Context, action Action, ttl time.Duration) (Acquired, error) {
	k, err := s.k.enter(ctx)
	if err != nil {
		return Acquired{}, err
	}
	defer s.k.leave()
	a, err := cAction(action)
	if err != nil {
		return Acquired{}, err
	}
	ms, err := ttlMs(ttl)
	if err != nil {
		return Acquired{}, err
	}
	var out C.gak_acquired
	if err := check(C.gak_sideeffect_acquire(k, a, ms, &out)); err != nil {
		return Acquired{}, err
	}
	defer C.gak_acquired_clear(&out)
	switch out.kind {
	case C.GAK_ACQUIRED_GRANTED:
		return Acquired{Kind: Granted, Lease: goLease(&out.lease)}, nil
	case C.GAK_ACQUIRED_REPLAYED:
		return Acquired{Kind: Replayed, Result: nonNil(goBytes(out.result))}, nil
	case C.GAK_ACQUIRED_UNCERTAIN:
		return Acquired{Kind: Uncertain, Reason: goStr(out.reason)}, nil
	case C.GAK_ACQUIRED_IN_FLIGHT:
		return Acquired{Kind: InFlight}, nil
	case C.GAK_ACQUIRED_CONTENDED:
		return Acquired{Kind: Contended, Until: uint64(out.until)}, nil
	}
	// Never let a caller run an effect on an answer this host does not know.
	return Acquired{}, &StorageError{Message: "acquire answered an unknown kind"}
}

// Complete records the key completed with result and returns the first
// recorded result. Refused by the triple check: CodeResourceMismatch,
// CodeFenceStale, CodeNotHolder.
func (s Sideeffect) Complete(ctx context.Context, action Action, lease Lease, result []byte) ([]byte, error) {
	k, err := s.k.enter(ctx)
	if err != nil {
		return nil, err
	}
	defer s.k.leave()
	a, err := cAction(action)
	if err != nil {
		return nil, err
	}
	var out C.gak_bytes
	if err := check(C.gak_sideeffect_complete(k, a, cLease(lease), bytes(result), &out)); err != nil {
		return nil, err
	}
	defer C.gak_bytes_clear(&out)
	return nonNil(goBytes(out)), nil
}

// Release releases the resource hold; the key's intent stays (so an
// effect that applied but was not recorded never runs twice).
func (s Sideeffect) Release(ctx context.Context, action Action, lease Lease) error {
	k, err := s.k.enter(ctx)
	if err != nil {
		return err
	}
	defer s.k.leave()
	a, err := cAction(action)
	if err != nil {
		return err
	}
	return check(C.gak_sideeffect_release(k, a, cLease(lease)))
}

// Abandon says the attempt definitely did not apply: the intent is
// withdrawn and the key may be granted again.
func (s Sideeffect) Abandon(ctx context.Context, action Action, lease Lease, reason string) error {
	k, err := s.k.enter(ctx)
	if err != nil {
		return err
	}
	defer s.k.leave()
	a, err := cAction(action)
	if err != nil {
		return err
	}
	return check(C.gak_sideeffect_abandon(k, a, cLease(lease), str(reason)))
}

// Renew is a qualification check, then the hold and intent last until
// now + ttl. Refused CodeLeaseExpired, CodeFenceStale, CodeNotHolder.
func (s Sideeffect) Renew(ctx context.Context, action Action, lease Lease, ttl time.Duration) (Lease, error) {
	k, err := s.k.enter(ctx)
	if err != nil {
		return Lease{}, err
	}
	defer s.k.leave()
	a, err := cAction(action)
	if err != nil {
		return Lease{}, err
	}
	ms, err := ttlMs(ttl)
	if err != nil {
		return Lease{}, err
	}
	var out C.gak_lease
	if err := check(C.gak_sideeffect_renew(k, a, cLease(lease), ms, &out)); err != nil {
		return Lease{}, err
	}
	defer C.gak_lease_clear(&out)
	return goLease(&out), nil
}

// MarkUncertain marks the key uncertain with reason (the hold stays:
// Release it).
func (s Sideeffect) MarkUncertain(ctx context.Context, action Action, lease Lease, reason string) error {
	k, err := s.k.enter(ctx)
	if err != nil {
		return err
	}
	defer s.k.leave()
	a, err := cAction(action)
	if err != nil {
		return err
	}
	return check(C.gak_sideeffect_mark_uncertain(k, a, cLease(lease), str(reason)))
}

// BeginReconcile claims the right to reconcile an uncertain key for ttl.
// Refused CodeNotUncertain, CodeReconcileTaken.
func (s Sideeffect) BeginReconcile(ctx context.Context, action Action, ttl time.Duration) (ReconcileClaim, error) {
	k, err := s.k.enter(ctx)
	if err != nil {
		return ReconcileClaim{}, err
	}
	defer s.k.leave()
	a, err := cAction(action)
	if err != nil {
		return ReconcileClaim{}, err
	}
	ms, err := ttlMs(ttl)
	if err != nil {
		return ReconcileClaim{}, err
	}
	var out C.gak_reconcile_claim
	if err := check(C.gak_sideeffect_begin_reconcile(k, a, ms, &out)); err != nil {
		return ReconcileClaim{}, err
	}
	defer C.gak_reconcile_claim_clear(&out)
	return ReconcileClaim{Claim: goStr(out.claim), Until: uint64(out.until)}, nil
}

// ResolveUncertain records a reconciler's verdict; the first verdict
// wins. Refused CodeNotUncertain, CodeUnsafeNotRetryable,
// CodeReconcileTaken.
func (s Sideeffect) ResolveUncertain(ctx context.Context, action Action, r Resolution) (Resolved, error) {
	k, err := s.k.enter(ctx)
	if err != nil {
		return Resolved{}, err
	}
	defer s.k.leave()
	a, err := cAction(action)
	if err != nil {
		return Resolved{}, err
	}
	res := C.gak_resolution{
		applied:         C.bool(r.Applied),
		result:          optBytes(r.Result),
		force_retryable: C.bool(r.ForceRetryable),
		claim:           str(r.Claim),
	}
	var out C.gak_resolved
	if err := check(C.gak_sideeffect_resolve_uncertain(k, a, res, &out)); err != nil {
		return Resolved{}, err
	}
	defer C.gak_resolved_clear(&out)
	if out.kind == C.GAK_RESOLVED_CLEARED {
		return Resolved{Cleared: true}, nil
	}
	return Resolved{Result: nonNil(goBytes(out.result))}, nil
}

// SinkSeen is the highest fence the sink resource has seen (0 when never
// written).
func (s Sideeffect) SinkSeen(ctx context.Context, resource string) (uint64, error) {
	k, err := s.k.enter(ctx)
	if err != nil {
		return 0, err
	}
	defer s.k.leave()
	var out C.uint64_t
	if err := check(C.gak_sideeffect_sink_seen(k, str(resource), &out)); err != nil {
		return 0, err
	}
	return uint64(out), nil
}

func keyStateNumber(s KeyState) (C.gak_key_state, error) {
	switch s {
	case "":
		return C.GAK_KEY_ANY, nil
	case KeyCleared:
		return C.GAK_KEY_CLEARED, nil
	case KeyInFlight:
		return C.GAK_KEY_IN_FLIGHT, nil
	case KeyUncertain:
		return C.GAK_KEY_UNCERTAIN, nil
	case KeyCompleted:
		return C.GAK_KEY_COMPLETED, nil
	}
	return 0, refused(CodeInvalidInput, "unknown key state "+quote(string(s)))
}

func keyStateName(n C.gak_key_state) KeyState {
	switch n {
	case C.GAK_KEY_CLEARED:
		return KeyCleared
	case C.GAK_KEY_IN_FLIGHT:
		return KeyInFlight
	case C.GAK_KEY_UNCERTAIN:
		return KeyUncertain
	case C.GAK_KEY_COMPLETED:
		return KeyCompleted
	}
	return KeyState("unknown")
}

func goKeyInfo(i *C.gak_key_info) KeyInfo {
	return KeyInfo{
		Key:              goStr(i.key),
		State:            keyStateName(i.state),
		RetrySafety:      retryName(i.retry_safety),
		Fingerprint:      goStr(i.fingerprint),
		Resource:         goStr(i.resource),
		Until:            goOpt(i.has_until, i.until),
		Reason:           goStr(i.reason),
		CompletedAt:      goOpt(i.has_completed_at, i.completed_at),
		ReconcilingUntil: goOpt(i.has_reconciling_until, i.reconciling_until),
	}
}

// List is one page of keys: of state ("" for all) after the key after
// ("" from the start), at most limit (1–1000).
func (s Sideeffect) List(ctx context.Context, state KeyState, after string, limit int) (KeyPage, error) {
	k, err := s.k.enter(ctx)
	if err != nil {
		return KeyPage{}, err
	}
	defer s.k.leave()
	n, err := keyStateNumber(state)
	if err != nil {
		return KeyPage{}, err
	}
	l, err := limit32(limit)
	if err != nil {
		return KeyPage{}, err
	}
	var out C.gak_key_page
	if err := check(C.gak_sideeffect_list(k, n, str(after), l, &out)); err != nil {
		return KeyPage{}, err
	}
	defer C.gak_key_page_clear(&out)
	page := KeyPage{Items: make([]KeyInfo, int(out.len)), Next: goStr(out.next)}
	if out.len > 0 {
		items := unsafe.Slice(out.items, int(out.len))
		for i := range items {
			page.Items[i] = goKeyInfo(&items[i])
		}
	}
	return page, nil
}

// Get is the key as List shows it, or CodeNotFound.
func (s Sideeffect) Get(ctx context.Context, key string) (KeyInfo, error) {
	k, err := s.k.enter(ctx)
	if err != nil {
		return KeyInfo{}, err
	}
	defer s.k.leave()
	var out C.gak_key_info
	if err := check(C.gak_sideeffect_get(k, str(key), &out)); err != nil {
		return KeyInfo{}, err
	}
	defer C.gak_key_info_clear(&out)
	return goKeyInfo(&out), nil
}
