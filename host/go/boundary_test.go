package gak_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	gak "github.com/gak-kernel/gak/host/go"
)

// The host boundary under attack (issue 23): calls from inside bodies,
// Close racing calls, bodies that never return, secrets under fmt's verbs,
// options out of range, oversized arguments, and a call's answer after a
// conflict re-ran it.

var schemas int64

// postgresURL is a fresh schema of $GAK_PG_DSN, dropped after the test;
// the test is skipped (with the reason) when there is no server, and
// fails instead under CI=true.
func postgresURL(t *testing.T) string {
	t.Helper()
	dsn := os.Getenv("GAK_PG_DSN")
	unavailable := func(why string) {
		if os.Getenv("CI") == "true" {
			t.Fatalf("PostgreSQL: %s (CI=true: PostgreSQL tests must run)", why)
		}
		t.Skipf("PostgreSQL: %s", why)
	}
	if dsn == "" {
		unavailable("GAK_PG_DSN is not set")
	}
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	url := fmt.Sprintf("%s%sschema=gak_gotest_%d_%d", dsn, sep, os.Getpid(), atomic.AddInt64(&schemas, 1))
	if err := gak.DropPostgresSchema(url); err != nil {
		unavailable(err.Error())
	}
	t.Cleanup(func() {
		// A failed test may have left a transaction holding its locks:
		// dropping the schema would wait for it.
		if !t.Failed() {
			_ = gak.DropPostgresSchema(url)
		}
	})
	return url
}

// everyStore runs test once per store: memory, SQLite, PostgreSQL.
func everyStore(t *testing.T, test func(t *testing.T, url string)) {
	t.Run("memory", func(t *testing.T) { test(t, "memory:") })
	t.Run("sqlite", func(t *testing.T) {
		test(t, "sqlite:"+filepath.Join(t.TempDir(), "gak.db"))
	})
	t.Run("postgres", func(t *testing.T) { test(t, postgresURL(t)) })
}

// within waits for ch at most d; false (and a failure naming what) when
// it did not come.
func within[T any](t *testing.T, ch <-chan T, d time.Duration, what string) (T, bool) {
	t.Helper()
	select {
	case v := <-ch:
		return v, true
	case <-time.After(d):
		t.Errorf("%s: still waiting after %s", what, d)
		var zero T
		return zero, false
	}
}

// A body's call into its own kernel (with a context that is not the
// body's, so only libgak can refuse it) while Close waits for the body:
// with a read-write lock the call waited for Close, which waited for the
// body — for ever. Now a call after Close began fails at once and Close
// returns once the body's call returned.
func TestCloseNeverBlocksACallFromInsideABody(t *testing.T) {
	everyStore(t, func(t *testing.T, url string) {
		k, err := gak.Open(url)
		if err != nil {
			t.Fatal(err)
		}
		entered := make(chan struct{})
		wrote := make(chan error, 1)
		var sawClosed error
		go func() {
			wrote <- k.Sideeffect().WriteFenced(ctx, "r", 1, func(_ context.Context, down *gak.Downstream) error {
				close(entered)
				// Call until Close has begun: refused as re-entrant before,
				// refused as closed after (never a wait).
				deadline := time.Now().Add(20 * time.Second)
				for time.Now().Before(deadline) {
					_, err := k.Sideeffect().SinkSeen(context.Background(), "r")
					switch gak.Code(err) {
					case gak.CodeInvalidInput:
						runtime.Gosched()
						continue
					case gak.CodeStorage:
						sawClosed = err
						return down.Put("r", "written after Close began")
					}
					return fmt.Errorf("the call from inside the body answered %v", err)
				}
				return errors.New("Close never began")
			})
		}()
		<-entered
		closed := make(chan error, 1)
		go func() { closed <- k.Close() }()
		err, ok := within(t, wrote, 30*time.Second, "the fenced write whose body called the kernel while Close waited (a deadlock)")
		if !ok {
			return
		}
		if err != nil {
			t.Fatalf("the fenced write: %v", err)
		}
		if !strings.Contains(fmt.Sprint(sawClosed), "the kernel is closed") {
			t.Fatalf("the body's call after Close began: %v", sawClosed)
		}
		if err, ok := within(t, closed, 30*time.Second, "Close"); ok && err != nil {
			t.Fatal(err)
		}
		_, err = k.Sideeffect().SinkSeen(ctx, "r")
		wantCode(t, err, gak.CodeStorage)
	})
}

