package main

// The Go side of the cross-language worker protocol (v1, host/HOSTS.md
// "Worker protocol (v1)"): claims, effects, a fenced ledger, one JSON
// object per line on stdout; any unexpected error exits non-zero with the
// error on stderr. The audit is in tests/src/xlang.rs.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	gak "github.com/gak-kernel/gak/host/go"
	"github.com/gak-kernel/gak/host/go/internal/secret"
)

const (
	lease    = 60 * time.Second
	maxTries = 2000
)

type workerArgs struct {
	store, worker, barrier                          string
	index, tasks, rounds, keys, sinkRounds, parties uint64
	holdMs                                          uint64
}

type out struct {
	worker string
	w      *bufio.Writer
}

func (o *out) emit(event string, fields map[string]any) error {
	line := map[string]any{"t": time.Now().UnixMilli(), "worker": o.worker, "lang": "go", "event": event}
	for k, v := range fields {
		line[k] = v
	}
	b, err := json.Marshal(line)
	if err != nil {
		return err
	}
	if _, err := o.w.Write(append(b, '\n')); err != nil {
		return err
	}
	return o.w.Flush()
}

func parseWorker(args []string) (workerArgs, error) {
	var a workerArgs
	fs := flag.NewFlagSet("xworker", flag.ContinueOnError)
	fs.StringVar(&a.store, "store", "", "store URL")
	fs.StringVar(&a.worker, "worker", "", "worker name")
	fs.StringVar(&a.barrier, "barrier", "", "barrier folder")
	fs.Uint64Var(&a.index, "index", 0, "worker index")
	fs.Uint64Var(&a.tasks, "tasks", 0, "tasks")
	fs.Uint64Var(&a.rounds, "rounds", 0, "claim rounds")
	fs.Uint64Var(&a.keys, "keys", 0, "effect keys")
	fs.Uint64Var(&a.sinkRounds, "sink-rounds", 0, "ledger writes")
	fs.Uint64Var(&a.parties, "parties", 0, "barrier parties")
	fs.Uint64Var(&a.holdMs, "hold-ms", 0, "ms between an effect's body and its complete")
	if err := fs.Parse(args); err != nil {
		return a, err
	}
	seen := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { seen[f.Name] = true })
	for _, required := range []string{"store", "worker", "index", "tasks", "rounds", "keys", "sink-rounds"} {
		if !seen[required] {
			return a, fmt.Errorf("--%s is required", required)
		}
	}
	if seen["barrier"] != seen["parties"] {
		return a, errors.New("--barrier and --parties go together")
	}
	return a, nil
}

