package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	gak "github.com/gak-kernel/gak/host/go"
	"github.com/gak-kernel/gak/host/go/internal/secret"
)

// The host-protocol cases (tests/host-protocol, README there) judge what a
// host does around the component. This host is libgak's: the transaction's
// life, conflict re-runs and ambiguous commits are the Rust host's loop,
// run unchanged; what is this host's own is replayed here — sink bodies
// written in Go (their store errors, transaction control, re-entrant
// calls), oversized payloads, store URLs, and the Go Runner.

// Case is one case of a host-protocol file.
type Case struct {
	Name   string
	Rule   string
	Stores []string
	// SystemClock: renewals take real time.
	SystemClock bool
	// URL cases: opening URL must fail without showing Secret.
	URL    string
	Secret string
	steps  []any
}

// ParseCases parses a host-protocol file: an array of cases.
func ParseCases(text []byte) ([]Case, error) {
	v, err := decode(text)
	if err != nil {
		return nil, fmt.Errorf("invalid JSON: %v", err)
	}
	items, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("$: expected an array of cases")
	}
	var cases []Case
	for i, item := range items {
		o, ok := item.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("$[%d]: expected a case object", i)
		}
		c := Case{Stores: []string{"scripted"}}
		if c.Name, ok = o["case"].(string); !ok {
			return nil, fmt.Errorf("$[%d].case: expected a string", i)
		}
		c.Rule, _ = o["rule"].(string)
		if u, isURL := o["url"].(string); isURL {
			c.URL = u
			c.Secret, _ = o["secret"].(string)
			cases = append(cases, c)
			continue
		}
		if raw, has := o["stores"]; has {
			list, isArr := raw.([]any)
			if !isArr {
				return nil, fmt.Errorf("$[%d].stores: expected an array", i)
			}
			c.Stores = nil
			for _, s := range list {
				name, isStr := s.(string)
				if !isStr {
					return nil, fmt.Errorf("$[%d].stores: expected strings", i)
				}
				c.Stores = append(c.Stores, name)
			}
		}
		c.SystemClock = o["clock"] == any("system")
		if c.steps, ok = o["steps"].([]any); !ok {
			return nil, fmt.Errorf("$[%d].steps: expected an array", i)
		}
		cases = append(cases, c)
	}
	return cases, nil
}

// ErrSkipped says why a case did not run on a store (never a pass).
type ErrSkipped struct{ Why string }

func (e *ErrSkipped) Error() string { return "skipped: " + e.Why }

// ScriptedSkip is why the cases that script store faults or count
// transactions do not run here.
const ScriptedSkip = "it scripts store faults or counts transactions: that is the Rust host's transaction loop, which libgak runs unchanged (replayed by tests/tests/host_protocol.rs)"

// Stores says where a case runs: scratch (for SQLite files) and the
// PostgreSQL DSN ("" when there is none).
type Stores struct {
	Scratch  string
	Postgres string
	count    int
	// Whether the server answered, asked once.
	probed      bool
	unreachable error
}

// InCI is whether CI=true: a PostgreSQL case that cannot run fails there
// instead of being skipped.
func InCI() bool { return os.Getenv("CI") == "true" }

// postgres is a fresh schema of the PostgreSQL DSN (named after tag),
// dropped by cleanup; *ErrSkipped when no DSN was given, or when the
// server cannot be reached outside CI (under CI=true that is an error:
// every PostgreSQL test fails there instead of being skipped).
func (s *Stores) postgres(tag string) (string, func(), error) {
	if s.Postgres == "" {
		return "", nil, &ErrSkipped{"no PostgreSQL DSN given (--postgres, or GAK_PG_DSN for the tests)"}
	}
	s.count++
	u, err := url.Parse(s.Postgres)
	if err != nil {
		// url.Parse's message quotes the URL: never shown.
		return "", nil, fmt.Errorf("the PostgreSQL DSN %s is not a URL", secret.Redact(s.Postgres))
	}
	q := u.Query()
	q.Set("schema", fmt.Sprintf("gak_%s_go%d_%d", tag, os.Getpid(), s.count))
	u.RawQuery = q.Encode()
	open := u.String()
	if !s.probed {
		s.probed = true
		if err := gak.DropPostgresSchema(open); err != nil {
			s.unreachable = err
		}
	}
	if s.unreachable != nil {
		why := fmt.Sprintf("PostgreSQL at %s cannot be used: %v", secret.Redact(s.Postgres), s.unreachable)
		if InCI() {
			return "", nil, fmt.Errorf("%s (CI=true: PostgreSQL cases must run)", why)
		}
		return "", nil, &ErrSkipped{why}
	}
	if err := gak.DropPostgresSchema(open); err != nil {
		return "", nil, err
	}
	return open, func() { _ = gak.DropPostgresSchema(open) }, nil
}