// A goroutine a body starts, calling the same kernel with a fresh context
// while the body waits for it, cannot be told from any other caller: it
// waits for the lock the body's transaction holds. Every such wait is
// bounded: the goroutine's call fails, and the body (and its call) go on.
// Each attempt waits at most ConnectionWait (300 ms here) on memory and
// PostgreSQL, SQLite's busy timeout (5 s) on SQLite; a wait that runs out
// is a conflict, re-run up to RetryAttempts (2 here; 10 by default, about
// 50 s on SQLite).
func TestAGoroutineABodyWaitsForGivesUpAfterTheConnectionWait(t *testing.T) {
	everyStore(t, func(t *testing.T, url string) {
		k, err := gak.OpenWith(gak.Options{Store: url, ConnectionWait: 300 * time.Millisecond, RetryAttempts: 2})
		if err != nil {
			t.Fatal(err)
		}
		defer k.Close()
		var inner error
		took := time.Duration(0)
		err = k.Sideeffect().WriteFenced(ctx, "r", 1, func(_ context.Context, down *gak.Downstream) error {
			if err := down.Put("r", "x"); err != nil {
				return err
			}
			got := make(chan error, 1)
			start := time.Now()
			go func() {
				_, err := k.Sideeffect().SinkSeen(context.Background(), "r")
				got <- err
			}()
			select {
			case inner = <-got:
				took = time.Since(start)
				return nil
			case <-time.After(20 * time.Second):
				return errors.New("the goroutine's call was still waiting after 20 s")
			}
		})
		if err != nil {
			t.Fatalf("the fenced write: %v", err)
		}
		if gak.Code(inner) != gak.CodeStorage {
			t.Fatalf("the goroutine's call answered %v after %s; want a storage error after the connection wait", inner, took)
		}
		if seen, err := k.Sideeffect().SinkSeen(ctx, "r"); err != nil || seen != 1 {
			t.Fatalf("after the write: fence %d, %v", seen, err)
		}
		t.Logf("the goroutine's call gave up after %s: %v", took.Round(time.Millisecond), inner)
	})
}

// The call answers what its last attempt did: a body that met a
// serialization failure (PostgreSQL 40001: the whole call runs again) and
// then failed or panicked, and succeeded on the next attempt, committed —
// neither the first attempt's error nor its panic may come back.
func TestAfterAConflictTheCallAnswersItsLastAttempt(t *testing.T) {
	url := postgresURL(t)
	k := open(t, url)
	const conflict = "DO $$BEGIN RAISE EXCEPTION USING ERRCODE = '40001'; END$$"
	for _, end := range []string{"fail", "panic"} {
		for _, flavour := range []string{"write-fenced", "with-downstream"} {
			key := fmt.Sprintf("%s-%s", end, flavour)
			attempts := 0
			body := func(_ context.Context, down *gak.Downstream) error {
				attempts++
				if err := down.Put(key, fmt.Sprint(attempts)); err != nil {
					return err
				}
				if attempts > 1 {
					return nil
				}
				if _, err := down.Exec(conflict); err == nil {
					return errors.New("the serialization failure did not raise")
				}
				if end == "panic" {
					panic("attempt 1 panicked")
				}
				return errors.New("attempt 1 failed")
			}
			var err error
			func() {
				defer func() {
					if p := recover(); p != nil {
						err = fmt.Errorf("the call panicked: %v", p)
					}
				}()
				if flavour == "with-downstream" {
					err = k.WithDownstream(ctx, body)
				} else {
					err = k.Sideeffect().WriteFenced(ctx, key, 1, body)
				}
			}()
			if err != nil || attempts != 2 {
				t.Errorf("%s, attempt 1 %s then attempt 2 ok: answered %v after %d attempts; want ok after 2", flavour, end, err, attempts)
				continue
			}
			var stored string
			_ = k.WithDownstream(ctx, func(_ context.Context, down *gak.Downstream) error {
				stored, _, err = down.Get(key)
				return err
			})
			if stored != "2" {
				t.Errorf("%s: committed %q, want attempt 2's value", flavour, stored)
			}
		}
	}
}

