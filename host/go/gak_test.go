package gak_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	gak "github.com/gak-kernel/gak/host/go"
)

var ctx = context.Background()

func open(t *testing.T, url string) *gak.Kernel {
	t.Helper()
	k, err := gak.Open(url)
	if err != nil {
		t.Fatalf("open %s: %v", url, err)
	}
	t.Cleanup(func() { _ = k.Close() })
	return k
}

func sqlite(t *testing.T) *gak.Kernel {
	return open(t, "sqlite:"+filepath.Join(t.TempDir(), "gak.db"))
}

func withClock(t *testing.T, now uint64) (*gak.Kernel, *gak.ManualClock) {
	t.Helper()
	clock := gak.NewManualClock(now)
	k, err := gak.OpenWith(gak.Options{Store: "memory:", Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Close() })
	return k, clock
}

func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	if got := gak.Code(err); got != code {
		t.Fatalf("want %s, got %q (%v)", code, got, err)
	}
}

func seed(t *testing.T, k *gak.Kernel, ids ...string) {
	t.Helper()
	var seeds []gak.TaskSeed
	for _, id := range ids {
		seeds = append(seeds, gak.TaskSeed{ID: id})
	}
	if err := k.Taskboard().Seed(ctx, seeds); err != nil {
		t.Fatal(err)
	}
}

func TestOpenRefusesBadURLsWithoutShowingThePassword(t *testing.T) {
	_, err := gak.Open("mysql://alice:s3cr3t@db/x")
	wantCode(t, err, gak.CodeInvalidInput)
	var refused *gak.Refused
	if !errors.As(err, &refused) || strings.Contains(err.Error(), "s3cr3t") {
		t.Fatalf("want a *Refused without the password, got %v", err)
	}
	_, err = gak.Open("postgres://alice:s3cr3t@127.0.0.1:1/x?connect_timeout=1")
	var storage *gak.StorageError
	if !errors.As(err, &storage) || strings.Contains(err.Error(), "s3cr3t") {
		t.Fatalf("want a *StorageError without the password, got %v", err)
	}
}

func TestClaimIsRefusedByCodeAndCarriesItsToken(t *testing.T) {
	k := sqlite(t)
	seed(t, k, "t1")
	task, err := k.Taskboard().Claim(ctx, "t1", "w1", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if task.Fence != 1 || len(task.Token) != 32 || task.State != gak.TaskClaimed || task.Owner != "w1" || task.Until == nil {
		t.Fatalf("claimed %v", task)
	}
	if strings.Contains(task.String(), task.Token) {
		t.Fatalf("String shows the token: %s", task)
	}
	_, err = k.Taskboard().Claim(ctx, "t1", "w2", 30*time.Second)
	wantCode(t, err, gak.CodeTaken)
	listed, err := k.Taskboard().Get(ctx, "t1")
	if err != nil || listed.Token != "" || listed.Owner != "w1" {
		t.Fatalf("get: %v %v", listed, err)
	}
	wantCode(t, k.Taskboard().Release(ctx, "t1", "not-the-token"), gak.CodeLeaseLost)
	if err := k.Taskboard().Complete(ctx, "t1", task.Token); err != nil {
		t.Fatal(err)
	}
	_, err = k.Taskboard().Get(ctx, "nope")
	wantCode(t, err, gak.CodeNotFound)
}

// One kernel shared by many goroutines (run with -race): exactly one
// claimer of a task wins, every other is refused as taken.
func TestOneKernelSharedByGoroutines(t *testing.T) {
	k := sqlite(t)
	seed(t, k, "hot")
	const n = 16
	var wg sync.WaitGroup
	errs := make([]error, n)
	start := make(chan struct{})
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			<-start
			_, errs[i] = k.Taskboard().Claim(ctx, "hot", fmt.Sprintf("w%d", i), time.Minute)
		}(i)
	}
	close(start)
	wg.Wait()
	won := 0
	for _, err := range errs {
		if err == nil {
			won++
		} else {
			wantCode(t, err, gak.CodeTaken)
		}
	}
	if won != 1 {
		t.Fatalf("%d winners", won)
	}
}