// caseTimeout bounds a case: a host that deadlocks fails it.
const caseTimeout = 60 * time.Second

// heartbeatWait bounds a body's wait for its heartbeat.
const heartbeatWait = 10 * time.Second

// RunCase runs a call or runner case on one store; *ErrSkipped when it
// does not apply there.
func (s *Stores) RunCase(c Case, store string) error {
	if c.URL != "" {
		return checkURL(c)
	}
	for _, step := range c.steps {
		o, _ := step.(map[string]any)
		_, faults := o["faults"]
		_, tx := o["tx"]
		if (faults || tx) && store == "scripted" {
			return &ErrSkipped{ScriptedSkip}
		}
	}
	s.count++
	var open string
	cleanup := func() {}
	switch store {
	case "scripted":
		// The scripted store without faults is the memory binding.
		open = "memory:"
	case "sqlite":
		path := filepath.Join(s.Scratch, fmt.Sprintf("case-%d-%d.db", os.Getpid(), s.count))
		removeDB(path)
		open = "sqlite:" + path
		cleanup = func() { removeDB(path) }
	case "postgres":
		var err error
		if open, cleanup, err = s.postgres("hp"); err != nil {
			return err
		}
	default:
		return &ErrSkipped{"this host has no store " + store}
	}
	defer cleanup()
	done := make(chan error, 1)
	go func() { done <- runCase(c, open) }()
	select {
	case err := <-done:
		return err
	case <-time.After(caseTimeout):
		return fmt.Errorf("the case did not finish within %s (a deadlock?)", caseTimeout)
	}
}

func runCase(c Case, store string) error {
	var clock *gak.ManualClock
	opts := gak.Options{Store: store}
	if !c.SystemClock {
		clock = gak.NewManualClock(0)
		opts.Clock = clock
	}
	k, err := gak.OpenWith(opts)
	if err != nil {
		return err
	}
	defer k.Close()
	binds := Binds{}
	for i, step := range c.steps {
		o, ok := step.(map[string]any)
		if !ok {
			return fmt.Errorf("step %d: expected an object", i)
		}
		if _, isRun := o["run"]; isRun {
			if err := runnerStep(k, clock, o, binds); err != nil {
				return fmt.Errorf("step %d: %v", i, err)
			}
			continue
		}
		if _, isWork := o["work"]; isWork {
			if err := workStep(k, clock, o, binds); err != nil {
				return fmt.Errorf("step %d: %v", i, err)
			}
			continue
		}
		if err := runStep(context.Background(), k, clock, o, binds); err != nil {
			return fmt.Errorf("step %d: %v", i, err)
		}
	}
	return nil
}

func checkURL(c Case) error {
	k, err := gak.Open(c.URL)
	if err == nil {
		_ = k.Close()
		return fmt.Errorf("%s opened", c.URL)
	}
	shown := err.Error()
	for e := errors.Unwrap(err); e != nil; e = errors.Unwrap(e) {
		shown += " / " + e.Error()
	}
	if c.Secret != "" && strings.Contains(shown, c.Secret) {
		return fmt.Errorf("the error shows the password: %s", strings.ReplaceAll(shown, c.Secret, "<the password>"))
	}
	return nil
}

// outcomeName is the runner's answer as the cases name it.
func outcomeName(ran gak.Ran, err error) (string, any) {
	var failed *gak.BodyFailedError
	var notApplied *gak.NotAppliedError
	switch {
	case errors.As(err, &failed):
		return "body-failed", nil
	case errors.As(err, &notApplied):
		return "not-applied", nil
	case err != nil:
		return "error " + gak.Code(err), nil
	}
	switch ran.Kind {
	case gak.Applied, gak.Replayed:
		return string(ran.Kind), text(ran.Result)
	}
	return string(ran.Kind), nil
}

