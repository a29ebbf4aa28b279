package gak

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Exactly-once at a remote system needs the remote to deduplicate too:
// pass lease.Key (the idempotency key) to the remote API — e.g. as an
// Idempotency-Key header — and lease.Fence to any store that can compare
// it. That wiring is the embedder's; the kernel guarantees the local
// half: it never starts the body twice for one key.

// EffectBody runs one attempt of an effect under lease. Return the result
// to record; an error means the effect may or may not have happened (the
// key turns uncertain), unless it is NotApplied(err) (it surely did not:
// the attempt is abandoned). ctx is cancelled when the runner's renewal is
// refused (the lease is lost: hb.Check says so) or the caller's context is.
type EffectBody func(ctx context.Context, lease Lease, hb *Heartbeat) ([]byte, error)

// NotAppliedError is a body's report that its effect surely did not
// happen (refused before sending): see NotApplied.
type NotAppliedError struct{ Err error }

func (e *NotAppliedError) Error() string { return "not applied: " + errText(e.Err) }

// Unwrap is the body's own error.
func (e *NotAppliedError) Unwrap() error { return e.Err }

// NotApplied marks a body's error as "the effect surely did not happen":
// the runner abandons the attempt, and the key may be granted again.
func NotApplied(err error) error { return &NotAppliedError{Err: err} }

// BodyFailedError is what Runner.Run returns when the body failed in a
// way that may have applied the effect: the key was marked uncertain and
// its resource released (best effort), and a later run answers Uncertain
// until a reconciler resolves it. Err is the body's error.
type BodyFailedError struct {
	Key string
	Err error
}

func (e *BodyFailedError) Error() string {
	return fmt.Sprintf("gak: the effect body failed, key %q is uncertain: %s", e.Key, errText(e.Err))
}

// Unwrap is the body's own error.
func (e *BodyFailedError) Unwrap() error { return e.Err }

