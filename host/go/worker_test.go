package gak_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	gak "github.com/gak-kernel/gak/host/go"
)

func u32(n uint32) *uint32 { return &n }
func i32(n int32) *int32   { return &n }

// The queue calls of 0.4.0 and the board's counts, through libgak.
func TestTheQueueCalls(t *testing.T) {
	k, clock := withClock(t, 1000)
	board := k.Taskboard()
	if err := board.SetGroupLimit(ctx, "g", u32(1)); err != nil {
		t.Fatal(err)
	}
	wantCode(t, board.SetGroupLimit(ctx, "g", u32(0)), gak.CodeInvalidInput)
	info, err := board.GetGroup(ctx, "g")
	if err != nil || info != (gak.GroupInfo{Limit: 1, Live: 0}) {
		t.Fatalf("get-group: %+v %v", info, err)
	}
	_, err = board.GetGroup(ctx, "none")
	wantCode(t, err, gak.CodeNotFound)
	later := uint64(100000)
	if err := board.Seed(ctx, []gak.TaskSeed{
		{ID: "j1", Priority: i32(5), MaxAttempts: u32(2), Group: "g"},
		{ID: "j2", Priority: i32(5), Group: "g"},
		{ID: "j3", Priority: i32(-1)},
		{ID: "j4", NotBefore: &later},
	}); err != nil {
		t.Fatal(err)
	}
	_, err = board.ClaimBatch(ctx, "w", time.Second, 0)
	wantCode(t, err, gak.CodeInvalidInput)
	_, err = board.ClaimBatch(ctx, "w", time.Second, -1)
	wantCode(t, err, gak.CodeInvalidInput)
	batch, err := board.ClaimBatch(ctx, "w", time.Second, 10)
	if err != nil || len(batch) != 2 || batch[0].ID != "j1" || batch[1].ID != "j3" {
		t.Fatalf("claim-batch: %+v %v", batch, err)
	}
	j1, j3 := batch[0], batch[1]
	if j1.Token == "" || j1.Attempts != 1 || j1.Priority != 5 || j1.Group != "g" || *j1.MaxAttempts != 2 {
		t.Fatalf("j1: %+v", j1)
	}
	_, err = board.Claim(ctx, "j2", "x", time.Second)
	wantCode(t, err, gak.CodeGroupFull)
	_, err = board.Claim(ctx, "j4", "x", time.Second)
	wantCode(t, err, gak.CodeNotDue)
	_, err = board.CompleteBatch(ctx, nil)
	wantCode(t, err, gak.CodeInvalidInput)
	answers, err := board.CompleteBatch(ctx, []gak.Completion{
		{ID: "j3", Token: j3.Token}, {ID: "j1", Token: "forged"}, {ID: "nope", Token: "forged"},
	})
	want := []gak.CompletionResult{{ID: "j3", Answer: gak.Completed}, {ID: "j1", Answer: gak.LeaseLost}, {ID: "nope", Answer: gak.NotFound}}
	if err != nil || len(answers) != 3 || answers[0] != want[0] || answers[1] != want[1] || answers[2] != want[2] {
		t.Fatalf("complete-batch: %+v %v", answers, err)
	}
	after := uint64(500)
	_, err = board.Fail(ctx, "j1", "forged", "boom", &after)
	wantCode(t, err, gak.CodeLeaseLost)
	failed, err := board.Fail(ctx, "j1", j1.Token, "boom", &after)
	if err != nil || failed.State != gak.TaskFailed || failed.LastError != "boom" || *failed.NotBefore != 1500 || failed.Token != "" {
		t.Fatalf("fail: %+v %v", failed, err)
	}
	_, err = board.Claim(ctx, "j1", "x", time.Second)
	wantCode(t, err, gak.CodeNotDue)
	clock.AdvanceMs(500)
	batch, err = board.ClaimBatch(ctx, "w", time.Second, 10)
	if err != nil || len(batch) != 1 || batch[0].ID != "j1" || batch[0].Attempts != 2 {
		t.Fatalf("claim-batch again: %+v %v", batch, err)
	}
	dead, err := board.Fail(ctx, "j1", batch[0].Token, "boom again", nil)
	if err != nil || dead.State != gak.TaskDead || dead.LastError != "boom again" {
		t.Fatalf("fail to death: %+v %v", dead, err)
	}
	page, err := board.ListGroup(ctx, "g", "", 10)
	if err != nil || len(page.Items) != 2 || page.Items[0].ID != "j1" || page.Items[1].ID != "j2" || page.Next != "" {
		t.Fatalf("list-group: %+v %v", page, err)
	}
	_, err = board.ListGroup(ctx, "", "", 10)
	wantCode(t, err, gak.CodeInvalidInput)
	groups, err := board.ListGroups(ctx, "", 10)
	if err != nil || len(groups.Items) != 1 || groups.Items[0].Dead != 1 || groups.Items[0].Open != 1 || groups.Items[0].Claimed != 0 {
		t.Fatalf("list-groups: %+v %v", groups, err)
	}
	counts, err := board.Count(ctx)
	if err != nil || counts != (gak.TaskCounts{Open: 2, Done: 1, Dead: 1, Exact: true}) {
		t.Fatalf("count: %+v %v", counts, err)
	}
	_, err = board.Recount(ctx, 0)
	wantCode(t, err, gak.CodeInvalidInput)
	if all, err := board.Recount(ctx, 10); err != nil || !all {
		t.Fatalf("recount: %v %v", all, err)
	}
	_, err = board.Revive(ctx, "j3")
	wantCode(t, err, gak.CodeNotDead)
	revived, err := board.Revive(ctx, "j1")
	if err != nil || revived.State != gak.TaskOpen || revived.Attempts != 0 || revived.LastError != "" {
		t.Fatalf("revive: %+v %v", revived, err)
	}
	if err := board.SetGroupLimit(ctx, "g", nil); err != nil {
		t.Fatal(err)
	}
	_, err = board.GetGroup(ctx, "g")
	wantCode(t, err, gak.CodeNotFound)
	batch, err = board.ClaimBatch(ctx, "w", time.Second, 10)
	if err != nil || len(batch) != 2 {
		t.Fatalf("claim-batch without a limit: %+v %v", batch, err)
	}
	batch, err = board.ClaimBatch(ctx, "w", time.Second, 10)
	if err != nil || batch == nil || len(batch) != 0 {
		t.Fatalf("nothing ready: %+v %v", batch, err)
	}
}

