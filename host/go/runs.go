package gak

/*
#include "gak.h"
*/
import "C"

import (
	"context"
	"sort"
	"unsafe"
)

// Checkpoint is a run's snapshots and resume plan (SPEC 3).
type Checkpoint struct{ k *Kernel }

// Commitgate is a run's and its steps' terminal outcomes (SPEC 4).
type Commitgate struct{ k *Kernel }

// Retention is bounded pruning of finished records (SPEC 9).
type Retention struct{ k *Kernel }

// cSnapshot builds s in C memory.
func (a *arena) snapshot(s *Snapshot) *C.gak_snapshot {
	c := (*C.gak_snapshot)(a.alloc(int(unsafe.Sizeof(C.gak_snapshot{}))))
	c.run_id = a.str(s.RunID)
	c.seq = C.uint64_t(s.Seq)
	if s.Fence != nil {
		c.has_fence = true
		c.fence = C.uint64_t(*s.Fence)
	}
	c.status = a.str(s.Status)
	c.done, c.done_len = a.strs(s.Done)
	if len(s.Fields) > 0 {
		keys := make([]string, 0, len(s.Fields))
		for key := range s.Fields {
			keys = append(keys, key)
		}
		sort.Strings(keys)
		c.fields = (*C.gak_field)(a.alloc(len(keys) * int(unsafe.Sizeof(C.gak_field{}))))
		c.fields_len = C.size_t(len(keys))
		fields := unsafe.Slice(c.fields, len(keys))
		for i, key := range keys {
			fields[i].key = a.present(key)
			fields[i].value = a.present(s.Fields[key])
		}
	}
	return c
}

func goSnapshot(c *C.gak_snapshot) Snapshot {
	s := Snapshot{
		RunID:  goStr(c.run_id),
		Seq:    uint64(c.seq),
		Fence:  goOpt(c.has_fence, c.fence),
		Status: goStr(c.status),
		Done:   goStrs(c.done, c.done_len),
		Fields: map[string]string{},
	}
	if c.fields_len > 0 {
		for _, f := range unsafe.Slice(c.fields, int(c.fields_len)) {
			s.Fields[goStr(f.key)] = goStr(f.value)
		}
	}
	return s
}

// SaveIfNewer saves snap only if it is newer: refused CodeInvalidInput,
// CodeTerminal (the run committed its outcome), CodeFenceStale (a newer
// owner saved), CodeStaleSeq (not above the stored seq), in that order.
func (c Checkpoint) SaveIfNewer(ctx context.Context, snap Snapshot) error {
	k, err := c.k.enter(ctx)
	if err != nil {
		return err
	}
	defer c.k.leave()
	if err := (&scale{}).snapshot(&snap); err != nil {
		return err
	}
	var a arena
	defer a.free()
	return check(C.gak_checkpoint_save_if_newer(k, a.snapshot(&snap)))
}

// Load is the persisted snapshot of the run, or CodeNotFound.
func (c Checkpoint) Load(ctx context.Context, runID string) (Snapshot, error) {
	k, err := c.k.enter(ctx)
	if err != nil {
		return Snapshot{}, err
	}
	defer c.k.leave()
	var out C.gak_snapshot
	if err := check(C.gak_checkpoint_load(k, str(runID), &out)); err != nil {
		return Snapshot{}, err
	}
	defer C.gak_snapshot_clear(&out)
	return goSnapshot(&out), nil
}

// BuildPlan validates the DAG and plans a resume from snap (nil: nothing
// done): only the trusted completion set is skipped. Refused
// CodeInvalidPlan naming the culprit. It touches no store.
func (c Checkpoint) BuildPlan(ctx context.Context, steps []StepDef, snap *Snapshot) (Plan, error) {
	k, err := c.k.enter(ctx)
	if err != nil {
		return Plan{}, err
	}
	defer c.k.leave()
	plan := &scale{totalOnly: true}
	if err := plan.steps(steps); err != nil {
		return Plan{}, err
	}
	if snap != nil {
		if err := plan.snapshot(snap); err != nil {
			return Plan{}, err
		}
	}
	var a arena
	defer a.free()
	var defs *C.gak_step_def
	if len(steps) > 0 {
		defs = (*C.gak_step_def)(a.alloc(len(steps) * int(unsafe.Sizeof(C.gak_step_def{}))))
		items := unsafe.Slice(defs, len(steps))
		for i, s := range steps {
			items[i].id = a.str(s.ID)
			items[i].depends_on, items[i].depends_on_len = a.strs(s.DependsOn)
		}
	}
	var from *C.gak_snapshot
	if snap != nil {
		from = a.snapshot(snap)
	}
	var out C.gak_plan
	if err := check(C.gak_checkpoint_build_plan(k, defs, C.size_t(len(steps)), from, &out)); err != nil {
		return Plan{}, err
	}
	defer C.gak_plan_clear(&out)
	return Plan{
		Skip:      goStrs(out.skip, out.skip_len),
		Run:       goStrs(out.run, out.run_len),
		Untrusted: goStrs(out.untrusted, out.untrusted_len),
	}, nil
}