func errText(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// Ran is how a run ended when nothing failed: Applied or Replayed (with
// Result), Uncertain (Reason), InFlight, Contended (Until). Only Applied
// called the body.
type Ran struct {
	Kind   Kind
	Result []byte
	Reason string
	Until  uint64
}

// Runner runs effect bodies through the side-effect gate (host/HOSTS.md,
// "The side-effect runner"): acquire → (replayed | uncertain | in flight |
// contended: returned, the body is not called) | granted → body, its hold
// renewed every ttl/3 from a goroutine while it runs → complete.
type Runner struct {
	k     *Kernel
	ttl   time.Duration
	every time.Duration
}

// NewRunner grants leases of ttl, renewed every ttl/3 while a body runs.
func NewRunner(k *Kernel, ttl time.Duration) *Runner {
	every := ttl / 3
	if every < time.Millisecond {
		every = time.Millisecond
	}
	return &Runner{k: k, ttl: ttl, every: every}
}

// WithRenewals renews the hold every `every` (0: never; then ttl must
// cover the whole body).
func (r *Runner) WithRenewals(every time.Duration) *Runner {
	c := *r
	c.every = every
	return &c
}

// Heartbeat is a running body's view of its lease while the runner keeps
// it alive: the current lease, how many renewals succeeded, and — as soon
// as a renewal is refused — that the lease is lost, so a long body can
// stop early instead of finishing work whose result will be refused.
// No fmt verb shows the lease's holder.
type Heartbeat struct {
	// The state is behind a pointer so that a Heartbeat value can be
	// printed (Format) without copying its mutex.
	st *heartbeatState
}

type heartbeatState struct {
	mu       sync.Mutex
	lease    Lease
	renewals uint64
	lost     error
	changed  chan struct{}
	cancel   context.CancelFunc
}

func newHeartbeat(lease Lease, cancel context.CancelFunc) *Heartbeat {
	return &Heartbeat{st: &heartbeatState{lease: lease, changed: make(chan struct{}), cancel: cancel}}
}

// Lease is the lease as last renewed.
func (h *Heartbeat) Lease() Lease {
	h.st.mu.Lock()
	defer h.st.mu.Unlock()
	return h.st.lease
}

// Renewals is how many renewals succeeded so far.
func (h *Heartbeat) Renewals() uint64 {
	h.st.mu.Lock()
	defer h.st.mu.Unlock()
	return h.st.renewals
}

// Check is a *Refused with CodeLeaseLost once a renewal was refused (the
// resource changed hands, the attempt is over, or the hold expired):
// stop and return. Nil while the lease holds.
func (h *Heartbeat) Check() error {
	h.st.mu.Lock()
	defer h.st.mu.Unlock()
	if h.st.lost != nil {
		return &Refused{Code: CodeLeaseLost, Message: "lease-lost: a renewal was refused", Err: h.st.lost}
	}
	return nil
}

// Refusal is the refusal that lost the lease, or nil.
func (h *Heartbeat) Refusal() error {
	h.st.mu.Lock()
	defer h.st.mu.Unlock()
	return h.st.lost
}

// Changed is closed at the next renewal or at the loss of the lease
// (ask again for the change after that).
func (h *Heartbeat) Changed() <-chan struct{} {
	h.st.mu.Lock()
	defer h.st.mu.Unlock()
	return h.st.changed
}

func (st *heartbeatState) notify() {
	close(st.changed)
	st.changed = make(chan struct{})
}

func (h *Heartbeat) renewed(l Lease) {
	h.st.mu.Lock()
	defer h.st.mu.Unlock()
	h.st.lease = l
	h.st.renewals++
	h.st.notify()
}

// lose cancels the body's context before it publishes the loss, so a body
// that sees Check fail always finds its context cancelled too.
func (h *Heartbeat) lose(err error) {
	h.st.cancel()
	h.st.mu.Lock()
	defer h.st.mu.Unlock()
	h.st.lost = err
	h.st.notify()
}

// Run runs body at most once per action.Key:
//
//   - granted → body → Complete → Ran{Kind: Applied, Result}; if Complete
//     fails its error is returned and nothing is retried (the intent stays
//     and the key turns uncertain when it expires, never a second grant);
//   - replayed, uncertain, in flight, contended → that Ran, body not called;
//   - the body fails → MarkUncertain ("body failed"), Release (best
//     effort) → *BodyFailedError; a panic is raised again after them, and
//     a body that ends its goroutine (runtime.Goexit, t.FailNow) leaves the
//     key the same way (uncertain, resource released) before the goroutine
//     ends;
//   - the body returns NotApplied(err) → Abandon (best effort) →
//     *NotAppliedError.
//
// Renewals stop before Complete, MarkUncertain or Abandon is sent; each
// renewal's lease replaces the one completed with. A renewal that fails
// with a *StorageError is retried at the next tick; a refused one loses
// the lease (hb.Check, ctx cancelled).
func (r *Runner) Run(ctx context.Context, action Action, body EffectBody) (Ran, error) {
	gate := r.k.Sideeffect()
	acquired, err := gate.Acquire(ctx, action, r.ttl)
	if err != nil {
		return Ran{}, err
	}
	switch acquired.Kind {
	case Granted:
	case Replayed:
		return Ran{Kind: Replayed, Result: acquired.Result}, nil
	case Uncertain:
		return Ran{Kind: Uncertain, Reason: acquired.Reason}, nil
	case InFlight:
		return Ran{Kind: InFlight}, nil
	case Contended:
		return Ran{Kind: Contended, Until: acquired.Until}, nil
	default:
		return Ran{}, &StorageError{Message: fmt.Sprintf("acquire answered %q, which this host does not know", acquired.Kind)}
	}
	bodyCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	hb := newHeartbeat(acquired.Lease, cancel)
	stop := make(chan struct{})
	var renewing sync.WaitGroup
	if r.every > 0 {
		renewing.Add(1)
		go func() {
			defer renewing.Done()
			r.keepAlive(action, hb, stop)
		}()
	}
	// The verdict is sent whatever the caller's context says now: an
	// effect that ran must be recorded.
	verdict := context.Background()
	returned := false
	defer func() {
		if returned {
			return
		}
		// The body called runtime.Goexit (t.FailNow): this goroutine ends
		// here and Run never returns. The effect may or may not have
		// happened, as after a failed body, so the key is marked uncertain
		// and the resource released — left alone, the renewals would keep
		// the key in flight for ever.
		close(stop)
		renewing.Wait()
		lease := hb.Lease()
		_ = gate.MarkUncertain(verdict, action, lease, "body failed")
		_ = gate.Release(verdict, action, lease)
	}()
	result, bodyErr := callBody(bodyCtx, body, acquired.Lease, hb)
	returned = true
	close(stop)
	renewing.Wait()
	lease := hb.Lease()
	if bodyErr == nil {
		recorded, err := gate.Complete(verdict, action, lease, result)
		if err != nil {
			return Ran{}, err
		}
		return Ran{Kind: Applied, Result: recorded}, nil
	}
	var notApplied *NotAppliedError
	if errors.As(bodyErr, &notApplied) {
		_ = gate.Abandon(verdict, action, lease, "body reported not applied")
		return Ran{}, notApplied
	}
	// Best effort: if either call fails, the intent is still there and the
	// key turns uncertain when it expires.
	_ = gate.MarkUncertain(verdict, action, lease, "body failed")
	_ = gate.Release(verdict, action, lease)
	if p, ok := bodyErr.(*bodyPanic); ok {
		panic(p.value)
	}
	return Ran{}, &BodyFailedError{Key: action.Key, Err: bodyErr}
}

// callBody runs the body, turning a panic into a body failure (the key
// must turn uncertain: the panic may have come after the effect) and
// raising it again once the runner is done.
func callBody(ctx context.Context, body EffectBody, lease Lease, hb *Heartbeat) (result []byte, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = &bodyPanic{value: p}
		}
	}()
	return body(ctx, lease, hb)
}

type bodyPanic struct{ value interface{} }

func (p *bodyPanic) Error() string { return fmt.Sprintf("the body panicked: %v", p.value) }

// keepAlive renews every r.every until stop is closed or a renewal is
// refused.
func (r *Runner) keepAlive(action Action, hb *Heartbeat, stop <-chan struct{}) {
	ticker := time.NewTicker(r.every)
	defer ticker.Stop()
	for {
		select {
		case <-stop:
			return
		case <-ticker.C:
		}
		// The body may have finished while the ticker fired.
		select {
		case <-stop:
			return
		default:
		}
		lease, err := r.k.Sideeffect().Renew(context.Background(), action, hb.Lease(), r.ttl)
		var storage *StorageError
		switch {
		case err == nil:
			hb.renewed(lease)
		case errors.As(err, &storage):
			// Transient: try again at the next tick.
		default:
			hb.lose(err)
			return
		}
	}
}