// waitFor waits until done says so, woken by the heartbeat's changes, at
// most heartbeatWait.
func waitFor(hb *gak.Heartbeat, done func() bool) bool {
	deadline := time.After(heartbeatWait)
	for !done() {
		select {
		case <-hb.Changed():
		case <-deadline:
			return done()
		}
	}
	return true
}

func runnerStep(k *gak.Kernel, clock *gak.ManualClock, step map[string]any, binds Binds) error {
	run, err := substitute(step["run"], binds)
	if err != nil {
		return err
	}
	a, ok := field(run, "action")
	if !ok {
		return fmt.Errorf("run.action: missing")
	}
	key, err1 := getString(a, "key")
	resource, err2 := getString(a, "resource")
	if err1 != nil || err2 != nil {
		return fmt.Errorf("run.action: key and resource are required")
	}
	action := gak.NewAction(key, resource)
	if s, _ := stringOrEmpty(a, "retry-safety"); s == "unsafe" {
		action.RetrySafety = gak.Unsafe
	}
	action.Fingerprint, _ = stringOrEmpty(a, "fingerprint")
	d, err := ttl(run)
	if err != nil {
		return fmt.Errorf("run.ttl: %v", err)
	}
	body, err := getString(run, "body")
	if err != nil {
		return fmt.Errorf("run.body: %v", err)
	}
	result, _ := stringOrEmpty(run, "result")
	inside, _ := field(run, "inside")
	insideSteps, _ := inside.([]any)
	calls := 0
	var trouble string
	ran, runErr := gak.NewRunner(k, d).Run(context.Background(), action, func(ctx context.Context, lease gak.Lease, hb *gak.Heartbeat) ([]byte, error) {
		calls++
		switch body {
		case "return":
			return []byte(result), nil
		case "fail":
			return nil, errors.New("the body failed on purpose")
		case "not-applied":
			return nil, gak.NotApplied(errors.New("surely not sent"))
		case "outlive":
			if !waitFor(hb, func() bool { return hb.Renewals() >= 3 }) {
				trouble = "the heartbeat reported no renewal within 10 s"
				return nil, errors.New("no renewal")
			}
			inner := binds.clone()
			for i, s := range insideSteps {
				o, ok := s.(map[string]any)
				if !ok {
					continue
				}
				if err := runStep(context.Background(), k, clock, o, inner); err != nil {
					trouble = fmt.Sprintf("inside step %d: %v", i, err)
				}
			}
			return []byte(result), nil
		case "lose":
			if err := k.Sideeffect().MarkUncertain(context.Background(), action, lease, "lost on purpose"); err != nil {
				trouble = "mark-uncertain: " + err.Error()
			}
			if !waitFor(hb, func() bool { return hb.Check() != nil }) {
				trouble = "the heartbeat never reported the lease lost"
			} else if ctx.Err() == nil {
				trouble = "the body's context was not cancelled when the lease was lost"
			}
			return nil, errors.New("the lease was lost")
		}
		return nil, fmt.Errorf("unknown body %q", body)
	})
	if trouble != "" {
		return errors.New(trouble)
	}
	outcome, value := outcomeName(ran, runErr)
	want, _ := step["outcome"].(string)
	if outcome != want {
		return fmt.Errorf("run: expected %s, got %s (%v)", want, outcome, runErr)
	}
	if wantValue, has := step["value"]; has {
		m, err := matches(wantValue, value, value != nil, binds)
		if err != nil {
			return err
		}
		if !m {
			return fmt.Errorf("run: expected value %s, got %s", show(wantValue), show(value))
		}
	}
	if wantCalls, has := step["calls"]; has {
		if n, _ := ms(wantCalls); int(n) != calls {
			return fmt.Errorf("run: expected the body called %d times, got %d", n, calls)
		}
	}
	return nil
}

// ProtocolFiles is the repository's tests/host-protocol/*.json.
func ProtocolFiles() ([]File, error) {
	repo, err := Repo()
	if err != nil {
		return nil, err
	}
	return LoadPaths([]string{filepath.Join(repo, "tests", "host-protocol")}), nil
}

