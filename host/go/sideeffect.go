package gak

/*
#include "gak.h"
*/
import "C"

import (
	"context"
	"time"
)

// Sideeffect is the idempotency gate, its verdicts, reconciliation and
// fenced sinks (SPEC 5).
type Sideeffect struct{ k *Kernel }

// Acquire is the single atomic decision for action with a lease of ttl:
// Granted, Replayed, Uncertain, InFlight or Contended. Refused
// CodeKeyReused when the key was first used with another fingerprint.
func (s Sideeffect) Acquire(ctx context.Context, action Action, ttl time.Duration) (Acquired, error) {
	a, err := cAction(action)
	if err != nil {
		return Acquired{}, err
	}
	ms, err := ttlMs(ttl)
	if err != nil {
		return Acquired{}, err
	}
	k, err := s.k.enter(ctx)
	if err != nil {
		return Acquired{}, err
	}
	defer s.k.leave()
	var out C.gak_acquired
	if err := check(C.gak_sideeffect_acquire(k, a, ms, &out)); err != nil {
		return Acquired{}, err
	}
	defer C.gak_acquired_clear(&out)
	// An answer of a kind this package does not know is an error: never
	// let a caller run an effect on it.
	return goAcquired(&out)
}

// Complete records the key completed with result and returns the first
// recorded result. Refused by the triple check: CodeResourceMismatch,
// CodeFenceStale, CodeNotHolder.
func (s Sideeffect) Complete(ctx context.Context, action Action, lease Lease, result []byte) ([]byte, error) {
	a, l, err := actionLease(action, lease)
	if err != nil {
		return nil, err
	}
	k, err := s.k.enter(ctx)
	if err != nil {
		return nil, err
	}
	defer s.k.leave()
	var out C.gak_bytes
	if err := check(C.gak_sideeffect_complete(k, a, l, bytes(result), &out)); err != nil {
		return nil, err
	}
	defer C.gak_bytes_clear(&out)
	return nonNil(goBytes(out)), nil
}

func actionLease(action Action, lease Lease) (C.gak_action, C.gak_lease, error) {
	a, err := cAction(action)
	if err != nil {
		return a, C.gak_lease{}, err
	}
	l, err := cLease(lease)
	return a, l, err
}

// Release releases the resource hold; the key's intent stays (so an
// effect that applied but was not recorded never runs twice).
func (s Sideeffect) Release(ctx context.Context, action Action, lease Lease) error {
	a, l, err := actionLease(action, lease)
	if err != nil {
		return err
	}
	k, err := s.k.enter(ctx)
	if err != nil {
		return err
	}
	defer s.k.leave()
	return check(C.gak_sideeffect_release(k, a, l))
}

// Abandon says the attempt definitely did not apply: the intent is
// withdrawn and the key may be granted again.
func (s Sideeffect) Abandon(ctx context.Context, action Action, lease Lease, reason string) error {
	a, l, err := actionLease(action, lease)
	if err != nil {
		return err
	}
	k, err := s.k.enter(ctx)
	if err != nil {
		return err
	}
	defer s.k.leave()
	return check(C.gak_sideeffect_abandon(k, a, l, str(reason)))
}

// Renew is a qualification check, then the hold and intent last until
// now + ttl. Refused CodeLeaseExpired, CodeFenceStale, CodeNotHolder.
func (s Sideeffect) Renew(ctx context.Context, action Action, lease Lease, ttl time.Duration) (Lease, error) {
	a, l, err := actionLease(action, lease)
	if err != nil {
		return Lease{}, err
	}
	ms, err := ttlMs(ttl)
	if err != nil {
		return Lease{}, err
	}
	k, err := s.k.enter(ctx)
	if err != nil {
		return Lease{}, err
	}
	defer s.k.leave()
	var out C.gak_lease
	if err := check(C.gak_sideeffect_renew(k, a, l, ms, &out)); err != nil {
		return Lease{}, err
	}
	defer C.gak_lease_clear(&out)
	return goLease(&out), nil
}

