package gak

/*
#include "gak.h"
*/
import "C"

import (
	"context"
)

// Checkpoint is a run's snapshots and resume plan (SPEC 3).
type Checkpoint struct{ k *Kernel }

// Commitgate is a run's and its steps' terminal outcomes (SPEC 4).
type Commitgate struct{ k *Kernel }

// Retention is bounded pruning of finished records (SPEC 9).
type Retention struct{ k *Kernel }

// SaveIfNewer saves snap only if it is newer: refused CodeInvalidInput,
// CodeTerminal (the run committed its outcome), CodeFenceStale (a newer
// owner saved), CodeStaleSeq (not above the stored seq), in that order.
func (c Checkpoint) SaveIfNewer(ctx context.Context, snap Snapshot) error {
	if err := (&scale{}).snapshot(&snap); err != nil {
		return err
	}
	var a arena
	defer a.free()
	in, err := a.snapshot(&snap)
	if err != nil {
		return err
	}
	k, err := c.k.enter(ctx)
	if err != nil {
		return err
	}
	defer c.k.leave()
	return check(C.gak_checkpoint_save_if_newer(k, in))
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
	plan := &scale{totalOnly: true}
	if err := plan.stepDefs(steps, "steps"); err != nil {
		return Plan{}, err
	}
	if snap != nil {
		if err := plan.snapshot(snap); err != nil {
			return Plan{}, err
		}
	}
	var a arena
	defer a.free()
	defs, n, err := a.stepDefs(steps)
	if err != nil {
		return Plan{}, err
	}
	var from *C.gak_snapshot
	if snap != nil {
		if from, err = a.snapshot(snap); err != nil {
			return Plan{}, err
		}
	}
	k, err := c.k.enter(ctx)
	if err != nil {
		return Plan{}, err
	}
	defer c.k.leave()
	var out C.gak_plan
	if err := check(C.gak_checkpoint_build_plan(k, defs, n, from, &out)); err != nil {
		return Plan{}, err
	}
	defer C.gak_plan_clear(&out)
	return goPlan(&out), nil
}

func (g Commitgate) commit(ctx context.Context, runID string, step C.gak_str, fence uint64, o Outcome) (Outcome, error) {
	in, err := cOutcome(o)
	if err != nil {
		return Outcome{}, err
	}
	k, err := g.k.enter(ctx)
	if err != nil {
		return Outcome{}, err
	}
	defer g.k.leave()
	var out C.gak_outcome
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
	l, err := limit32(limit)
	if err != nil {
		return Pruned{}, err
	}
	k, err := r.k.enter(ctx)
	if err != nil {
		return Pruned{}, err
	}
	defer r.k.leave()
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
	return goPruned(&out), nil
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