// A body that ends its goroutine (runtime.Goexit, t.FailNow) never
// returns to the runner: its key must not stay in flight for ever (the
// renewals ran on). It ends as after a failed body: uncertain, released.
func TestARunnerBodyThatCallsGoexitLeavesItsKeyUncertain(t *testing.T) {
	k := open(t, "memory:")
	a := gak.NewAction("goexit", "r")
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		_, _ = gak.NewRunner(k, 300*time.Millisecond).Run(ctx, a, func(context.Context, gak.Lease, *gak.Heartbeat) ([]byte, error) {
			runtime.Goexit()
			return nil, nil
		})
		t.Error("Run returned after its body called runtime.Goexit")
	}()
	if _, ok := within(t, exited, 10*time.Second, "the goroutine whose body called Goexit"); !ok {
		return
	}
	got, err := k.Sideeffect().Acquire(ctx, a, time.Second)
	if err != nil || got.Kind != gak.Uncertain || got.Reason != "body failed" {
		t.Fatalf("after Goexit the key answered %v %v; want uncertain (body failed)", got, err)
	}
	other, err := k.Sideeffect().Acquire(ctx, gak.NewAction("other", "r"), time.Second)
	if err != nil || other.Kind != gak.Granted {
		t.Fatalf("the resource was not released: %v %v", other, err)
	}
}

