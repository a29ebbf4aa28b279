package gak

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log"
	"math"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// The queue worker (host/HOSTS.md, "The queue worker"): what queue users
// call. It claims a batch, runs each task's handler with its claim renewed
// while it runs, completes the successes in one CompleteBatch, fails the
// errors with exponential back-off and jitter, and stops gracefully: no new
// claim, the handlers it has not started released (their attempt given
// back), the running ones finished and reported. Its contract is every
// host's (Rust Worker, Python and JavaScript Worker); the shared cases
// tests/host-protocol/workers.json pin it.
//
//	w := gak.NewWorker(k, "worker-1", gak.WorkerOptions{Batch: 20})
//	worked, err := w.Run(ctx, func(ctx context.Context, task gak.Task) error {
//		return send(ctx, task.ID)
//	})

// MaxReason is the longest LastError the contract stores, in bytes: a
// handler's error message is cut to it (at a rune boundary).
const MaxReason = 4096

// maxDelay is the longest retry-after Fail takes: one year, in ms.
const maxDelay = 365 * 24 * 60 * 60 * 1000

// Handler handles one claimed task (its Token inside). A nil error
// completes it; an error fails it with the error's message as its
// LastError; a panic is recovered and fails it with "panicked: <value>".
//
// ctx carries the values of the ctx given to Run, but is not cancelled by
// a stop (a stop lets running handlers finish); it is cancelled when the
// claim is lost (a renewal refused: another worker took the task over),
// since the handler's result will then be refused anyway.
type Handler func(ctx context.Context, task Task) error

// Backoff is the exponential back-off of failed handlers: the n-th failed
// attempt is due again after min(Max, Base·2^(n−1))·(1 − Jitter·u), u
// uniform in [0, 1) from crypto/rand: jitter only shortens, the cap holds,
// and workers started together do not retry together.
type Backoff struct {
	// The first retry's delay (0: 1 s).
	Base time.Duration
	// The longest delay (0: 1 h).
	Max time.Duration
	// The share (0 to 1) by which a delay may be shortened at random.
	Jitter float64
}

// DefaultBackoff is the back-off a worker uses unless told otherwise:
// 1 s doubling up to 1 h, shortened by up to 20 %.
var DefaultBackoff = Backoff{Base: time.Second, Max: time.Hour, Jitter: 0.2}

func millis(d time.Duration) uint64 {
	if d <= 0 {
		return 0
	}
	return uint64(d / time.Millisecond)
}

// DelayMs is the delay, in ms, after a task's attempts-th attempt failed,
// with u in [0, 1).
func (b Backoff) DelayMs(attempts uint32, u float64) uint64 {
	base, max := millis(b.Base), millis(b.Max)
	if b.Base == 0 {
		base = millis(DefaultBackoff.Base)
	}
	if b.Max == 0 {
		max = millis(DefaultBackoff.Max)
	}
	doublings := uint64(0)
	if attempts > 1 {
		doublings = uint64(attempts - 1)
	}
	if doublings > 63 {
		doublings = 63
	}
	full := base << doublings
	if base != 0 && (base > math.MaxUint64>>doublings) {
		full = math.MaxUint64
	}
	if full > max {
		full = max
	}
	if full > maxDelay {
		full = maxDelay
	}
	jitter := clamp01(b.Jitter) * clamp01(u)
	// A float product is below full when jitter > 0; never above.
	d := math.Floor(float64(full) * (1 - jitter))
	if d >= float64(full) {
		return full
	}
	return uint64(d)
}

func clamp01(x float64) float64 {
	switch {
	case x > 1:
		return 1
	case x > 0:
		return x
	}
	return 0 // also NaN
}

// unit is a uniform draw in [0, 1) from the OS's CSPRNG (no generator
// state to share across a fork, so workers forked together do not back
// off together).
func unit() float64 {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return 0
	}
	return float64(binary.LittleEndian.Uint64(b[:])>>11) / float64(uint64(1)<<53)
}

// Reason is a handler's error message as LastError: text that is not
// UTF-8 and U+0000 (which no store keeps) as U+FFFD, cut to at most
// MaxReason bytes at a rune boundary.
func Reason(message string) string {
	clean := strings.ReplaceAll(strings.ToValidUTF8(message, "\uFFFD"), "\x00", "\uFFFD")
	if len(clean) <= MaxReason {
		return clean
	}
	end := MaxReason
	for end > 0 && !utf8.RuneStart(clean[end]) {
		end--
	}
	return clean[:end]
}