// barrier says "at phase" with a file PHASE-N in the barrier folder, then
// waits until every party has (protocol step 0).
func barrier(dir, phase string, index, parties uint64) error {
	if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s-%d", phase, index)), nil, 0o644); err != nil {
		return err
	}
	deadline := time.Now().Add(120 * time.Second)
	for {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		ready := uint64(0)
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), phase+"-") {
				ready++
			}
		}
		if ready >= parties {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("barrier %s: %d of %d parties there after 120 s", phase, ready, parties)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func claims(ctx context.Context, k *gak.Kernel, a workerArgs, o *out) error {
	board := k.Taskboard()
	for r := uint64(0); r < a.rounds; r++ {
		task := fmt.Sprintf("t%d", r%a.tasks)
		t, err := board.Claim(ctx, task, a.worker, lease)
		switch {
		case err == nil:
			if err := o.emit("win", map[string]any{"task": task, "fence": t.Fence}); err != nil {
				return err
			}
			if err := board.Release(ctx, task, t.Token); err != nil {
				return fmt.Errorf("release %s: %v", task, err)
			}
		case gak.Code(err) == gak.CodeTaken:
			if err := o.emit("taken", map[string]any{"task": task}); err != nil {
				return err
			}
		default:
			return fmt.Errorf("claim %s: %v", task, err)
		}
	}
	return nil
}

func effects(ctx context.Context, k *gak.Kernel, a workerArgs, o *out) error {
	gate := k.Sideeffect()
	for i := uint64(0); i < a.keys; i++ {
		key := fmt.Sprintf("key-%d", i)
		action := gak.NewAction(key, fmt.Sprintf("res-%d", i))
		done := false
		for attempt := 0; attempt < maxTries && !done; attempt++ {
			acquired, err := gate.Acquire(ctx, action, lease)
			if err != nil {
				return fmt.Errorf("acquire %s: %v", key, err)
			}
			switch acquired.Kind {
			case gak.Granted:
				l := acquired.Lease
				err := gate.WriteFenced(ctx, action.Resource, l.Fence, func(_ context.Context, down *gak.Downstream) error {
					return down.Put("effect/"+key, a.worker)
				})
				if err != nil {
					return fmt.Errorf("sink for %s: %v", key, err)
				}
				if err := o.emit("body", map[string]any{"key": key, "fence": l.Fence}); err != nil {
					return err
				}
				time.Sleep(time.Duration(a.holdMs) * time.Millisecond)
				if _, err := gate.Complete(ctx, action, l, []byte(a.worker)); err != nil {
					return fmt.Errorf("complete %s: %v", key, err)
				}
				done = true
			case gak.Replayed:
				if err := o.emit("replayed", map[string]any{"key": key}); err != nil {
					return err
				}
				done = true
			case gak.InFlight, gak.Contended:
				if err := o.emit(string(acquired.Kind), map[string]any{"key": key}); err != nil {
					return err
				}
				time.Sleep(time.Duration(1+attempt%5) * time.Millisecond)
			case gak.Uncertain:
				return fmt.Errorf("%s: uncertain (%s)", key, acquired.Reason)
			default:
				return fmt.Errorf("%s: unexpected %s", key, acquired.Kind)
			}
		}
		if !done {
			return fmt.Errorf("%s: still busy after %d tries", key, maxTries)
		}
	}
	return nil
}

func ledger(ctx context.Context, k *gak.Kernel, a workerArgs, o *out) error {
	gate := k.Sideeffect()
	for s := uint64(0); s < a.sinkRounds; s++ {
		fence := s*16 + a.index + 1
		err := gate.WriteFenced(ctx, "ledger", fence, func(_ context.Context, down *gak.Downstream) error {
			count := uint64(0)
			if text, ok, err := down.Get("ledger/count"); err != nil {
				return err
			} else if ok {
				if count, err = strconv.ParseUint(text, 10, 64); err != nil {
					return fmt.Errorf("ledger/count: %v", err)
				}
			}
			if err := down.Put("ledger/count", strconv.FormatUint(count+1, 10)); err != nil {
				return err
			}
			row, err := json.Marshal(map[string]any{"worker": a.worker, "fence": fence})
			if err != nil {
				return err
			}
			return down.Put(fmt.Sprintf("ledger/%08d", count+1), string(row))
		})
		switch {
		case err == nil:
			if err := o.emit("sink-ok", map[string]any{"fence": fence}); err != nil {
				return err
			}
		case gak.Code(err) == gak.CodeFenceStale:
			if err := o.emit("sink-stale", map[string]any{"fence": fence}); err != nil {
				return err
			}
		default:
			return fmt.Errorf("ledger write %d: %v", fence, err)
		}
	}
	return nil
}

func xworker(args []string) int {
	a, err := parseWorker(args)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if err := work(a); err != nil {
		fmt.Fprintln(os.Stderr, "xworker:", err)
		return 1
	}
	return 0
}

func work(a workerArgs) error {
	ctx := context.Background()
	k, err := gak.Open(a.store)
	if err != nil {
		return fmt.Errorf("opening %s: %v", secret.Redact(a.store), err)
	}
	defer k.Close()
	line := func(phase string) error {
		if a.barrier == "" {
			return nil
		}
		return barrier(a.barrier, phase, a.index, a.parties)
	}
	// Compiled and instantiated before the start line.
	if _, err := k.Taskboard().Get(ctx, "t0"); err != nil {
		return err
	}
	if err := line("ready"); err != nil {
		return err
	}
	o := &out{worker: a.worker, w: bufio.NewWriter(os.Stdout)}
	if err := claims(ctx, k, a, o); err != nil {
		return err
	}
	if err := line("effects"); err != nil {
		return err
	}
	if err := effects(ctx, k, a, o); err != nil {
		return err
	}
	if err := line("sink"); err != nil {
		return err
	}
	return ledger(ctx, k, a, o)
}