// MarkUncertain marks the key uncertain with reason (the hold stays:
// Release it).
func (s Sideeffect) MarkUncertain(ctx context.Context, action Action, lease Lease, reason string) error {
	a, l, err := actionLease(action, lease)
	if err != nil {
		return err
	}
	k, err := s.k.enter(ctx)
	if err != nil {
		return err
	}
	defer s.k.leave()
	return check(C.gak_sideeffect_mark_uncertain(k, a, l, str(reason)))
}

// BeginReconcile claims the right to reconcile an uncertain key for ttl.
// Refused CodeNotUncertain, CodeReconcileTaken.
func (s Sideeffect) BeginReconcile(ctx context.Context, action Action, ttl time.Duration) (ReconcileClaim, error) {
	a, err := cAction(action)
	if err != nil {
		return ReconcileClaim{}, err
	}
	ms, err := ttlMs(ttl)
	if err != nil {
		return ReconcileClaim{}, err
	}
	k, err := s.k.enter(ctx)
	if err != nil {
		return ReconcileClaim{}, err
	}
	defer s.k.leave()
	var out C.gak_reconcile_claim
	if err := check(C.gak_sideeffect_begin_reconcile(k, a, ms, &out)); err != nil {
		return ReconcileClaim{}, err
	}
	defer C.gak_reconcile_claim_clear(&out)
	return goReconcileClaim(&out), nil
}

// ResolveUncertain records a reconciler's verdict; the first verdict
// wins. Refused CodeNotUncertain, CodeUnsafeNotRetryable,
// CodeReconcileTaken.
func (s Sideeffect) ResolveUncertain(ctx context.Context, action Action, r Resolution) (Resolved, error) {
	a, err := cAction(action)
	if err != nil {
		return Resolved{}, err
	}
	res, err := cResolution(r)
	if err != nil {
		return Resolved{}, err
	}
	k, err := s.k.enter(ctx)
	if err != nil {
		return Resolved{}, err
	}
	defer s.k.leave()
	var out C.gak_resolved
	if err := check(C.gak_sideeffect_resolve_uncertain(k, a, res, &out)); err != nil {
		return Resolved{}, err
	}
	defer C.gak_resolved_clear(&out)
	return goResolved(&out)
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

// List is one page of keys: of state ("" for all) after the key after
// ("" from the start), at most limit (1–1000).
func (s Sideeffect) List(ctx context.Context, state KeyState, after string, limit int) (KeyPage, error) {
	n, err := keyStateNumber(state)
	if err != nil {
		return KeyPage{}, err
	}
	l, err := limit32(limit)
	if err != nil {
		return KeyPage{}, err
	}
	k, err := s.k.enter(ctx)
	if err != nil {
		return KeyPage{}, err
	}
	defer s.k.leave()
	var out C.gak_key_page
	if err := check(C.gak_sideeffect_list(k, n, str(after), l, &out)); err != nil {
		return KeyPage{}, err
	}
	defer C.gak_key_page_clear(&out)
	return goKeyPage(&out), nil
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

// Count is how many keys are in each state as List shows them (an expired
// intent is uncertain), and since when the oldest uncertain key is, read
// from 256 count records and an index of keys by the time they turn
// uncertain, never the keys. Exact is false on a store a format-1 kernel
// wrote until Recount has visited its keys.
func (s Sideeffect) Count(ctx context.Context) (KeyCounts, error) {
	k, err := s.k.enter(ctx)
	if err != nil {
		return KeyCounts{}, err
	}
	defer s.k.leave()
	var out C.gak_key_counts
	if err := check(C.gak_sideeffect_count(k, &out)); err != nil {
		return KeyCounts{}, err
	}
	return goKeyCounts(&out), nil
}

// Recount counts up to limit (1–1000) of the keys a format-1 kernel wrote
// that Count does not cover yet, and says whether every key is counted now.
func (s Sideeffect) Recount(ctx context.Context, limit int) (bool, error) {
	l, err := limit32(limit)
	if err != nil {
		return false, err
	}
	k, err := s.k.enter(ctx)
	if err != nil {
		return false, err
	}
	defer s.k.leave()
	var done C.bool
	if err := check(C.gak_sideeffect_recount(k, l, &done)); err != nil {
		return false, err
	}
	return bool(done), nil
}
