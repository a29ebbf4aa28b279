package conformance

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func TestTheBuiltinVectorsPassOnMemoryAndSqlite(t *testing.T) {
	files, err := Builtin()
	if err != nil {
		t.Fatal(err)
	}
	for _, store := range []string{"memory:", "sqlite:" + filepath.Join(t.TempDir(), "v.db")} {
		target, err := NewURLTarget(store)
		if err != nil {
			t.Fatal(err)
		}
		report := Run(target, files)
		if report.Failed() > 0 || report.Passed() < 100 {
			t.Fatalf("%s:\n%s", store, report.Render())
		}
	}
}

// The runner must fail a wrong vector, naming the step and the call.
func TestAWrongVectorFails(t *testing.T) {
	wrong := `[{"scenario": "wrong", "steps": [
	  {"call": "taskboard.seed", "args": {"tasks": [{"id": "a"}]}, "ok": null},
	  {"call": "taskboard.claim", "args": {"id": "a", "agent": "w", "ttl": 100}, "ok": {"fence": 2}}
	]}, {"scenario": "unknown-variant", "steps": [
	  {"call": "taskboard.get", "args": {"id": "a"}, "err": "no-such-error"}
	]}, {"scenario": "refusal-expected", "steps": [
	  {"call": "taskboard.seed", "args": {"tasks": [{"id": "a"}]}, "ok": null},
	  {"call": "taskboard.get", "args": {"id": "a"}, "err": "not-found"}
	]}]`
	target, _ := NewURLTarget("memory:")
	report := Run(target, []File{{Name: "wrong.json", Text: []byte(wrong)}, {Name: "broken.json", Text: []byte("{")}})
	out := report.Render()
	if report.Failed() != 4 || !strings.HasSuffix(out, "0 passed, 4 failed\n") {
		t.Fatalf("%s", out)
	}
	if !strings.Contains(out, "step 1 (wrong.json: $[0].steps[1]): taskboard.claim: expected ok") {
		t.Fatalf("the failure does not name its step:\n%s", out)
	}
}

// Every shared case runs here, one subtest per case and store: passed,
// or skipped with its reason (visible under -v). Only the scripted-store
// cases may be skipped, and the PostgreSQL ones when there is no server
// (GAK_PG_DSN unset or unreachable) outside CI; under CI=true an
// unreachable server fails them.
func TestHostProtocolCasesPassOrSayWhyTheyDoNotApply(t *testing.T) {
	files, err := ProtocolFiles()
	if err != nil {
		t.Fatal(err)
	}
	stores := &Stores{Scratch: t.TempDir(), Postgres: os.Getenv("GAK_PG_DSN")}
	ran := 0
	for _, f := range files {
		cases, err := ParseCases(f.Text)
		if err != nil {
			t.Fatalf("%s: %v", f.Name, err)
		}
		for _, c := range cases {
			where := c.Stores
			if c.URL != "" {
				where = []string{"open"}
			}
			for _, store := range where {
				t.Run(fmt.Sprintf("%s/%s/%s", filepath.Base(f.Name), c.Name, store), func(t *testing.T) {
					err := stores.RunCase(c, store)
					if skip, ok := err.(*ErrSkipped); ok {
						if skip.Why != ScriptedSkip && store != "postgres" {
							t.Fatalf("skipped: %s", skip.Why)
						}
						t.Skip(skip.Why)
					}
					if err != nil {
						t.Fatal(err)
					}
					ran++
				})
			}
		}
	}
	if ran < 15 {
		t.Fatalf("only %d cases ran", ran)
	}
}

// An unreachable server skips the PostgreSQL cases with the reason (never
// fails them), except under CI=true, where it fails them.
func TestAnUnreachablePostgresIsSkippedOutsideCI(t *testing.T) {
	c := Case{Name: "pg", Stores: []string{"postgres"}, steps: []any{}}
	for _, ci := range []string{"", "true"} {
		t.Setenv("CI", ci)
		stores := &Stores{Scratch: t.TempDir(), Postgres: "postgres://postgres@127.0.0.1:1/test?connect_timeout=2"}
		err := stores.RunCase(c, "postgres")
		skip, skipped := err.(*ErrSkipped)
		switch {
		case ci == "" && (!skipped || !strings.Contains(skip.Why, "cannot be used")):
			t.Errorf("outside CI: want a skip naming the server, got %v", err)
		case ci == "true" && (err == nil || skipped || !strings.Contains(err.Error(), "CI=true")):
			t.Errorf("under CI=true: want a failure, got %v", err)
		}
	}
	stores := &Stores{Scratch: t.TempDir()}
	if _, skipped := stores.RunCase(c, "postgres").(*ErrSkipped); !skipped {
		t.Error("without a DSN the PostgreSQL cases must be skipped")
	}
}

// The fuzzers' cases (tests/host-protocol/fuzz, or $GAK_HOST_FUZZ_DIR),
// replayed as the README's "Fuzzers" says: a subtest per file and store.
func TestTheFuzzersCasesReplay(t *testing.T) {
	dir, err := FuzzDir()
	if err != nil {
		t.Fatal(err)
	}
	f, err := LoadFuzz(dir)
	if err != nil {
		t.Fatal(err)
	}
	scratch := t.TempDir()
	stores := &Stores{Scratch: scratch, Postgres: os.Getenv("GAK_PG_DSN")}
	replays := []struct {
		name   string
		replay func() FuzzResult
	}{
		{"sql/sqlite", func() FuzzResult { return stores.ReplaySQL(f, "sqlite") }},
		{"sql/postgres", func() FuzzResult { return stores.ReplaySQL(f, "postgres") }},
		{"passwords/open", func() FuzzResult { return ReplayPasswords(f) }},
		{"passwords/cli", func() FuzzResult { return ReplayPasswordsCLI(f, buildCLI(t, scratch), scratch) }},
		{"retries/postgres/write-fenced", func() FuzzResult { return stores.ReplayRetries(f, "write-fenced") }},
		{"retries/postgres/with-downstream", func() FuzzResult { return stores.ReplayRetries(f, "with-downstream") }},
	}
	for _, r := range replays {
		t.Run(r.name, func(t *testing.T) {
			got := r.replay()
			if got.Skipped != "" {
				t.Skip(got.Skipped)
			}
			for i, why := range got.Failures {
				if i == 20 {
					t.Errorf("… and %d more", len(got.Failures)-i)
					break
				}
				t.Error(why)
			}
			if got.Cases == 0 {
				t.Fatal("no case ran")
			}
			t.Logf("%s: %d cases", got.Name, got.Cases)
		})
	}
}

// buildCLI builds the gak tool (cmd/gak) once, with this test's
// environment (CGO_LDFLAGS names libgak).
func buildCLI(t *testing.T, scratch string) string {
	t.Helper()
	repo, err := Repo()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(scratch, "gak")
	build := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", bin, "./cmd/gak")
	build.Dir = filepath.Join(repo, "host", "go")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/gak: %v\n%s", err, out)
	}
	return bin
}