func TestBackoffDoublesIsCappedAndJitterOnlyShortens(t *testing.T) {
	b := gak.Backoff{Base: time.Second, Max: 5 * time.Second, Jitter: 0.5}
	for attempts, want := range map[uint32]uint64{0: 1000, 1: 1000, 2: 2000, 3: 4000, 4: 5000, 200: 5000} {
		if got := b.DelayMs(attempts, 0); got != want {
			t.Errorf("attempts %d: %d ms, want %d", attempts, got, want)
		}
	}
	if got := b.DelayMs(3, 0.999999); got < 2000 || got >= 4000 {
		t.Errorf("jitter: %d ms", got)
	}
	huge := gak.Backoff{Base: 1 << 62, Max: 1 << 62}
	if got := huge.DelayMs(60, 0); got != 365*24*60*60*1000 {
		t.Errorf("a year at most: %d", got)
	}
}

func TestReasonsAreCleanAndCutAtARuneBoundary(t *testing.T) {
	if got := gak.Reason("a\x00b\xff"); got != "a\uFFFDb\uFFFD" {
		t.Errorf("%q", got)
	}
	long := gak.Reason(strings.Repeat("é", 3000))
	if len(long) != 4096 || !utf8.ValidString(long) {
		t.Errorf("%d bytes", len(long))
	}
	odd := gak.Reason("x" + strings.Repeat("é", 3000))
	if len(odd) != 4095 || !utf8.ValidString(odd) {
		t.Errorf("%d bytes", len(odd))
	}
}

// Run polls an empty board until its context is cancelled, then returns
// what it did with no error; Stop ends it too.
func TestRunStopsGracefullyOnACancelledContextOrStop(t *testing.T) {
	k, _ := withClock(t, 1000)
	seed(t, k, "a", "b")
	w := gak.NewWorker(k, "w", gak.WorkerOptions{Idle: 5 * time.Millisecond})
	cctx, cancel := context.WithCancel(ctx)
	var handled int32
	done := make(chan struct{})
	var worked gak.Worked
	var err error
	go func() {
		defer close(done)
		worked, err = w.Run(cctx, func(hctx context.Context, task gak.Task) error {
			if atomic.AddInt32(&handled, 1) == 2 {
				cancel()
				// The handler's context outlives the stop: it finishes.
				if hctx.Err() != nil {
					return errors.New("the handler's context was cancelled by the stop")
				}
			}
			return nil
		})
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not stop")
	}
	if err != nil || worked != (gak.Worked{Claimed: 2, Completed: 2}) {
		t.Fatalf("%+v %v", worked, err)
	}

	w = gak.NewWorker(k, "w", gak.WorkerOptions{Idle: time.Hour})
	go func() {
		time.Sleep(20 * time.Millisecond)
		w.Stop()
		w.Stop()
	}()
	worked, err = w.Run(ctx, func(context.Context, gak.Task) error { return nil })
	if err != nil || worked != (gak.Worked{}) {
		t.Fatalf("%+v %v", worked, err)
	}
}

// A stop mid-batch with concurrency 2: the running handlers finish and are
// reported, the unstarted ones are released with their attempt given back.
func TestAStopReleasesWhatHasNotStarted(t *testing.T) {
	k, _ := withClock(t, 1000)
	seed(t, k, "a", "b", "c", "d", "e")
	w := gak.NewWorker(k, "w", gak.WorkerOptions{Concurrency: 2})
	var running int32
	bStarted := make(chan struct{})
	stopped := make(chan struct{})
	worked, err := w.RunUntilIdle(ctx, func(_ context.Context, task gak.Task) error {
		if n := atomic.AddInt32(&running, 1); n > 2 {
			t.Errorf("%d handlers at once", n)
		}
		defer atomic.AddInt32(&running, -1)
		switch task.ID {
		case "a":
			// Both slots are taken (b runs) when the stop comes.
			<-bStarted
			w.Stop()
			close(stopped)
			return nil
		case "b":
			close(bStarted)
			<-stopped
			return errors.New("failed")
		default:
			t.Errorf("%s started after the stop", task.ID)
			return nil
		}
	})
	if err != nil || worked.Claimed != 5 || worked.Completed != 1 || worked.Failed != 1 || worked.Released != 3 {
		t.Fatalf("%+v %v", worked, err)
	}
	task, err := k.Taskboard().Get(ctx, "e")
	if err != nil || task.State != gak.TaskOpen || task.Attempts != 0 {
		t.Fatalf("%+v %v", task, err)
	}
}

func TestANilHandlerIsRefused(t *testing.T) {
	k, _ := withClock(t, 1000)
	_, err := gak.NewWorker(k, "w", gak.WorkerOptions{}).RunUntilIdle(ctx, nil)
	wantCode(t, err, gak.CodeInvalidInput)
	_, err = gak.NewWorker(k, "w", gak.WorkerOptions{Batch: 1001}).RunUntilIdle(ctx, func(context.Context, gak.Task) error { return nil })
	wantCode(t, err, gak.CodeInvalidInput)
}