// WorkerOptions configures a worker; a zero field takes its default.
type WorkerOptions struct {
	// Tasks claimed at a time, 1–1000 (0: 10).
	Batch int
	// The claims' ttl (0: 30 s), renewed every third of it while a handler
	// runs.
	TTL time.Duration
	// Handlers run at once (0: the batch).
	Concurrency int
	// The wait before polling an empty board again (0: 1 s).
	Idle time.Duration
	// The back-off of failed handlers (nil: DefaultBackoff).
	Backoff *Backoff
	// Where Run reports the store failures it goes on after (nil: the
	// standard logger).
	Logf func(format string, args ...interface{})
}

// Worked is what a worker did.
type Worked struct {
	// Tasks granted to it.
	Claimed uint64
	// Handlers that succeeded and whose completion the kernel accepted.
	Completed uint64
	// Handlers that failed and whose Fail the kernel accepted (the task is
	// due again after its back-off, or dead).
	Failed uint64
	// Claims given back unstarted at a stop.
	Released uint64
	// Results the kernel refused: the claim was lost (taken over after it
	// expired, or re-seeded) while the handler ran.
	Lost uint64
}

// Worker is a queue worker over one kernel (NewWorker). Its methods may be
// called from any goroutine; Stop from a handler too.
type Worker struct {
	k           *Kernel
	agent       string
	batch       int
	ttl         time.Duration
	concurrency int
	idle        time.Duration
	backoff     Backoff
	logf        func(format string, args ...interface{})
	stopOnce    sync.Once
	stopped     chan struct{}
}

// NewWorker is a worker claiming as agent on k: by default batches of 10,
// a 30 s ttl renewed every 10 s while a handler runs, every handler of a
// batch at once, 1 s between polls of an empty board, DefaultBackoff.
// Options out of range (a batch beyond 1000, a negative ttl) are refused
// with CodeInvalidInput by Run.
func NewWorker(k *Kernel, agent string, opts WorkerOptions) *Worker {
	w := &Worker{
		k:           k,
		agent:       agent,
		batch:       opts.Batch,
		ttl:         opts.TTL,
		concurrency: opts.Concurrency,
		idle:        opts.Idle,
		backoff:     DefaultBackoff,
		logf:        opts.Logf,
		stopped:     make(chan struct{}),
	}
	if w.batch == 0 {
		w.batch = 10
	}
	if w.ttl == 0 {
		w.ttl = 30 * time.Second
	}
	if w.concurrency <= 0 {
		w.concurrency = w.batch
	}
	if w.concurrency <= 0 {
		w.concurrency = 1
	}
	if w.idle <= 0 {
		w.idle = time.Second
	}
	if opts.Backoff != nil {
		w.backoff = *opts.Backoff
	}
	if w.logf == nil {
		w.logf = log.Printf
	}
	return w
}

// Stop asks the worker to stop, for good: no new claim; the handlers of
// the current batch not yet started are released; the running ones finish
// and are reported; then Run returns. Any goroutine, any number of times.
func (w *Worker) Stop() { w.stopOnce.Do(func() { close(w.stopped) }) }

func (w *Worker) isStopped(ctx context.Context) bool {
	select {
	case <-w.stopped:
		return true
	case <-ctx.Done():
		return true
	default:
		return false
	}
}

// wait waits d, cut short by a stop or ctx.
func (w *Worker) wait(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-w.stopped:
	case <-ctx.Done():
	}
}

// Run works until Stop is called or ctx is done (a graceful stop either
// way, answered with a nil error). A store failure (*StorageError) is
// logged and the loop goes on after the idle wait (claims it could not
// report expire and are taken over); any other error (CodeInvalidInput: a
// bad option) ends it.
func (w *Worker) Run(ctx context.Context, handler Handler) (Worked, error) {
	return w.work(ctx, handler, false)
}

// RunUntilIdle works until a claim finds no ready task (or a stop), and
// answers the first error of a call.
func (w *Worker) RunUntilIdle(ctx context.Context, handler Handler) (Worked, error) {
	return w.work(ctx, handler, true)
}

func (w *Worker) work(ctx context.Context, handler Handler, untilIdle bool) (Worked, error) {
	var worked Worked
	if handler == nil {
		return worked, refused(CodeInvalidInput, "the handler is nil")
	}
	for !w.isStopped(ctx) {
		claimed, err := w.round(ctx, handler, &worked)
		var storage *StorageError
		switch {
		case err != nil && ctx.Err() != nil:
			// The claim was cut short by ctx: a stop.
			return worked, nil
		case err != nil && !untilIdle && errors.As(err, &storage):
			w.logf("gak: worker %s: %v; going on", w.agent, err)
			w.wait(ctx, w.idle)
		case err != nil:
			return worked, err
		case claimed:
		case untilIdle:
			return worked, nil
		default:
			w.wait(ctx, w.idle)
		}
	}
	return worked, nil
}

// ran is how one handler ended.
type ran struct {
	task    Task
	started bool
	err     error
}

