package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	gak "github.com/gak-kernel/gak/host/go"
)

// The fuzzers' cases (tests/host-protocol/fuzz, README there, "Fuzzers"):
// generated SQL texts a sink body runs through its driver handle, store
// URLs with passwords that no message may show, and retry sequences whose
// call answers what its last attempt did. Replayed here through the Go
// API (and so through libgak), as every host replays them.

// SQLCase is a SQL text and what each database's host must do with it:
// "refuse", "run" or "any".
type SQLCase struct {
	SQL      string `json:"sql"`
	Postgres string `json:"postgres"`
	SQLite   string `json:"sqlite"`
	Ends     string `json:"ends"`
}

// PasswordCase is a password and the markers no message may contain.
type PasswordCase struct {
	Password string   `json:"password"`
	Markers  []string `json:"markers"`
}

// Attempt is one attempt of a retry case: whether the body meets a
// conflict, and how it ends ("ok", "fail", "panic").
type Attempt struct {
	Conflict bool   `json:"conflict"`
	Body     string `json:"body"`
}

// RetryCase is a sequence of attempts and the call's answer: "ok",
// "write-failed", "panic" or "storage".
type RetryCase struct {
	Attempts []Attempt `json:"attempts"`
	Answer   string    `json:"answer"`
}

// Fuzz is the three files' cases.
type Fuzz struct {
	Dir       string
	SQL       []SQLCase
	Templates []string
	Passwords []PasswordCase
	Retries   []RetryCase
}

// FuzzDir is $GAK_HOST_FUZZ_DIR when set (`just soak` writes fresh cases
// there), else the repository's tests/host-protocol/fuzz.
func FuzzDir() (string, error) {
	if dir := os.Getenv("GAK_HOST_FUZZ_DIR"); dir != "" {
		return dir, nil
	}
	repo, err := Repo()
	if err != nil {
		return "", err
	}
	return filepath.Join(repo, "tests", "host-protocol", "fuzz"), nil
}

// LoadFuzz reads sql.json, passwords.json and retries.json from dir; a
// missing or malformed file is an error, never an empty replay.
func LoadFuzz(dir string) (*Fuzz, error) {
	f := &Fuzz{Dir: dir}
	var sql struct {
		Cases []SQLCase `json:"cases"`
	}
	var passwords struct {
		Templates []string       `json:"templates"`
		Cases     []PasswordCase `json:"cases"`
	}
	var retries struct {
		Cases []RetryCase `json:"cases"`
	}
	for _, file := range []struct {
		name string
		into any
	}{{"sql.json", &sql}, {"passwords.json", &passwords}, {"retries.json", &retries}} {
		text, err := os.ReadFile(filepath.Join(dir, file.name))
		if err != nil {
			return nil, fmt.Errorf("the fuzzers' cases: %v (cargo run -p gak-tests --bin gak-hostfuzz writes them)", err)
		}
		if err := json.Unmarshal(text, file.into); err != nil {
			return nil, fmt.Errorf("%s: %v", filepath.Join(dir, file.name), err)
		}
	}
	f.SQL, f.Templates, f.Passwords, f.Retries = sql.Cases, passwords.Templates, passwords.Cases, retries.Cases
	if len(f.SQL) == 0 || len(f.Templates) == 0 || len(f.Passwords) == 0 || len(f.Retries) == 0 {
		return nil, fmt.Errorf("%s: a fuzz file holds no cases", dir)
	}
	return f, nil
}

// FuzzResult is one file's replay on one store: how many cases ran, and
// each failed one's reason (or why the replay was skipped).
type FuzzResult struct {
	Name     string // e.g. "sql.json [sqlite]"
	Cases    int
	Failures []string
	Skipped  string
}

func (r *FuzzResult) fail(i int, format string, args ...any) {
	r.Failures = append(r.Failures, fmt.Sprintf("case %d: %s", i, fmt.Sprintf(format, args...)))
}

