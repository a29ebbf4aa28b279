// Command gak is the Go host's tool: the conformance runner, the
// host-protocol replay and the cross-language worker.
//
//	go run ./cmd/gak conformance [--component F] [--store URL] [FILE_OR_DIR…]
//	go run ./cmd/gak host-protocol [--postgres DSN] [FILE…]
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
       gak host-protocol [--postgres DSN] [FILE...]
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
	fmt.Printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped)
	if failed > 0 {
		return 1
	}
	return 0
}

func asSkip(err error, skip **conformance.ErrSkipped) bool {
	s, ok := err.(*conformance.ErrSkipped)
	if ok {
		*skip = s
	}
	return ok
}
