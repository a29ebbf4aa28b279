// Command gak is the Go host's tool: the conformance runner, the
// host-protocol replay and the cross-language worker.
//
//	go run ./cmd/gak conformance [--component F] [--store URL] [FILE_OR_DIR…]
//	go run ./cmd/gak host-protocol [--postgres DSN] [--fuzz DIR] [FILE…]
//	go run ./cmd/gak xworker --store URL --worker NAME --index N --tasks T --rounds R --keys K --sink-rounds S [--barrier DIR --parties P] [--hold-ms H]
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	gak "github.com/gak-kernel/gak/host/go"
	"github.com/gak-kernel/gak/host/go/internal/conformance"
)

const usage = `usage: gak conformance [--component FILE] [--store URL] [FILE_OR_DIR...]
       gak host-protocol [--postgres DSN] [--fuzz DIR] [FILE...]
       gak xworker --store URL --worker NAME --index N --tasks T --rounds R --keys K --sink-rounds S [--barrier DIR --parties P] [--hold-ms H]
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	switch os.Args[1] {
	case "conformance":
		os.Exit(conformanceCmd(os.Args[2:]))
	case "host-protocol":
		os.Exit(hostProtocolCmd(os.Args[2:]))
	case "xworker":
		os.Exit(xworker(os.Args[2:]))
	}
	fmt.Fprint(os.Stderr, usage)
	os.Exit(2)
}

// checkComponent: this host runs the component libgak embeds; a named
// file must be that component (a missing one is an error, never a
// fall-through).
func checkComponent(path string) error {
	if path == "" {
		return nil
	}
	named, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("--component %s: %v", path, err)
	}
	if !bytes.Equal(named, gak.Component()) {
		return fmt.Errorf("--component %s is not the component this libgak embeds (libgak %s runs the gak.wasm it was built with; rebuild it with cargo build -p gak-c to run another)", path, gak.Version())
	}
	return nil
}

func conformanceCmd(args []string) int {
	fs := flag.NewFlagSet("conformance", flag.ContinueOnError)
	store := fs.String("store", "memory:", "store URL: memory:, sqlite:PATH, postgres://…")
	component := fs.String("component", "", "the component file (must be the one libgak embeds)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if err := checkComponent(*component); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	target, err := conformance.NewURLTarget(*store)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	var files []conformance.File
	if fs.NArg() == 0 {
		if files, err = conformance.Builtin(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
	} else {
		files = conformance.LoadPaths(fs.Args())
	}
	report := conformance.Run(target, files)
	fmt.Print(report.Render())
	if report.Failed() > 0 {
		return 1
	}
	return 0
}

func hostProtocolCmd(args []string) int {
	fs := flag.NewFlagSet("host-protocol", flag.ContinueOnError)
	postgres := fs.String("postgres", "", "a PostgreSQL DSN for the cases that run there")
	fuzzDir := fs.String("fuzz", "", "the fuzzers' cases (default: $GAK_HOST_FUZZ_DIR, else tests/host-protocol/fuzz); replayed when no FILE is given")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	var files []conformance.File
	var err error
	if fs.NArg() == 0 {
		if files, err = conformance.ProtocolFiles(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
	} else {
		files = conformance.LoadPaths(fs.Args())
	}
	scratch, err := os.MkdirTemp("", "gak-go-hp-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer os.RemoveAll(scratch)
	stores := &conformance.Stores{Scratch: scratch, Postgres: *postgres}
	passed, failed, skipped := 0, 0, 0
	for _, f := range files {
		cases, err := conformance.ParseCases(f.Text)
		if err != nil {
			fmt.Printf("FAIL %s: cannot parse: %v\n", f.Name, err)
			failed++
			continue
		}
		for _, c := range cases {
			where := c.Stores
			if c.URL != "" {
				where = []string{"open"}
			}
			for _, store := range where {
				name := fmt.Sprintf("%s :: %s [%s]", filepath.Base(f.Name), c.Name, store)
				err := stores.RunCase(c, store)
				var skip *conformance.ErrSkipped
				switch {
				case err == nil:
					fmt.Printf("ok   %s\n", name)
					passed++
				case asSkip(err, &skip):
					fmt.Printf("SKIP %s: %s\n", name, skip.Why)
					skipped++
				default:
					fmt.Printf("FAIL %s: %v\n", name, err)
					failed++
				}
			}
		}
	}
	if fs.NArg() == 0 || *fuzzDir != "" {
		p, f, s := fuzzReplays(stores, *fuzzDir, scratch)
		passed, failed, skipped = passed+p, failed+f, skipped+s
	}
	fmt.Printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped)
	if failed > 0 {
		return 1
	}
	return 0
}

// fuzzReplays replays the fuzzers' cases (tests/host-protocol/README.md,
// "Fuzzers"), a line per file and store, a line per failed case; every
// case counts as one passed, failed or skipped.
func fuzzReplays(stores *conformance.Stores, dir, scratch string) (passed, failed, skipped int) {
	if dir == "" {
		var err error
		if dir, err = conformance.FuzzDir(); err != nil {
			fmt.Printf("FAIL fuzz: %v\n", err)
			return 0, 1, 0
		}
	}
	f, err := conformance.LoadFuzz(dir)
	if err != nil {
		fmt.Printf("FAIL fuzz: %v\n", err)
		return 0, 1, 0
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Printf("FAIL fuzz: cannot find this tool to run it: %v\n", err)
		return 0, 1, 0
	}
	results := []conformance.FuzzResult{
		stores.ReplaySQL(f, "sqlite"),
		stores.ReplaySQL(f, "postgres"),
		conformance.ReplayPasswords(f),
		conformance.ReplayPasswordsCLI(f, self, scratch),
		stores.ReplayRetries(f, "write-fenced"),
		stores.ReplayRetries(f, "with-downstream"),
		{Name: "retries.json [scripted]", Skipped: conformance.ScriptedSkip},
	}
	for _, r := range results {
		switch {
		case r.Skipped != "":
			fmt.Printf("SKIP fuzz/%s: %s\n", r.Name, r.Skipped)
			skipped++
		case len(r.Failures) == 0:
			fmt.Printf("ok   fuzz/%s: %d cases\n", r.Name, r.Cases)
			passed += r.Cases
		default:
			for _, why := range r.Failures {
				fmt.Printf("FAIL fuzz/%s %s\n", r.Name, why)
			}
			fmt.Printf("FAIL fuzz/%s: %d of %d cases failed\n", r.Name, len(r.Failures), r.Cases)
			failed += len(r.Failures)
			if n := r.Cases - len(r.Failures); n > 0 {
				passed += n
			}
		}
	}
	return passed, failed, skipped
}

func asSkip(err error, skip **conformance.ErrSkipped) bool {
	s, ok := err.(*conformance.ErrSkipped)
	if ok {
		*skip = s
	}
	return ok
}
