package conformance

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// CLIPasswords is how many passwords (each in every template) the CLI
// replay gives the tool: a process per URL and subcommand.
const CLIPasswords = 8

// ReplayPasswordsCLI gives the first CLIPasswords passwords, in every
// template, to every subcommand of the gak tool at cli that takes a store
// URL — conformance --store and xworker --store, which must fail, and
// host-protocol --postgres (skipped outside CI when it cannot connect) —
// and checks that nothing it prints (stdout and stderr) holds a marker.
func ReplayPasswordsCLI(f *Fuzz, cli, scratch string) FuzzResult {
	r := FuzzResult{Name: "passwords.json [cli]"}
	vector := filepath.Join(scratch, "fuzz-cli-vector.json")
	cases := filepath.Join(scratch, "fuzz-cli-case.json")
	err := os.WriteFile(vector, []byte(`[{"scenario": "one", "steps": [{"call": "taskboard.get", "args": {"id": "a"}, "err": "not-found"}]}]`), 0o644)
	if err == nil {
		err = os.WriteFile(cases, []byte(`[{"case": "one", "rule": 12, "stores": ["postgres"], "steps": [{"call": "sideeffect.sink-seen", "args": {"resource": "r"}, "ok": 0}]}]`), 0o644)
	}
	if err != nil {
		r.Failures = append(r.Failures, err.Error())
		return r
	}
	for i, c := range f.Passwords {
		if i == CLIPasswords {
			break
		}
		r.Cases++
		if why := passwordCLICase(cli, vector, cases, f.Templates, c); why != "" {
			r.fail(i, "%s", why)
		}
	}
	return r
}

func passwordCLICase(cli, vector, cases string, templates []string, c PasswordCase) string {
	for t, template := range templates {
		url := strings.ReplaceAll(template, "{password}", c.Password)
		for _, run := range []struct {
			args     []string
			mustFail bool
		}{
			{[]string{"conformance", "--store", url, vector}, true},
			{[]string{"xworker", "--store", url, "--worker", "w", "--index", "0", "--tasks", "1", "--rounds", "1", "--keys", "1", "--sink-rounds", "1"}, true},
			{[]string{"host-protocol", "--postgres", url, cases}, false},
		} {
			out, err := exec.Command(cli, run.args...).CombinedOutput()
			if _, exited := err.(*exec.ExitError); err != nil && !exited {
				return fmt.Sprintf("cannot run %s: %v", cli, err)
			}
			if run.mustFail && err == nil {
				return fmt.Sprintf("template %d: gak %s succeeded", t, run.args[0])
			}
			if m := shows(string(out), c.Markers); m != "" {
				return fmt.Sprintf("template %d: gak %s printed the password: %s", t, run.args[0], masked(string(out), c.Markers))
			}
		}
	}
	return ""
}