// workStep runs the Go worker until idle with the step's scripted handlers
// (README "Worker cases").
func workStep(k *gak.Kernel, clock *gak.ManualClock, step map[string]any, binds Binds) error {
	work, err := substitute(step["work"], binds)
	if err != nil {
		return err
	}
	option := func(key string, def uint64) (uint64, error) {
		v, has := field(work, key)
		if !has {
			return def, nil
		}
		n, ok := ms(v)
		if !ok {
			return 0, fmt.Errorf("work.%s: expected a number", key)
		}
		return n, nil
	}
	agent, _ := stringOrEmpty(work, "agent")
	if agent == "" {
		agent = "w"
	}
	ttlMs, err := option("ttl", 30000)
	if err != nil {
		return err
	}
	batch, err := option("batch", 10)
	if err != nil {
		return err
	}
	concurrency, err := option("concurrency", 0)
	if err != nil {
		return err
	}
	ttl := time.Duration(ttlMs) * time.Millisecond
	opts := gak.WorkerOptions{
		Batch:       int(batch),
		TTL:         ttl,
		Concurrency: int(concurrency),
		Idle:        10 * time.Millisecond,
	}
	if b, has := field(work, "backoff"); has {
		bo, _ := b.(obj)
		base, ok1 := ms(bo["base"])
		max, ok2 := ms(bo["max"])
		if !ok1 || !ok2 {
			return fmt.Errorf("work.backoff: base and max are required")
		}
		jitter := 0.0
		if j, has := field(b, "jitter"); has {
			n, isNum := j.(json.Number)
			if !isNum {
				return fmt.Errorf("work.backoff.jitter: expected a number")
			}
			if jitter, err = n.Float64(); err != nil {
				return fmt.Errorf("work.backoff.jitter: %v", err)
			}
		}
		opts.Backoff = &gak.Backoff{
			Base:   time.Duration(base) * time.Millisecond,
			Max:    time.Duration(max) * time.Millisecond,
			Jitter: jitter,
		}
	}
	handlers, _ := field(work, "handlers")
	def, _ := stringOrEmpty(work, "default")
	if def == "" {
		def = "ok"
	}
	worker := gak.NewWorker(k, agent, opts)
	var mu sync.Mutex
	var order []any
	var trouble string
	note := func(why string) {
		mu.Lock()
		defer mu.Unlock()
		trouble = why
	}
	worked, err := worker.RunUntilIdle(context.Background(), func(ctx context.Context, task gak.Task) error {
		mu.Lock()
		order = append(order, task.ID)
		mu.Unlock()
		script := def
		if h, has := field(handlers, task.ID); has {
			if name, isStr := h.(string); isStr {
				script = name
			}
		}
		switch script {
		case "ok":
			return nil
		case "throw":
			return errors.New("boom")
		case "throw-long":
			return errors.New(strings.Repeat("é", 3000))
		case "throw-nul":
			return errors.New("a\x00b")
		case "panic":
			panic("boom")
		case "stop":
			worker.Stop()
			return nil
		case "lose":
			// The claim expires and another worker takes it over.
			if clock == nil {
				note("lose needs the manual clock")
			} else {
				clock.AdvanceMs(ttlMs)
			}
			if _, err := k.Taskboard().Claim(ctx, task.ID, "thief", ttl); err != nil {
				note("the thief's claim: " + err.Error())
			}
			return nil
		case "outlive":
			// Real time past the ttl: the worker's renewals keep the claim
			// live, so a thief is refused.
			time.Sleep(3 * ttl)
			_, err := k.Taskboard().Claim(ctx, task.ID, "thief", ttl)
			if gak.Code(err) != gak.CodeTaken {
				note(fmt.Sprintf("the thief's claim answered %v", err))
			}
			return nil
		}
		return fmt.Errorf("unknown handler %q", script)
	})
	if err != nil {
		return fmt.Errorf("the worker: %v", err)
	}
	if trouble != "" {
		return errors.New(trouble)
	}
	got := obj{
		"claimed":   num(worked.Claimed),
		"completed": num(worked.Completed),
		"failed":    num(worked.Failed),
		"released":  num(worked.Released),
		"lost":      num(worked.Lost),
	}
	if want, has := step["worked"]; has {
		m, err := matches(want, got, true, binds)
		if err != nil {
			return err
		}
		if !m {
			return fmt.Errorf("work: expected %s, got %s", show(want), show(got))
		}
	}
	if want, has := step["order"]; has {
		ran := order
		if ran == nil {
			ran = []any{}
		}
		m, err := matches(want, ran, true, binds)
		if err != nil {
			return err
		}
		if !m {
			return fmt.Errorf("work: expected the handlers in order %s, got %s", show(want), show(ran))
		}
	}
	return nil
}