func TestAContextDoneBeforeTheCallStopsIt(t *testing.T) {
	k := open(t, "memory:")
	seed(t, k, "t1")
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := k.Taskboard().Claim(cancelled, "t1", "w1", time.Minute); !errors.Is(err, context.Canceled) {
		t.Fatalf("want context.Canceled, got %v", err)
	}
	task, err := k.Taskboard().Claim(ctx, "t1", "w1", time.Minute)
	if err != nil || task.Fence != 1 {
		t.Fatalf("the cancelled call claimed: %v %v", task, err)
	}
}

func TestTheManualClockJudgesExpiry(t *testing.T) {
	k, clock := withClock(t, 1000)
	seed(t, k, "a")
	first, err := k.Taskboard().Claim(ctx, "a", "w1", 100*time.Millisecond)
	if err != nil || *first.Until != 1100 {
		t.Fatalf("%v %v", first, err)
	}
	clock.Advance(100 * time.Millisecond)
	second, err := k.Taskboard().Claim(ctx, "a", "w2", 100*time.Millisecond)
	if err != nil || second.Fence != 2 {
		t.Fatalf("takeover: %v %v", second, err)
	}
	wantCode(t, k.Taskboard().Release(ctx, "a", first.Token), gak.CodeLeaseLost)
	wantCode(t, clock.Set(5), gak.CodeInvalidInput)
	if clock.Now() != 1100 {
		t.Fatalf("a refused Set moved the clock to %d", clock.Now())
	}
}

func TestUnknownEnumsAreRefusedBeforeTheCall(t *testing.T) {
	k := open(t, "memory:")
	_, err := k.Taskboard().List(ctx, gak.TaskState("bogus"), "", 10)
	wantCode(t, err, gak.CodeInvalidInput)
	_, err = k.Sideeffect().Acquire(ctx, gak.Action{Key: "k", Resource: "r", RetrySafety: "maybe"}, time.Minute)
	wantCode(t, err, gak.CodeInvalidInput)
	_, err = k.Commitgate().Commit(ctx, "run", 0, gak.Outcome{Status: "done"})
	wantCode(t, err, gak.CodeInvalidInput)
	_, err = k.Taskboard().Claim(ctx, "t", "w", -time.Second)
	wantCode(t, err, gak.CodeInvalidInput)
	_, err = k.Taskboard().List(ctx, "", "", -1)
	wantCode(t, err, gak.CodeInvalidInput)
	// Not UTF-8: refused by libgak before anything runs.
	_, err = k.Taskboard().Get(ctx, "\xff\xfe")
	wantCode(t, err, gak.CodeInvalidInput)
}