func statusNumber(s Status) (C.gak_status, error) {
	switch s {
	case Succeeded:
		return C.GAK_STATUS_SUCCEEDED, nil
	case Failed:
		return C.GAK_STATUS_FAILED, nil
	}
	return 0, refused(CodeInvalidInput, "unknown status "+quote(string(s)))
}

func goOutcome(o *C.gak_outcome) Outcome {
	status := Succeeded
	if o.status == C.GAK_STATUS_FAILED {
		status = Failed
	}
	result := goBytes(o.result)
	if result == nil {
		result = []byte{}
	}
	return Outcome{Status: status, Result: result}
}

func (g Commitgate) commit(ctx context.Context, runID string, step C.gak_str, fence uint64, o Outcome) (Outcome, error) {
	k, err := g.k.enter(ctx)
	if err != nil {
		return Outcome{}, err
	}
	defer g.k.leave()
	status, err := statusNumber(o.Status)
	if err != nil {
		return Outcome{}, err
	}
	var out C.gak_outcome
	in := C.gak_outcome{status: status, result: bytes(o.Result)}
	if err := check(C.gak_commitgate_commit(k, str(runID), step, C.uint64_t(fence), in, &out)); err != nil {
		return Outcome{}, err
	}
	defer C.gak_outcome_clear(&out)
	return goOutcome(&out), nil
}

// Commit commits the run's terminal outcome by the owner holding fence;
// the first accepted outcome wins and is returned. Refused
// CodeFenceStale, CodeAlreadyCommitted. From then on every save of the
// run is CodeTerminal.
func (g Commitgate) Commit(ctx context.Context, runID string, fence uint64, o Outcome) (Outcome, error) {
	return g.commit(ctx, runID, C.gak_str{}, fence, o)
}

// CommitStep commits the terminal outcome of one step of the run.
func (g Commitgate) CommitStep(ctx context.Context, runID, step string, fence uint64, o Outcome) (Outcome, error) {
	return g.commit(ctx, runID, present(step), fence, o)
}

func (g Commitgate) read(ctx context.Context, runID string, step C.gak_str) (Outcome, error) {
	k, err := g.k.enter(ctx)
	if err != nil {
		return Outcome{}, err
	}
	defer g.k.leave()
	var out C.gak_outcome
	if err := check(C.gak_commitgate_read(k, str(runID), step, &out)); err != nil {
		return Outcome{}, err
	}
	defer C.gak_outcome_clear(&out)
	return goOutcome(&out), nil
}

// Read is the run's recorded outcome, or CodeNotFound.
func (g Commitgate) Read(ctx context.Context, runID string) (Outcome, error) {
	return g.read(ctx, runID, C.gak_str{})
}

// ReadStep is the step's recorded outcome, or CodeNotFound.
func (g Commitgate) ReadStep(ctx context.Context, runID, step string) (Outcome, error) {
	return g.read(ctx, runID, present(step))
}

func (r Retention) prune(ctx context.Context, before uint64, limit int, dry bool) (Pruned, error) {
	k, err := r.k.enter(ctx)
	if err != nil {
		return Pruned{}, err
	}
	defer r.k.leave()
	l, err := limit32(limit)
	if err != nil {
		return Pruned{}, err
	}
	var out C.gak_pruned
	var e *C.gak_error
	if dry {
		e = C.gak_retention_prune_dry_run(k, C.uint64_t(before), l, &out)
	} else {
		e = C.gak_retention_prune(k, C.uint64_t(before), l, &out)
	}
	if err := check(e); err != nil {
		return Pruned{}, err
	}
	return Pruned{
		RemovedKeys:  uint32(out.removed_keys),
		RemovedTasks: uint32(out.removed_tasks),
		RemovedRuns:  uint32(out.removed_runs),
		More:         bool(out.more),
	}, nil
}

// Prune removes at most limit (1–1000) records finished before before
// (ms), oldest first. A pruned key runs again as new; fences never go
// backwards.
func (r Retention) Prune(ctx context.Context, before uint64, limit int) (Pruned, error) {
	return r.prune(ctx, before, limit, false)
}

// PruneDryRun is what Prune would remove now, removing nothing.
func (r Retention) PruneDryRun(ctx context.Context, before uint64, limit int) (Pruned, error) {
	return r.prune(ctx, before, limit, true)
}