func skippedOr(r FuzzResult, err error) FuzzResult {
	var skip *ErrSkipped
	if errors.As(err, &skip) {
		r.Skipped = skip.Why
	} else {
		r.Failures = append(r.Failures, err.Error())
	}
	return r
}

// downstream reads keys of the downstream table ("" absent).
func downstream(k *gak.Kernel, keys ...string) ([]string, error) {
	values := make([]string, len(keys))
	err := k.WithDownstream(context.Background(), func(_ context.Context, down *gak.Downstream) error {
		for i, key := range keys {
			v, ok, err := down.Get(key)
			if err != nil {
				return err
			}
			if ok {
				values[i] = "=" + v
			}
		}
		return nil
	})
	return values, err
}

// ReplaySQL runs every SQL case on one fresh store of store ("sqlite" or
// "postgres"), case i on the sink resource fz-i.
func (s *Stores) ReplaySQL(f *Fuzz, store string) FuzzResult {
	r := FuzzResult{Name: "sql.json [" + store + "]"}
	var open string
	cleanup := func() {}
	switch store {
	case "sqlite":
		s.count++
		path := filepath.Join(s.Scratch, fmt.Sprintf("fuzz-sql-%d-%d.db", os.Getpid(), s.count))
		removeDB(path)
		open, cleanup = "sqlite:"+path, func() { removeDB(path) }
	case "postgres":
		var err error
		if open, cleanup, err = s.postgres("fzsql"); err != nil {
			return skippedOr(r, err)
		}
	default:
		r.Skipped = "a body has no SQL handle on " + store
		return r
	}
	defer cleanup()
	k, err := gak.Open(open)
	if err != nil {
		return skippedOr(r, err)
	}
	defer k.Close()
	ctx := context.Background()
	for i, c := range f.SQL {
		r.Cases++
		expect := c.SQLite
		if store == "postgres" {
			expect = c.Postgres
		}
		if why := sqlCase(ctx, k, i, c.SQL, expect); why != "" {
			r.fail(i, "%s (sql %q)", why, c.SQL)
		}
	}
	return r
}

// sqlCase is the README's four steps for one text; "" when it held.
func sqlCase(ctx context.Context, k *gak.Kernel, i int, text, expect string) string {
	resource := fmt.Sprintf("fz-%d", i)
	key := func(name string) string { return fmt.Sprintf("fz/%d/%s", i, name) }
	raised := false
	err := k.Sideeffect().WriteFenced(ctx, resource, 5, func(_ context.Context, down *gak.Downstream) error {
		_ = down.Put(key("before"), "1")
		_, execErr := down.Exec(text)
		raised = execErr != nil
		_ = down.Put(key("after"), "1")
		return nil
	})
	committed := err == nil
	seen, seenErr := k.Sideeffect().SinkSeen(ctx, resource)
	keys, getErr := downstream(k, key("before"), key("after"))
	switch {
	case seenErr != nil || getErr != nil:
		return fmt.Sprintf("reading back: %v %v", seenErr, getErr)
	case committed && (seen != 5 || keys[0] == "" || keys[1] == ""):
		return fmt.Sprintf("answered ok but the sink saw fence %d and the keys are %q: not all of it committed", seen, keys)
	case !committed && (seen != 0 || keys[0] != "" || keys[1] != ""):
		return fmt.Sprintf("answered %v but the sink saw fence %d and the keys are %q: part of it committed", err, seen, keys)
	case expect == "refuse" && !raised:
		return fmt.Sprintf("the text ran (it must be refused); the call answered %v", err)
	case expect == "run" && (raised || !committed):
		return fmt.Sprintf("the text must run and the call commit: raised %t, answered %v", raised, err)
	}
	zombie := k.Sideeffect().WriteFenced(ctx, resource, 2, func(_ context.Context, down *gak.Downstream) error {
		return down.Put(key("zombie"), "1")
	})
	stayed, getErr := downstream(k, key("zombie"))
	switch {
	case getErr != nil:
		return fmt.Sprintf("reading back the zombie's key: %v", getErr)
	case committed && (gak.Code(zombie) != gak.CodeFenceStale || stayed[0] != ""):
		return fmt.Sprintf("a zombie at fence 2 after fence 5 answered %v (want fence-stale), its key %q", zombie, stayed[0])
	case !committed && zombie != nil:
		return fmt.Sprintf("after a call that did not commit, fence 2 answered %v (want ok)", zombie)
	}
	return ""
}

