package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"

	gak "github.com/gak-kernel/gak/host/go"
	"github.com/gak-kernel/gak/host/go/internal/secret"
)

// Target makes a kernel over a fresh, empty store, judged by clock.
type Target interface {
	Fresh(clock *gak.ManualClock) (*gak.Kernel, error)
	// Cleanup removes what the last Fresh made.
	Cleanup()
}

// URLTarget is a target from a store URL: "memory:"; "sqlite:PATH" (each
// scenario a new database file next to PATH, removed afterwards);
// "postgres://…" (each scenario a new schema, dropped afterwards).
type URLTarget struct {
	url   string
	count int
	last  func()
}

// NewURLTarget checks the URL before any scenario runs.
func NewURLTarget(store string) (*URLTarget, error) {
	switch {
	case store == "memory" || store == "memory:",
		strings.HasPrefix(store, "sqlite:"),
		strings.HasPrefix(store, "postgres://"), strings.HasPrefix(store, "postgresql://"):
		return &URLTarget{url: store}, nil
	}
	return nil, fmt.Errorf("unknown store %q: expected memory:, sqlite:PATH or postgres://USER@HOST:PORT/DB", secret.Redact(store))
}

// Cleanup removes the last scenario's file or schema.
func (t *URLTarget) Cleanup() {
	if t.last != nil {
		t.last()
		t.last = nil
	}
}

func removeDB(path string) {
	for _, suffix := range []string{"", "-wal", "-shm"} {
		_ = os.Remove(path + suffix)
	}
}

// Fresh opens a kernel on a new, empty store.
func (t *URLTarget) Fresh(clock *gak.ManualClock) (*gak.Kernel, error) {
	t.Cleanup()
	t.count++
	store := t.url
	switch {
	case strings.HasPrefix(store, "sqlite:"):
		spec := strings.TrimPrefix(store, "sqlite:")
		base, query, _ := strings.Cut(spec, "?")
		if base == "" {
			base = "gak-conformance.db"
		}
		path := fmt.Sprintf("%s-go%d-%d.db", strings.TrimSuffix(base, ".db"), os.Getpid(), t.count)
		removeDB(path)
		t.last = func() { removeDB(path) }
		store = "sqlite:" + path
		if query != "" {
			store += "?" + query
		}
	case strings.HasPrefix(store, "postgres"):
		u, err := url.Parse(store)
		if err != nil {
			// url.Parse's message quotes the URL, password and all.
			return nil, fmt.Errorf("bad postgres URL %s: not a URL", secret.Redact(store))
		}
		q := u.Query()
		base := q.Get("schema")
		if base == "" {
			base = "gak"
		}
		q.Set("schema", fmt.Sprintf("%s_go%d_%d", base, os.Getpid(), t.count))
		u.RawQuery = q.Encode()
		store = u.String()
		if err := gak.DropPostgresSchema(store); err != nil {
			return nil, err
		}
		t.last = func() { _ = gak.DropPostgresSchema(store) }
	}
	return gak.OpenWith(gak.Options{Store: store, Clock: clock})
}

// Verdict is one scenario's: Failure is "" when it passed.
type Verdict struct {
	Name    string
	Failure string
}

// Report is the verdicts of a run.
type Report struct {
	Verdicts []Verdict
}

// Passed counts the scenarios that passed.
func (r *Report) Passed() int {
	n := 0
	for _, v := range r.Verdicts {
		if v.Failure == "" {
			n++
		}
	}
	return n
}

// Failed counts the rest.
func (r *Report) Failed() int { return len(r.Verdicts) - r.Passed() }

// Render is the runner's output: a line per scenario, then
// "N passed, M failed".
func (r *Report) Render() string {
	var b strings.Builder
	for _, v := range r.Verdicts {
		if v.Failure == "" {
			fmt.Fprintf(&b, "ok   %s\n", v.Name)
		} else {
			fmt.Fprintf(&b, "FAIL %s: %s\n", v.Name, v.Failure)
		}
	}
	fmt.Fprintf(&b, "%d passed, %d failed\n", r.Passed(), r.Failed())
	return b.String()
}