func TestCheckpointAndCommitgate(t *testing.T) {
	k := open(t, "memory:")
	steps := []gak.StepDef{{ID: "a"}, {ID: "b", DependsOn: []string{"a"}}, {ID: "c", DependsOn: []string{"b"}}}
	c, err := gak.ResumeCommitter(ctx, k, "run-1", gak.Ptr(uint64(1)))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.StepDone(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	loaded, err := k.Checkpoint().Load(ctx, "run-1")
	if err != nil || loaded.Seq != 1 || *loaded.Fence != 1 || loaded.Done[0] != "a" {
		t.Fatalf("%+v %v", loaded, err)
	}
	plan, err := k.Checkpoint().BuildPlan(ctx, steps, &loaded)
	if err != nil || fmt.Sprint(plan.Skip, plan.Run) != "[a] [b c]" {
		t.Fatalf("%+v %v", plan, err)
	}
	zombie := loaded
	zombie.Seq, zombie.Fence = 9, gak.Ptr(uint64(0))
	wantCode(t, k.Checkpoint().SaveIfNewer(ctx, zombie), gak.CodeFenceStale)
	loaded.Fields = map[string]string{"b": "2", "a": "1"}
	loaded.Seq = 2
	if err := k.Checkpoint().SaveIfNewer(ctx, loaded); err != nil {
		t.Fatal(err)
	}
	again, _ := k.Checkpoint().Load(ctx, "run-1")
	if again.Fields["a"] != "1" || again.Fields["b"] != "2" {
		t.Fatalf("fields: %v", again.Fields)
	}
	_, err = k.Checkpoint().BuildPlan(ctx, []gak.StepDef{{ID: "x", DependsOn: []string{"y"}}}, nil)
	wantCode(t, err, gak.CodeInvalidPlan)
	out, err := k.Commitgate().CommitStep(ctx, "run-1", "a", 1, gak.Outcome{Status: gak.Succeeded, Result: []byte("ok")})
	if err != nil || string(out.Result) != "ok" {
		t.Fatalf("%v %v", out, err)
	}
	_, err = k.Commitgate().CommitStep(ctx, "run-1", "a", 1, gak.Outcome{Status: gak.Failed})
	wantCode(t, err, gak.CodeAlreadyCommitted)
	_, err = k.Commitgate().CommitStep(ctx, "run-1", "", 1, gak.Outcome{Status: gak.Failed})
	wantCode(t, err, gak.CodeInvalidInput)
	if _, err := k.Commitgate().Commit(ctx, "run-1", 1, gak.Outcome{Status: gak.Succeeded}); err != nil {
		t.Fatal(err)
	}
	wantCode(t, c.StepDone(ctx, "b"), gak.CodeTerminal)
	read, err := k.Commitgate().ReadStep(ctx, "run-1", "a")
	if err != nil || read.Status != gak.Succeeded {
		t.Fatalf("%v %v", read, err)
	}
	pruned, err := k.Retention().PruneDryRun(ctx, 1<<52, 10)
	if err != nil || pruned.RemovedRuns != 1 {
		t.Fatalf("%+v %v", pruned, err)
	}
}

func TestSideeffectGateAndReconcile(t *testing.T) {
	k, clock := withClock(t, 0)
	gate := k.Sideeffect()
	mail := gak.Action{Key: "mail/1", Resource: "smtp", RetrySafety: gak.Unsafe, Fingerprint: "v1"}
	got, err := gate.Acquire(ctx, mail, time.Second)
	if err != nil || got.Kind != gak.Granted || got.Lease.Fence != 1 {
		t.Fatalf("%+v %v", got, err)
	}
	if strings.Contains(got.Lease.String(), got.Lease.Holder) {
		t.Fatal("String shows the holder")
	}
	busy, _ := gate.Acquire(ctx, mail, time.Second)
	if busy.Kind != gak.InFlight {
		t.Fatalf("%+v", busy)
	}
	other, _ := gate.Acquire(ctx, gak.NewAction("mail/2", "smtp"), time.Second)
	if other.Kind != gak.Contended || other.Until != 1000 {
		t.Fatalf("%+v", other)
	}
	_, err = gate.Acquire(ctx, gak.Action{Key: "mail/1", Resource: "smtp", Fingerprint: "v2"}, time.Second)
	wantCode(t, err, gak.CodeKeyReused)
	clock.Advance(time.Second)
	lost, _ := gate.Acquire(ctx, mail, time.Second)
	if lost.Kind != gak.Uncertain || lost.Reason != "intent-expired" {
		t.Fatalf("%+v", lost)
	}
	info, err := gate.Get(ctx, "mail/1")
	if err != nil || info.State != gak.KeyUncertain || info.Fingerprint != "v1" || info.RetrySafety != gak.Unsafe {
		t.Fatalf("%+v %v", info, err)
	}
	// The expired intent counts as uncertain, since its deadline.
	counts, err := gate.Count(ctx)
	if err != nil || counts.Uncertain != 1 || counts.InFlight != 0 || counts.OldestUncertain == nil || *counts.OldestUncertain != 1000 || !counts.Exact {
		t.Fatalf("count: %+v %v", counts, err)
	}
	_, err = gate.Recount(ctx, 0)
	wantCode(t, err, gak.CodeInvalidInput)
	if all, err := gate.Recount(ctx, 10); err != nil || !all {
		t.Fatalf("recount: %v %v", all, err)
	}
	claim, err := gate.BeginReconcile(ctx, mail, time.Second)
	if err != nil || strings.Contains(claim.String(), claim.Claim) {
		t.Fatalf("%v %v", claim, err)
	}
	_, err = gate.ResolveUncertain(ctx, mail, gak.Resolution{Applied: false, Claim: claim.Claim})
	wantCode(t, err, gak.CodeUnsafeNotRetryable)
	resolved, err := gate.ResolveUncertain(ctx, mail, gak.Resolution{Applied: true, Result: []byte("sent"), Claim: claim.Claim})
	if err != nil || resolved.Cleared || string(resolved.Result) != "sent" {
		t.Fatalf("%+v %v", resolved, err)
	}
	replay, _ := gate.Acquire(ctx, mail, time.Second)
	if replay.Kind != gak.Replayed || string(replay.Result) != "sent" {
		t.Fatalf("%+v", replay)
	}
	page, err := gate.List(ctx, gak.KeyCompleted, "", 10)
	if err != nil || len(page.Items) != 1 || page.Items[0].CompletedAt == nil || page.Next != "" {
		t.Fatalf("%+v %v", page, err)
	}
}

// A body that calls its own kernel is refused, never deadlocked: through
// the body's context (the Go package sees the mark) and through a fresh
// one (libgak sees the call comes from inside its own, on this thread).
func TestACallFromInsideABodyIsRefused(t *testing.T) {
	for _, k := range []*gak.Kernel{open(t, "memory:"), sqlite(t)} {
		for _, fresh := range []bool{false, true} {
			var inner error
			err := k.Sideeffect().WriteFenced(ctx, "r", 1, func(bodyCtx context.Context, down *gak.Downstream) error {
				use := bodyCtx
				if fresh {
					use = context.Background()
				}
				_, inner = k.Sideeffect().SinkSeen(use, "r")
				return down.Put("r", "x")
			})
			if err != nil {
				t.Fatal(err)
			}
			wantCode(t, inner, gak.CodeInvalidInput)
		}
	}
}

func TestABodyErrorRollsBackAndIsWriteFailed(t *testing.T) {
	k := sqlite(t)
	mine := errors.New("downstream said no")
	var kept *gak.Downstream
	err := k.Sideeffect().WriteFenced(ctx, "ledger", 3, func(_ context.Context, down *gak.Downstream) error {
		kept = down
		if err := down.Put("ledger/1", "x"); err != nil {
			return err
		}
		return mine
	})
	wantCode(t, err, gak.CodeWriteFailed)
	if !errors.Is(err, mine) {
		t.Fatalf("the body's error is not behind %v", err)
	}
	if seen, _ := k.Sideeffect().SinkSeen(ctx, "ledger"); seen != 0 {
		t.Fatalf("the fence moved to %d", seen)
	}
	if _, _, err := kept.Get("ledger/1"); gak.Code(err) != gak.CodeInvalidInput {
		t.Fatalf("a handle used after its body returned: %v", err)
	}
	err = k.WithDownstream(ctx, func(_ context.Context, down *gak.Downstream) error {
		_, ok, err := down.Get("ledger/1")
		if ok {
			return errors.New("the failed body's write stayed")
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, k.Sideeffect().WriteFenced(ctx, "ledger", 3, func(context.Context, *gak.Downstream) error { return nil }), "")
	wantCode(t, k.Sideeffect().WriteFenced(ctx, "ledger", 2, func(context.Context, *gak.Downstream) error { return nil }), gak.CodeFenceStale)
}

func TestABodyPanicRollsBackThenPanicsOn(t *testing.T) {
	k := open(t, "memory:")
	func() {
		defer func() {
			if p := recover(); p != "boom" {
				t.Fatalf("want the body's panic, got %v", p)
			}
		}()
		_ = k.Sideeffect().WriteFenced(ctx, "r", 1, func(_ context.Context, down *gak.Downstream) error {
			_ = down.Put("r", "x")
			panic("boom")
		})
	}()
	if seen, _ := k.Sideeffect().SinkSeen(ctx, "r"); seen != 0 {
		t.Fatalf("the panicking body's write landed (fence %d)", seen)
	}
}

func TestSQLRunsInTheCallsTransaction(t *testing.T) {
	k := sqlite(t)
	err := k.WithDownstream(ctx, func(_ context.Context, down *gak.Downstream) error {
		_, err := down.Exec("CREATE TABLE orders (id TEXT PRIMARY KEY, qty INTEGER, note TEXT)")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	err = k.Sideeffect().WriteFenced(ctx, "orders", 1, func(_ context.Context, down *gak.Downstream) error {
		n, err := down.Exec("INSERT INTO orders VALUES (?1, ?2, ?3)", "o-1", 3, nil)
		if err != nil || n != 1 {
			return fmt.Errorf("insert: %d %v", n, err)
		}
		if _, err := down.Exec("COMMIT"); gak.Code(err) != gak.CodeInvalidInput {
			return fmt.Errorf("COMMIT from a body: %v", err)
		}
		rows, err := down.Query("SELECT id, qty, note FROM orders WHERE qty > ?1", 1)
		if err != nil || len(rows) != 1 || rows[0][0].String != "o-1" || rows[0][1].String != "3" || rows[0][2].Valid {
			return fmt.Errorf("query: %v %v", rows, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	m := open(t, "memory:")
	err = m.WithDownstream(ctx, func(_ context.Context, down *gak.Downstream) error {
		_, err := down.Exec("SELECT 1")
		return err
	})
	wantCode(t, err, gak.CodeWriteFailed)
}

func TestCloseWaitsAndRefusesLaterCalls(t *testing.T) {
	k, err := gak.Open("memory:")
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Close(); err != nil {
		t.Fatal(err)
	}
	if err := k.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = k.Taskboard().Get(ctx, "t")
	wantCode(t, err, gak.CodeStorage)
}

// Lists and long strings cross the boundary intact (the arena that copies
// them into C memory spans several chunks here).
func TestLongListsRoundTrip(t *testing.T) {
	k := open(t, "memory:")
	var seeds []gak.TaskSeed
	for i := 0; i < 2000; i++ {
		seeds = append(seeds, gak.TaskSeed{
			ID:    fmt.Sprintf("task-%05d", i),
			Title: strings.Repeat("t", 100+i%50),
			Deps:  []string{fmt.Sprintf("dep-%d", i), "shared"},
		})
	}
	if err := k.Taskboard().Seed(ctx, seeds); err != nil {
		t.Fatal(err)
	}
	page, err := k.Taskboard().List(ctx, "", "task-01000", 1000)
	if err != nil || len(page.Items) != 999 || page.Next != "" {
		t.Fatalf("%d items, next %q, %v", len(page.Items), page.Next, err)
	}
	last := page.Items[998]
	if last.ID != "task-01999" || len(last.Title) != 100+1999%50 || last.Deps[0] != "dep-1999" || last.Deps[1] != "shared" {
		t.Fatalf("%+v", last)
	}
	snap := gak.Snapshot{RunID: "r", Seq: 1, Status: "running", Fields: map[string]string{}}
	for i := 0; i < 3000; i++ {
		snap.Done = append(snap.Done, fmt.Sprintf("step-%04d", i))
	}
	for i := 0; i < 200; i++ {
		snap.Fields[fmt.Sprintf("f%03d", i)] = strings.Repeat("v", i)
	}
	if err := k.Checkpoint().SaveIfNewer(ctx, snap); err != nil {
		t.Fatal(err)
	}
	got, err := k.Checkpoint().Load(ctx, "r")
	if err != nil || len(got.Done) != 3000 || got.Done[2999] != "step-2999" || got.Fields["f199"] != strings.Repeat("v", 199) || len(got.Fields) != 200 {
		t.Fatalf("%d done, %d fields, %v", len(got.Done), len(got.Fields), err)
	}
}