// round is one batch: claim, run, report. It answers whether it claimed
// anything.
func (w *Worker) round(ctx context.Context, handler Handler, worked *Worked) (bool, error) {
	board := w.k.Taskboard()
	tasks, err := board.ClaimBatch(ctx, w.agent, w.ttl, w.batch)
	if err != nil {
		return false, err
	}
	if len(tasks) == 0 {
		return false, nil
	}
	worked.Claimed += uint64(len(tasks))
	results := make([]ran, len(tasks))
	slots := make(chan struct{}, w.concurrency)
	var running sync.WaitGroup
	for i := range tasks {
		results[i].task = tasks[i]
		slots <- struct{}{} // in batch order, at most concurrency at once
		if w.isStopped(ctx) {
			<-slots
			continue
		}
		results[i].started = true
		running.Add(1)
		go func(r *ran) {
			defer running.Done()
			defer func() { <-slots }()
			r.err = w.one(ctx, handler, r.task)
		}(&results[i])
	}
	running.Wait()

	// Reports are made even after ctx is done: a stop finishes what ran.
	report := context.Background()
	var done []Completion
	for _, r := range results {
		if r.started && r.err == nil {
			done = append(done, Completion{ID: r.task.ID, Token: r.task.Token})
		}
	}
	if len(done) > 0 {
		answers, err := board.CompleteBatch(report, done)
		if err != nil {
			return true, err
		}
		for _, a := range answers {
			if a.Answer == Completed {
				worked.Completed++
			} else {
				worked.Lost++
			}
		}
	}
	for _, r := range results {
		if !r.started || r.err == nil {
			continue
		}
		after := w.backoff.DelayMs(r.task.Attempts, unit())
		_, err := board.Fail(report, r.task.ID, r.task.Token, Reason(r.err.Error()), &after)
		if lost, err := w.counted(err); err != nil {
			return true, err
		} else if lost {
			worked.Lost++
		} else {
			worked.Failed++
		}
	}
	for _, r := range results {
		if r.started {
			continue
		}
		err := board.Release(report, r.task.ID, r.task.Token)
		if lost, err := w.counted(err); err != nil {
			return true, err
		} else if lost {
			worked.Lost++
		} else {
			worked.Released++
		}
	}
	return true, nil
}

// counted sorts a report's error: accepted, lost (the claim is another
// worker's now), or an error that ends the round.
func (w *Worker) counted(err error) (lost bool, _ error) {
	switch Code(err) {
	case "":
		if err != nil {
			return false, err
		}
		return false, nil
	case CodeLeaseLost, CodeNotFound:
		return true, nil
	}
	return false, err
}

// handlerPanic is a recovered panic of a handler.
type handlerPanic struct{ value interface{} }

func (p *handlerPanic) Error() string { return fmt.Sprintf("panicked: %v", p.value) }

// one runs a handler, its claim renewed every ttl/3 until it returns.
func (w *Worker) one(ctx context.Context, handler Handler, task Task) (err error) {
	hctx, cancel := context.WithCancel(detached{ctx})
	defer cancel()
	stop := make(chan struct{})
	var renewing sync.WaitGroup
	renewing.Add(1)
	go func() {
		defer renewing.Done()
		w.keepAlive(task, cancel, stop)
	}()
	defer func() {
		close(stop)
		renewing.Wait()
	}()
	defer func() {
		if v := recover(); v != nil {
			err = &handlerPanic{v}
		}
	}()
	return handler(hctx, task)
}

// keepAlive renews the claim every ttl/3 until stop is closed or a renewal
// is refused (then the handler's context is cancelled: its result will be
// refused as lost). A store failure is retried at the next tick.
func (w *Worker) keepAlive(task Task, lost context.CancelFunc, stop <-chan struct{}) {
	every := w.ttl / 3
	if every < time.Millisecond {
		every = time.Millisecond
	}
	ticker := time.NewTicker(every)
	defer ticker.Stop()
	for {
		select {
		case <-stop:
			return
		case <-ticker.C:
		}
		select {
		case <-stop:
			return
		default:
		}
		_, err := w.k.Taskboard().Renew(context.Background(), task.ID, task.Token, w.ttl)
		switch Code(err) {
		case "":
			if err != nil {
				w.logf("gak: worker %s: renewing %s: %v; retrying", w.agent, task.ID, err)
			}
		case CodeLeaseLost, CodeNotFound:
			lost()
			return
		default:
			w.logf("gak: worker %s: renewing %s: %v; retrying", w.agent, task.ID, err)
		}
	}
}

// detached is a context with its parent's values and none of its
// cancellation (context.WithoutCancel, which Go 1.19 lacks).
type detached struct{ parent context.Context }

func (detached) Deadline() (time.Time, bool)         { return time.Time{}, false }
func (detached) Done() <-chan struct{}               { return nil }
func (detached) Err() error                          { return nil }
func (d detached) Value(key interface{}) interface{} { return d.parent.Value(key) }
