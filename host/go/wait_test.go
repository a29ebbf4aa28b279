package gak_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	gak "github.com/gak-kernel/gak/host/go"
)

// A call's context bounds its wait for a free connection: a pool of one
// is held by a body that waits to be released, and a second call waits
// for the connection — at most until its context is done (then it answers
// ctx.Err(), as a call whose context was done before it started does),
// at most Options.ConnectionWait (then a *StorageError), whichever comes
// first; never the 5 s default connection wait when its deadline is
// sooner.

// holdTheOnlyConnection opens a kernel over url with a pool of one and
// the given connection wait (0: the default, 5 s), and holds its
// connection with a body until free is called (or the test ends).
func holdTheOnlyConnection(t *testing.T, url string, wait time.Duration) (k *gak.Kernel, free func()) {
	t.Helper()
	k, err := gak.OpenWith(gak.Options{Store: url, MaxConnections: 1, ConnectionWait: wait})
	if err != nil {
		t.Fatal(err)
	}
	entered := make(chan struct{})
	release := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- k.WithDownstream(ctx, func(context.Context, *gak.Downstream) error {
			close(entered)
			<-release
			return nil
		})
	}()
	if _, ok := within(t, entered, 30*time.Second, "the body holding the connection"); !ok {
		t.FailNow()
	}
	var once sync.Once
	free = func() {
		once.Do(func() {
			close(release)
			if err := <-done; err != nil {
				t.Errorf("the body holding the connection: %v", err)
			}
		})
	}
	t.Cleanup(func() {
		free()
		_ = k.Close()
	})
	return k, free
}

func TestADeadlineBoundsTheWaitForAConnection(t *testing.T) {
	everyStore(t, func(t *testing.T, url string) {
		k, free := holdTheOnlyConnection(t, url, 0)
		deadline, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := k.Taskboard().Get(deadline, "t")
		took := time.Since(start)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("after %s the call answered %v; want context.DeadlineExceeded", took, err)
		}
		if took > 2*time.Second {
			t.Fatalf("the call waited %s for a connection, past its 100 ms deadline (the connection wait is 5 s)", took)
		}
		free()
		if _, err := k.Taskboard().Get(ctx, "t"); gak.Code(err) != gak.CodeNotFound {
			t.Fatalf("once the connection was free: %v", err)
		}
		t.Logf("the call gave up after %s", took.Round(time.Millisecond))
	})
}

func TestACancelledContextStopsACallWaitingForAConnection(t *testing.T) {
	k, free := holdTheOnlyConnection(t, "memory:", 0)
	waiting := make(chan struct{}, 1)
	gak.OnWaiting(func() {
		select {
		case waiting <- struct{}{}:
		default:
		}
	})
	defer gak.OnWaiting(nil)
	cancelled, cancel := context.WithCancel(ctx)
	defer cancel()
	got := make(chan error, 1)
	go func() {
		_, err := k.Taskboard().Get(cancelled, "t")
		got <- err
	}()
	if _, ok := within(t, waiting, 30*time.Second, "the second call to wait"); !ok {
		t.FailNow()
	}
	start := time.Now()
	cancel()
	err, ok := within(t, got, 2*time.Second, "the cancelled call")
	if ok && !errors.Is(err, context.Canceled) {
		t.Fatalf("the cancelled call answered %v after %s; want context.Canceled", err, time.Since(start))
	}
	free()
}

func TestTheConnectionWaitBoundsAWaitTheContextAllowsLonger(t *testing.T) {
	k, _ := holdTheOnlyConnection(t, "memory:", 200*time.Millisecond)
	patient, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	start := time.Now()
	_, err := k.Taskboard().Get(patient, "t")
	took := time.Since(start)
	wantCode(t, err, gak.CodeStorage)
	if !strings.Contains(err.Error(), "no connection became free within 200 ms") {
		t.Fatalf("the storage error does not say what it waited for: %v", err)
	}
	if took < 200*time.Millisecond || took > 5*time.Second {
		t.Fatalf("the call gave up after %s; want the 200 ms connection wait", took)
	}
}
