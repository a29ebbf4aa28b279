package gak

import (
	"context"
)

// Committer records a run's progress, one snapshot per finished step:
// done ∪ {step} at seq + 1. CodeStaleSeq or CodeFenceStale from StepDone
// means another process owns the run now: stop.
type Committer struct {
	k        *Kernel
	snapshot Snapshot
}

// ResumeCommitter resumes runID from its persisted snapshot, or starts it
// at seq 0 (status "running"), as the owner holding fence (nil: none).
func ResumeCommitter(ctx context.Context, k *Kernel, runID string, fence *uint64) (*Committer, error) {
	snap, err := k.Checkpoint().Load(ctx, runID)
	switch {
	case err == nil:
		if fence != nil {
			snap.Fence = fence
		}
	case Code(err) == CodeNotFound:
		snap = Snapshot{RunID: runID, Fence: fence, Status: "running", Done: []string{}, Fields: map[string]string{}}
	default:
		return nil, err
	}
	return &Committer{k: k, snapshot: snap}, nil
}

// Snapshot is the last snapshot this committer saved or loaded.
func (c *Committer) Snapshot() Snapshot { return c.snapshot }

// StepDone records step finished.
func (c *Committer) StepDone(ctx context.Context, step string) error {
	next := c.snapshot
	next.Seq++
	next.Done = append([]string(nil), c.snapshot.Done...)
	found := false
	for _, d := range next.Done {
		if d == step {
			found = true
		}
	}
	if !found {
		next.Done = append(next.Done, step)
	}
	if err := c.k.Checkpoint().SaveIfNewer(ctx, next); err != nil {
		return err
	}
	c.snapshot = next
	return nil
}