// serializationFailure is how a body meets a conflict on PostgreSQL.
const serializationFailure = "DO $$BEGIN RAISE EXCEPTION USING ERRCODE = '40001'; END$$"

// fuzzPanic is what a body panics with on an attempt whose END is panic.
type fuzzPanic struct{ attempt int }

// callCatching runs call, returning its error or what it panicked with.
func callCatching(call func() error) (err error, panicked any) {
	defer func() { panicked = recover() }()
	return call(), nil
}

// ReplayRetries runs every retry case on one fresh PostgreSQL schema,
// through WriteFenced ("write-fenced") or WithDownstream
// ("with-downstream"). The scripted store these cases also name is the
// Rust host's (its transaction loop, which libgak runs unchanged).
func (s *Stores) ReplayRetries(f *Fuzz, flavour string) FuzzResult {
	r := FuzzResult{Name: "retries.json [postgres] " + flavour}
	open, cleanup, err := s.postgres("fzrt")
	if err != nil {
		return skippedOr(r, err)
	}
	defer cleanup()
	k, err := gak.Open(open)
	if err != nil {
		return skippedOr(r, err)
	}
	defer k.Close()
	for i, c := range f.Retries {
		r.Cases++
		if why := retryCase(k, i, c, flavour); why != "" {
			r.fail(i, "%s", why)
		}
	}
	return r
}

func retryCase(k *gak.Kernel, i int, c RetryCase, flavour string) string {
	ctx := context.Background()
	key, resource := fmt.Sprintf("rt/%d", i), fmt.Sprintf("rt-%d", i)
	runs := 0
	var trouble string
	body := func(_ context.Context, down *gak.Downstream) error {
		n := runs
		runs++
		if n >= len(c.Attempts) {
			trouble = fmt.Sprintf("the body ran %d times, more than the %d attempts listed", runs, len(c.Attempts))
			return errors.New(trouble)
		}
		if err := down.Put(key, strconv.Itoa(n)); err != nil && !c.Attempts[n].Conflict {
			trouble = fmt.Sprintf("attempt %d: put: %v", n, err)
		}
		if c.Attempts[n].Conflict {
			if _, err := down.Exec(serializationFailure); err == nil {
				trouble = fmt.Sprintf("attempt %d: the serialization failure did not raise", n)
			}
		}
		switch c.Attempts[n].Body {
		case "ok":
			return nil
		case "fail":
			return fmt.Errorf("attempt %d failed on purpose", n)
		case "panic":
			panic(fuzzPanic{n})
		}
		trouble = "unknown body end " + strconv.Quote(c.Attempts[n].Body)
		return errors.New(trouble)
	}
	err, panicked := callCatching(func() error {
		if flavour == "with-downstream" {
			return k.WithDownstream(ctx, body)
		}
		return k.Sideeffect().WriteFenced(ctx, resource, 1, body)
	})
	if trouble != "" {
		return trouble
	}
	if p, ok := panicked.(fuzzPanic); panicked != nil && !ok {
		return fmt.Sprintf("the call panicked with %v, not with the body's panic", panicked)
	} else if ok && p.attempt != len(c.Attempts)-1 {
		return fmt.Sprintf("the call re-raised attempt %d's panic; the last attempt was %d", p.attempt, len(c.Attempts)-1)
	}
	got := "ok"
	switch {
	case panicked != nil:
		got = "panic"
	case err != nil:
		got = gak.Code(err)
	}
	last := len(c.Attempts) - 1
	var seen uint64
	var seenErr error
	if flavour == "write-fenced" {
		seen, seenErr = k.Sideeffect().SinkSeen(ctx, resource)
	}
	values, getErr := downstream(k, key)
	switch {
	case got != c.Answer:
		return fmt.Sprintf("%v: answered %s (%v), want %s", c.Attempts, got, err, c.Answer)
	case runs != len(c.Attempts):
		return fmt.Sprintf("%v: the body ran %d times, want once per attempt (%d)", c.Attempts, runs, len(c.Attempts))
	case seenErr != nil || getErr != nil:
		return fmt.Sprintf("reading back: %v %v", seenErr, getErr)
	case got == "ok" && (values[0] != "="+strconv.Itoa(last) || (flavour == "write-fenced" && seen != 1)):
		return fmt.Sprintf("%v: committed, but %s is %q and the sink saw fence %d (want attempt %d's value, fence 1)", c.Attempts, key, values[0], seen, last)
	case got != "ok" && (values[0] != "" || seen != 0):
		return fmt.Sprintf("%v: answered %s, but %s is %q and the sink saw fence %d (want nothing written)", c.Attempts, got, key, values[0], seen)
	}
	return ""
}

