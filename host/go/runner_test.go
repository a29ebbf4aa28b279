package gak_test

import (
	"context"
	"errors"
	"testing"
	"time"

	gak "github.com/gak-kernel/gak/host/go"
)

func TestTheRunnerRunsABodyAtMostOnce(t *testing.T) {
	k := open(t, "memory:")
	runner := gak.NewRunner(k, 30*time.Second)
	mail := gak.NewAction("welcome/42", "smtp")
	calls := 0
	send := func(_ context.Context, lease gak.Lease, _ *gak.Heartbeat) ([]byte, error) {
		calls++
		if lease.Key != "welcome/42" {
			t.Errorf("lease for %q", lease.Key)
		}
		return []byte("message-id"), nil
	}
	ran, err := runner.Run(ctx, mail, send)
	if err != nil || ran.Kind != gak.Applied || string(ran.Result) != "message-id" {
		t.Fatalf("%+v %v", ran, err)
	}
	ran, err = runner.Run(ctx, mail, send)
	if err != nil || ran.Kind != gak.Replayed || string(ran.Result) != "message-id" || calls != 1 {
		t.Fatalf("%+v %v (calls %d)", ran, err, calls)
	}
}

func TestAFailingBodyLeavesTheKeyUncertain(t *testing.T) {
	k := open(t, "memory:")
	runner := gak.NewRunner(k, 30*time.Second)
	refund := gak.NewAction("refund/7", "payments")
	reset := errors.New("connection reset after sending")
	_, err := runner.Run(ctx, refund, func(context.Context, gak.Lease, *gak.Heartbeat) ([]byte, error) {
		return nil, reset
	})
	var failed *gak.BodyFailedError
	if !errors.As(err, &failed) || !errors.Is(err, reset) {
		t.Fatalf("want a BodyFailedError wrapping the body's error, got %v", err)
	}
	ran, err := runner.Run(ctx, refund, func(context.Context, gak.Lease, *gak.Heartbeat) ([]byte, error) {
		t.Fatal("the body ran on an uncertain key")
		return nil, nil
	})
	if err != nil || ran.Kind != gak.Uncertain || ran.Reason != "body failed" {
		t.Fatalf("%+v %v", ran, err)
	}
	// The resource was released: another key on it is granted.
	other, err := k.Sideeffect().Acquire(ctx, gak.NewAction("refund/8", "payments"), time.Second)
	if err != nil || other.Kind != gak.Granted {
		t.Fatalf("%+v %v", other, err)
	}
}

func TestNotAppliedAbandonsSoTheKeyMayRunAgain(t *testing.T) {
	k := open(t, "memory:")
	runner := gak.NewRunner(k, 30*time.Second)
	a := gak.NewAction("k", "r")
	refusedBySMTP := errors.New("550 mailbox unavailable")
	_, err := runner.Run(ctx, a, func(context.Context, gak.Lease, *gak.Heartbeat) ([]byte, error) {
		return nil, gak.NotApplied(refusedBySMTP)
	})
	var notApplied *gak.NotAppliedError
	if !errors.As(err, &notApplied) || !errors.Is(err, refusedBySMTP) {
		t.Fatalf("%v", err)
	}
	ran, err := runner.Run(ctx, a, func(_ context.Context, l gak.Lease, _ *gak.Heartbeat) ([]byte, error) {
		if l.Fence != 2 {
			t.Errorf("fence %d", l.Fence)
		}
		return []byte("ok"), nil
	})
	if err != nil || ran.Kind != gak.Applied {
		t.Fatalf("%+v %v", ran, err)
	}
}

// Renewals every ttl/3 keep a body that outlives its ttl in flight; a
// refused renewal is reported through the heartbeat and the body's
// context. System clock: renewals take real time, awaited through the
// heartbeat, never slept for.
func TestRenewalsKeepALongBodyAliveAndReportALoss(t *testing.T) {
	k := open(t, "memory:")
	runner := gak.NewRunner(k, 150*time.Millisecond)
	a := gak.NewAction("long", "r")
	ran, err := runner.Run(ctx, a, func(_ context.Context, lease gak.Lease, hb *gak.Heartbeat) ([]byte, error) {
		deadline := time.After(10 * time.Second)
		for hb.Renewals() < 3 {
			select {
			case <-hb.Changed():
			case <-deadline:
				return nil, errors.New("no renewals")
			}
		}
		got, err := k.Sideeffect().Acquire(ctx, a, time.Second)
		if err != nil || got.Kind != gak.InFlight {
			return nil, errors.New("the key is not in flight after its ttl")
		}
		if hb.Lease().Until <= lease.Until {
			return nil, errors.New("the renewed lease did not move")
		}
		return []byte("done"), nil
	})
	if err != nil || ran.Kind != gak.Applied {
		t.Fatalf("%+v %v", ran, err)
	}
	b := gak.NewAction("lost", "r2")
	_, err = runner.Run(ctx, b, func(bodyCtx context.Context, lease gak.Lease, hb *gak.Heartbeat) ([]byte, error) {
		if err := k.Sideeffect().MarkUncertain(ctx, b, lease, "lost on purpose"); err != nil {
			return nil, err
		}
		select {
		case <-bodyCtx.Done():
		case <-time.After(10 * time.Second):
			return nil, errors.New("the body's context was not cancelled")
		}
		if gak.Code(hb.Check()) != gak.CodeLeaseLost || hb.Refusal() == nil {
			return nil, errors.New("the heartbeat does not say lease-lost")
		}
		return nil, errors.New("stopped")
	})
	var failed *gak.BodyFailedError
	if !errors.As(err, &failed) {
		t.Fatalf("%v", err)
	}
}

func TestABodyPanicLeavesTheKeyUncertain(t *testing.T) {
	k := open(t, "memory:")
	a := gak.NewAction("p", "r")
	func() {
		defer func() {
			if recover() != "boom" {
				t.Fatal("the panic was lost")
			}
		}()
		_, _ = gak.NewRunner(k, time.Minute).Run(ctx, a, func(context.Context, gak.Lease, *gak.Heartbeat) ([]byte, error) {
			panic("boom")
		})
	}()
	got, err := k.Sideeffect().Acquire(ctx, a, time.Second)
	if err != nil || got.Kind != gak.Uncertain {
		t.Fatalf("%+v %v", got, err)
	}
}
