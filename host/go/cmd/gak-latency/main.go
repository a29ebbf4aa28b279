// Command gak-latency is the per-operation latency of the Go package on
// each binding: the Go column of host/latency.py (the same calls as
// examples/latency.rs).
//
//	CGO_LDFLAGS=-L../../target/release go run ./cmd/gak-latency [N]
//
// PostgreSQL is measured when GAK_PG_DSN (default the local server)
// answers.
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	gak "github.com/gak-kernel/gak/host/go"
)

var ctx = context.Background()

func report(label string, per time.Duration) {
	fmt.Printf("%-44s %9.1f µs/op %9.0f ops/s\n", label, float64(per.Nanoseconds())/1e3, 1/per.Seconds())
}

func measure(label string, n int, op func(i int) error) error {
	for i := 0; i < n/10; i++ {
		if err := op(i); err != nil { // warm-up
			return err
		}
	}
	start := time.Now()
	for i := n / 10; i < n/10+n; i++ {
		if err := op(i); err != nil {
			return err
		}
	}
	report(label, time.Since(start)/time.Duration(n))
	return nil
}

func seed(k *gak.Kernel, prefix string, n int) error {
	seeds := make([]gak.TaskSeed, 0, 10000)
	for i := 0; i < n; i++ {
		seeds = append(seeds, gak.TaskSeed{ID: fmt.Sprintf("%st%d", prefix, i)})
		if len(seeds) == 10000 || i == n-1 {
			if err := k.Taskboard().Seed(ctx, seeds); err != nil {
				return err
			}
			seeds = seeds[:0]
		}
	}
	return nil
}

func run(url string, n int) error {
	k, err := gak.Open(url)
	if err != nil {
		return err
	}
	defer k.Close()
	fmt.Printf("-- %s\n", url)
	if err := seed(k, "", n+n/10); err != nil {
		return err
	}
	board, gate := k.Taskboard(), k.Sideeffect()
	if err := measure("taskboard.claim (fresh task)", n, func(i int) error {
		_, err := board.Claim(ctx, "t"+strconv.Itoa(i), "w", time.Minute)
		return err
	}); err != nil {
		return err
	}
	if err := measure("sideeffect.acquire (fresh key)", n, func(i int) error {
		_, err := gate.Acquire(ctx, gak.NewAction("k"+strconv.Itoa(i), "r"+strconv.Itoa(i)), time.Minute)
		return err
	}); err != nil {
		return err
	}
	done := gak.NewAction("done-key", "r-done")
	if err := measure("sideeffect.acquire (replayed key)", n, func(int) error {
		a, err := gate.Acquire(ctx, done, time.Minute)
		if err == nil && a.Kind == gak.Granted {
			_, err = gate.Complete(ctx, done, a.Lease, []byte("ok"))
		}
		return err
	}); err != nil {
		return err
	}
	steps := []gak.StepDef{{ID: "a"}, {ID: "b", DependsOn: []string{"a"}}, {ID: "c", DependsOn: []string{"b"}}}
	return measure("checkpoint.build-plan (3 steps, pure)", n, func(int) error {
		_, err := k.Checkpoint().BuildPlan(ctx, steps, nil)
		return err
	})
}

func main() {
	n := 5000
	if len(os.Args) > 1 {
		var err error
		if n, err = strconv.Atoi(os.Args[1]); err != nil || n < 10 {
			fmt.Fprintln(os.Stderr, "usage: gak-latency [N]")
			os.Exit(2)
		}
	}
	if err := all(n); err != nil {
		fmt.Fprintln(os.Stderr, "gak-latency:", err)
		os.Exit(1)
	}
}

func all(n int) error {
	dir, err := os.MkdirTemp("", "gak-latency-go-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	for _, url := range []string{
		"memory:",
		"sqlite:" + filepath.Join(dir, "full.db"),
		"sqlite:" + filepath.Join(dir, "normal.db") + "?synchronous=normal",
	} {
		if err := run(url, n); err != nil {
			return err
		}
	}
	dsn := os.Getenv("GAK_PG_DSN")
	if dsn == "" {
		dsn = "postgres://postgres@127.0.0.1:5432/test"
	}
	url := fmt.Sprintf("%s?schema=gak_latency_go_%d&sslmode=disable", dsn, os.Getpid())
	probeKernel, err := gak.Open(url)
	if err != nil {
		fmt.Printf("-- postgres: not reachable, skipped (%v)\n", err)
		return nil
	}
	_ = probeKernel.Close()
	defer func() { _ = gak.DropPostgresSchema(url) }()
	return run(url, n/5)
}