// File is a vector file's name and text.
type File struct {
	Name string
	Text []byte
}

// Run runs every scenario of files, each on a fresh store with the clock
// at 0.
func Run(target Target, files []File) *Report {
	report := &Report{}
	defer target.Cleanup()
	for _, f := range files {
		scenarios, err := ParseFile(f.Text)
		if err != nil {
			report.Verdicts = append(report.Verdicts, Verdict{Name: f.Name, Failure: "cannot parse: " + err.Error()})
			continue
		}
		for i, s := range scenarios {
			label := s.Name
			if label == "" {
				label = fmt.Sprintf("#%d", i)
			}
			v := Verdict{Name: f.Name + " :: " + label}
			clock := gak.NewManualClock(0)
			k, err := target.Fresh(clock)
			if err != nil {
				v.Failure = "cannot open a fresh store: " + err.Error()
			} else {
				if err := runScenario(k, clock, s, f.Name, i); err != nil {
					v.Failure = err.Error()
				}
				_ = k.Close()
			}
			report.Verdicts = append(report.Verdicts, v)
		}
	}
	return report
}

func runScenario(k *gak.Kernel, clock *gak.ManualClock, s Scenario, file string, index int) error {
	binds := Binds{}
	for i, step := range s.Steps {
		obj, ok := step.(map[string]any)
		if !ok {
			return fmt.Errorf("step %d (%s: $[%d].steps[%d]): expected an object", i, file, index, i)
		}
		if err := runStep(context.Background(), k, clock, obj, binds); err != nil {
			return fmt.Errorf("step %d (%s: $[%d].steps[%d]): %v", i, file, index, i, err)
		}
	}
	return nil
}

func ms(v any) (uint64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	u, err := strconv.ParseUint(string(n), 10, 64)
	return u, err == nil
}

// runStep runs one clock / advance / call step. Without a manual clock (a
// host-protocol case on the system clock) clock steps are malformed.
func runStep(ctx context.Context, k *gak.Kernel, clock *gak.ManualClock, step map[string]any, binds Binds) error {
	var kinds []string
	for _, kind := range []string{"clock", "advance", "call"} {
		if _, ok := step[kind]; ok {
			kinds = append(kinds, kind)
		}
	}
	if len(kinds) != 1 {
		return fmt.Errorf("needs exactly one of clock / advance / call")
	}
	if kinds[0] != "call" && clock == nil {
		return fmt.Errorf("this case runs on the system clock")
	}
	switch kinds[0] {
	case "clock":
		to, ok := ms(step["clock"])
		if !ok {
			return fmt.Errorf("clock: expected ms")
		}
		if err := clock.Set(to); err != nil {
			return fmt.Errorf("%v", err)
		}
		return nil
	case "advance":
		by, ok := ms(step["advance"])
		if !ok {
			return fmt.Errorf("advance: expected ms")
		}
		clock.AdvanceMs(by)
		return nil
	}
	return callStep(ctx, k, step, binds)
}