// No fmt verb shows a token, a holder, a reconcile claim or a password:
// not the plain ones, not %#v or %x, not through a struct that holds one.
func TestNoVerbShowsASecret(t *testing.T) {
	k := open(t, "memory:")
	seed(t, k, "t1")
	task, err := k.Taskboard().Claim(ctx, "t1", "w1", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	a := gak.NewAction("k", "r")
	acquired, err := k.Sideeffect().Acquire(ctx, a, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	lease := acquired.Lease
	claim := gak.ReconcileClaim{Claim: "Claim0secret0capability", Until: 5}
	resolution := gak.Resolution{Applied: true, Result: []byte("r"), Claim: claim.Claim}
	options := gak.Options{Store: "postgres://alice:Pw0secret0password@db:5432/x?schema=s"}
	var beat *gak.Heartbeat
	ran, err := gak.NewRunner(k, time.Minute).Run(ctx, gak.NewAction("hb", "r2"), func(_ context.Context, _ gak.Lease, hb *gak.Heartbeat) ([]byte, error) {
		beat = hb
		return nil, nil
	})
	if err != nil || ran.Kind != gak.Applied {
		t.Fatal(ran, err)
	}
	beatLease := beat.Lease()
	page := gak.TaskPage{Items: []gak.Task{task}}
	type holder struct {
		T gak.Task
		L *gak.Lease
	}
	secrets := []string{task.Token, lease.Holder, claim.Claim, beatLease.Holder, "Pw0secret0password"}
	for _, s := range secrets {
		if len(s) < 8 {
			t.Fatalf("a secret too short to look for: %q", s)
		}
	}
	values := map[string]any{
		"Task": task, "*Task": &task, "Lease": lease, "Acquired": acquired,
		"ReconcileClaim": claim, "Resolution": resolution, "*Heartbeat": beat,
		"Heartbeat": *beat, "Options": options, "TaskPage": page, "[]Task": page.Items,
		"struct": holder{T: task, L: &lease},
	}
	for name, v := range values {
		for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%d", "%10.3v"} {
			out := fmt.Sprintf(verb, v)
			for _, s := range secrets {
				if strings.Contains(out, s) {
					t.Errorf("%s under %s shows a secret: %s", verb, name, out)
				}
			}
		}
	}
	if !strings.Contains(fmt.Sprintf("%#v", task), `gak.Task{ID:"t1"`) || !strings.Contains(fmt.Sprintf("%v", lease), `Key:"k"`) {
		t.Errorf("the redacted forms lost the rest: %#v / %v", task, lease)
	}
}

// Options narrowed to uint32 in C are refused out of range, never wrapped
// (2^32 + 1 connections would have been a pool of 1).
func TestOptionsOutOfRangeAreRefused(t *testing.T) {
	big := int(math.MaxInt64)
	if uint64(big) > math.MaxUint32 {
		big = int(uint64(math.MaxUint32) + 2) // 2^32 + 1
	}
	for name, o := range map[string]gak.Options{
		"MaxConnections 2^32+1":  {MaxConnections: big},
		"MaxConnections -1":      {MaxConnections: -1},
		"RetryAttempts 2^32+1":   {RetryAttempts: big},
		"ConnectionWait -1s":     {ConnectionWait: -time.Second},
		"StatementTimeout -1ms":  {StatementTimeout: -time.Millisecond},
		"RetryBase, RetryMax -1": {RetryBase: -1, RetryMax: -1},
	} {
		o.Store = "memory:"
		k, err := gak.OpenWith(o)
		if k != nil {
			_ = k.Close()
		}
		if gak.Code(err) != gak.CodeInvalidInput {
			t.Errorf("%s: want invalid-input, got %v", name, err)
		}
	}
	k, err := gak.OpenWith(gak.Options{Store: "memory:", MaxConnections: math.MaxUint32, ConnectionWait: time.Microsecond})
	if err != nil {
		t.Fatalf("the largest pool and a sub-millisecond wait: %v", err)
	}
	_ = k.Close()
}

// Component is a copy: libgak's bytes are read-only memory, and writing to
// them killed the process.
func TestComponentIsACopy(t *testing.T) {
	first := gak.Component()
	if len(first) < 1000 || string(first[:4]) != "\x00asm" {
		t.Fatalf("not a component: %d bytes", len(first))
	}
	first[0] = 'X'
	if gak.Component()[0] != 0 {
		t.Fatal("writing to the slice changed the component")
	}
}

// Oversized arguments are refused with invalid-input before anything is
// copied into C memory (snapshots, steps and seeds are copied by this
// package; strings and bytes passed by value are weighed by libgak before
// it reads them), and a value at the bound still goes through.
func TestOversizedArgumentsAreRefusedBeforeTheyAreCopied(t *testing.T) {
	k := open(t, "memory:")
	mib := strings.Repeat("x", 1<<20)
	many := make([]string, 10_001)
	for i := range many {
		many[i] = fmt.Sprint(i)
	}
	seeds := make([]gak.TaskSeed, 10_001)
	for i := range seeds {
		seeds[i] = gak.TaskSeed{ID: fmt.Sprint("t", i)}
	}
	fields := map[string]string{}
	for i := 0; i < 10_001; i++ {
		fields[fmt.Sprint(i)] = ""
	}
	huge := strings.Repeat("s", 65<<20)
	snap := func(s gak.Snapshot) gak.Snapshot {
		s.RunID, s.Seq, s.Status = "run", 1, "running"
		return s
	}
	for name, call := range map[string]func() error{
		"Seed: 10,001 tasks":       func() error { return k.Taskboard().Seed(ctx, seeds) },
		"Seed: a title over 1 MiB": func() error { return k.Taskboard().Seed(ctx, []gak.TaskSeed{{ID: "t", Title: mib + "x"}}) },
		"Seed: 10,001 deps":        func() error { return k.Taskboard().Seed(ctx, []gak.TaskSeed{{ID: "t", Deps: many}}) },
		"SaveIfNewer: 10,001 done": func() error { return k.Checkpoint().SaveIfNewer(ctx, snap(gak.Snapshot{Done: many})) },
		"SaveIfNewer: 10,001 fields": func() error {
			return k.Checkpoint().SaveIfNewer(ctx, snap(gak.Snapshot{Fields: fields}))
		},
		"SaveIfNewer: 65 MiB in all": func() error {
			done := make([]string, 65)
			for i := range done {
				done[i] = mib
			}
			return k.Checkpoint().SaveIfNewer(ctx, snap(gak.Snapshot{Done: done}))
		},
		"BuildPlan: 65 MiB in all": func() error {
			_, err := k.Checkpoint().BuildPlan(ctx, []gak.StepDef{{ID: huge}}, nil)
			return err
		},
	} {
		before := gak.ArenaBytes()
		wantCode(t, call(), gak.CodeInvalidInput)
		if copied := gak.ArenaBytes() - before; copied != 0 {
			t.Errorf("%s: %d bytes copied into C memory before the refusal", name, copied)
		}
	}
	// By value (libgak weighs them): over the bound refused, at it judged
	// by the component.
	_, err := k.Commitgate().Commit(ctx, "run", 0, gak.Outcome{Status: gak.Succeeded, Result: []byte(mib + "x")})
	wantCode(t, err, gak.CodeInvalidInput)
	if _, err := k.Commitgate().Commit(ctx, "run", 0, gak.Outcome{Status: gak.Succeeded, Result: []byte(mib)}); err != nil {
		t.Fatalf("a 1 MiB result: %v", err)
	}
	// BuildPlan bounds the total only: an overlong step id is the
	// component's invalid-plan.
	_, err = k.Checkpoint().BuildPlan(ctx, []gak.StepDef{{ID: mib + "x"}}, nil)
	wantCode(t, err, gak.CodeInvalidPlan)
}
