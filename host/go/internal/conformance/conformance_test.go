package conformance

import (
	"os"
	"path/filepath"
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
				err := stores.RunCase(c, store)
				if skip, ok := err.(*ErrSkipped); ok {
					if skip.Why != ScriptedSkip && store != "postgres" {
						t.Errorf("%s [%s] skipped: %s", c.Name, store, skip.Why)
					}
					continue
				}
				if err != nil {
					t.Errorf("%s [%s]: %v", c.Name, store, err)
				}
				ran++
			}
		}
	}
	if ran < 15 {
		t.Fatalf("only %d cases ran", ran)
	}
}