func callStep(ctx context.Context, k *gak.Kernel, step map[string]any, binds Binds) error {
	name, ok := step["call"].(string)
	if !ok {
		return fmt.Errorf("call: expected a name")
	}
	args, err := substitute(step["args"], binds)
	if err != nil {
		return err
	}
	wantOk, hasOk := step["ok"]
	wantErr, hasErr := step["err"]
	if hasOk == hasErr {
		return fmt.Errorf("%s: needs exactly one of ok / err", name)
	}
	if hasErr {
		code, isStr := wantErr.(string)
		if !isStr {
			return fmt.Errorf("err: expected a variant name")
		}
		if !errorNames[code] {
			return fmt.Errorf("%s: unknown error variant %q", name, code)
		}
	}
	var ex extra
	got, refusal, err := dispatch(ctx, k, name, args, &ex)
	if err != nil {
		return err
	}
	if want, ok := step["inner"]; ok {
		inner := "<no inner call>"
		if ex.inner != nil {
			inner = *ex.inner
		}
		if want != any(inner) {
			return fmt.Errorf("%s: expected the inner call to answer %s, got %s", name, show(want), inner)
		}
	}
	switch {
	case hasOk && refusal == nil:
		m, err := matches(wantOk, got, true, binds)
		if err != nil {
			return err
		}
		if !m {
			return fmt.Errorf("%s: expected ok %s, got ok %s", name, show(wantOk), show(got))
		}
	case hasOk:
		return fmt.Errorf("%s: expected ok %s, got err %s (%v)", name, show(wantOk), gak.Code(refusal), refusal)
	case refusal == nil:
		return fmt.Errorf("%s: expected err %s, got ok %s", name, show(wantErr), show(got))
	default:
		if code := gak.Code(refusal); code != wantErr {
			return fmt.Errorf("%s: expected err %s, got err %s (%v)", name, show(wantErr), code, refusal)
		}
	}
	if bind, ok := step["bind"]; ok && refusal == nil {
		m, isObj := bind.(map[string]any)
		if !isObj {
			return fmt.Errorf("bind: expected an object")
		}
		names := make([]string, 0, len(m))
		for as := range m {
			names = append(names, as)
		}
		sort.Strings(names)
		for _, as := range names {
			if reserved[as] {
				return fmt.Errorf("bind: %q is reserved", as)
			}
			path, isStr := m[as].(string)
			if !isStr {
				return fmt.Errorf("bind: paths are strings")
			}
			v, found := lookup(got, path)
			if !found {
				return fmt.Errorf("bind: no %q in %s", path, show(got))
			}
			binds[as] = v
		}
	}
	return nil
}

// LoadPaths reads vector files from paths (files, or directories of
// *.json). An unreadable file becomes text that does not parse: a failure
// naming it, never a skip.
func LoadPaths(paths []string) []File {
	var files []File
	for _, p := range paths {
		info, err := os.Stat(p)
		if err == nil && info.IsDir() {
			entries, _ := filepath.Glob(filepath.Join(p, "*.json"))
			sort.Strings(entries)
			for _, e := range entries {
				files = append(files, readOne(e, e))
			}
			continue
		}
		files = append(files, readOne(p, p))
	}
	return files
}

func readOne(name, path string) File {
	text, err := os.ReadFile(path)
	if err != nil {
		text = []byte("<unreadable: " + err.Error() + ">")
	}
	return File{Name: name, Text: text}
}

// Repo is the gak repository this package sits in (for the built-in
// vectors and the host-protocol cases): the source tree it was built from,
// else the nearest parent of the working directory with tests/vectors.
func Repo() (string, error) {
	var candidates []string
	if _, file, _, ok := runtime.Caller(0); ok {
		candidates = append(candidates, filepath.Join(filepath.Dir(file), "..", "..", "..", ".."))
	}
	if wd, err := os.Getwd(); err == nil {
		for dir := wd; ; dir = filepath.Dir(dir) {
			candidates = append(candidates, dir)
			if filepath.Dir(dir) == dir {
				break
			}
		}
	}
	for _, c := range candidates {
		if info, err := os.Stat(filepath.Join(c, "tests", "vectors")); err == nil && info.IsDir() {
			return filepath.Clean(c), nil
		}
	}
	return "", fmt.Errorf("cannot find the built-in vectors (tests/vectors of the gak repository); pass FILE_OR_DIR")
}

// Builtin is the repository's tests/vectors, named builtin:FILE.
func Builtin() ([]File, error) {
	repo, err := Repo()
	if err != nil {
		return nil, err
	}
	files := LoadPaths([]string{filepath.Join(repo, "tests", "vectors")})
	for i := range files {
		files[i].Name = "builtin:" + filepath.Base(files[i].Name)
	}
	return files, nil
}