// ReplayPasswords gives every password, in every template, to every
// entry point of this package that takes a store URL — Open
// (gak_kernel_open), OpenWith (gak_kernel_open_with), DropPostgresSchema
// (gak_postgres_drop_schema), and the Options' own formatting — and
// checks that each fails without a marker in its message.
func ReplayPasswords(f *Fuzz) FuzzResult {
	r := FuzzResult{Name: "passwords.json [open]"}
	for i, c := range f.Passwords {
		r.Cases++
		if why := passwordCase(f.Templates, c); why != "" {
			r.fail(i, "%s", why)
		}
	}
	return r
}

// shows is the first marker text holds, or "".
func shows(text string, markers []string) string {
	for _, m := range markers {
		if strings.Contains(text, m) {
			return m
		}
	}
	return ""
}

// masked is text with every marker replaced, to quote in a failure.
func masked(text string, markers []string) string {
	for _, m := range markers {
		text = strings.ReplaceAll(text, m, "<marker>")
	}
	return text
}

func passwordCase(templates []string, c PasswordCase) string {
	for t, template := range templates {
		url := strings.ReplaceAll(template, "{password}", c.Password)
		opts := gak.Options{Store: url}
		formatted := fmt.Sprintf("%v %+v %#v %s %q %x", opts, opts, opts, opts, opts, opts)
		if m := shows(formatted, c.Markers); m != "" {
			return fmt.Sprintf("template %d: Options' formatting shows %q: %s", t, m, masked(formatted, c.Markers))
		}
		for _, entry := range []struct {
			name string
			call func() error
		}{
			{"Open", func() error { return opened(gak.Open(url)) }},
			{"OpenWith", func() error { return opened(gak.OpenWith(opts)) }},
			{"DropPostgresSchema", func() error { return gak.DropPostgresSchema(url) }},
		} {
			err, panicked := callCatching(entry.call)
			text := fmt.Sprint(err)
			if panicked != nil {
				text = fmt.Sprintf("panic: %v", panicked)
			}
			switch {
			case err == nil && panicked == nil:
				return fmt.Sprintf("template %d: %s succeeded", t, entry.name)
			case shows(text, c.Markers) != "":
				return fmt.Sprintf("template %d: %s's message shows the password: %s", t, entry.name, masked(text, c.Markers))
			}
		}
	}
	return ""
}

// opened closes a kernel that opened (it must not have: err is then nil).
func opened(k *gak.Kernel, err error) error {
	if k != nil {
		_ = k.Close()
	}
	return err
}
