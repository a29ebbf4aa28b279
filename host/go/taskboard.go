package gak

/*
#include "gak.h"
*/
import "C"

import (
	"context"
	"math"
	"time"
)

// Taskboard is a board of tasks with dependencies, claimed by token
// (SPEC 6, 9).
type Taskboard struct{ k *Kernel }

// Every method converts and checks its arguments, then enters the kernel
// (which may wait for a free connection, bounded by ctx), then calls
// libgak: a refused argument never waits. The conversions (goTask,
// taskStateNumber, a.taskSeeds, …) are generated into abi_gen.go.

func limit32(n int) (C.uint32_t, error) {
	if n < 0 || n > math.MaxUint32 {
		return 0, refused(CodeInvalidInput, "limit out of range")
	}
	return C.uint32_t(n), nil
}

// Seed loads tasks onto the board (idempotent; re-seeding a task
// overwrites its content and clears its lease, keeping its fence).
func (t Taskboard) Seed(ctx context.Context, tasks []TaskSeed) error {
	if err := (&scale{}).taskSeeds(tasks, "tasks"); err != nil {
		return err
	}
	var a arena
	defer a.free()
	seeds, n, err := a.taskSeeds(tasks)
	if err != nil {
		return err
	}
	k, err := t.k.enter(ctx)
	if err != nil {
		return err
	}
	defer t.k.leave()
	return check(C.gak_taskboard_seed(k, seeds, n))
}

// List is one page of the board: tasks of state ("" for all) after the
// id after ("" from the start), at most limit (1–1000). Never a token.
func (t Taskboard) List(ctx context.Context, state TaskState, after string, limit int) (TaskPage, error) {
	n, err := taskStateNumber(state)
	if err != nil {
		return TaskPage{}, err
	}
	l, err := limit32(limit)
	if err != nil {
		return TaskPage{}, err
	}
	k, err := t.k.enter(ctx)
	if err != nil {
		return TaskPage{}, err
	}
	defer t.k.leave()
	var out C.gak_task_page
	if err := check(C.gak_taskboard_list(k, n, str(after), l, &out)); err != nil {
		return TaskPage{}, err
	}
	defer C.gak_task_page_clear(&out)
	return goTaskPage(&out), nil
}

// Get is the task (without its token), or CodeNotFound.
func (t Taskboard) Get(ctx context.Context, id string) (Task, error) {
	k, err := t.k.enter(ctx)
	if err != nil {
		return Task{}, err
	}
	defer t.k.leave()
	var out C.gak_task
	if err := check(C.gak_taskboard_get(k, str(id), &out)); err != nil {
		return Task{}, err
	}
	defer C.gak_task_clear(&out)
	return goTask(&out), nil
}

// Claim claims the task for agent for ttl; the task carries its token.
// Refused CodeNotFound, CodeTerminal, CodeDepsPending, CodeTaken.
func (t Taskboard) Claim(ctx context.Context, id, agent string, ttl time.Duration) (Task, error) {
	ms, err := ttlMs(ttl)
	if err != nil {
		return Task{}, err
	}
	k, err := t.k.enter(ctx)
	if err != nil {
		return Task{}, err
	}
	defer t.k.leave()
	var out C.gak_task
	if err := check(C.gak_taskboard_claim(k, str(id), str(agent), ms, &out)); err != nil {
		return Task{}, err
	}
	defer C.gak_task_clear(&out)
	return goTask(&out), nil
}

// ClaimNext claims the first-seeded ready task; ok is false when none is
// ready.
func (t Taskboard) ClaimNext(ctx context.Context, agent string, ttl time.Duration) (task Task, ok bool, err error) {
	ms, err := ttlMs(ttl)
	if err != nil {
		return Task{}, false, err
	}
	k, err := t.k.enter(ctx)
	if err != nil {
		return Task{}, false, err
	}
	defer t.k.leave()
	var out C.gak_task
	var found C.bool
	if err := check(C.gak_taskboard_claim_next(k, str(agent), ms, &out, &found)); err != nil {
		return Task{}, false, err
	}
	if !bool(found) {
		return Task{}, false, nil
	}
	defer C.gak_task_clear(&out)
	return goTask(&out), true, nil
}

// Release returns a claimed task to open; only its current token may
// (CodeLeaseLost otherwise).
func (t Taskboard) Release(ctx context.Context, id, token string) error {
	k, err := t.k.enter(ctx)
	if err != nil {
		return err
	}
	defer t.k.leave()
	return check(C.gak_taskboard_release(k, str(id), str(token)))
}

// Complete marks a claimed task done; only its current token may
// (CodeLeaseLost otherwise); again with the same token is idempotent.
func (t Taskboard) Complete(ctx context.Context, id, token string) error {
	k, err := t.k.enter(ctx)
	if err != nil {
		return err
	}
	defer t.k.leave()
	return check(C.gak_taskboard_complete(k, str(id), str(token)))
}

// Renew extends a live claim to now + ttl (CodeLeaseLost when the token
// is not current or the claim expired).
func (t Taskboard) Renew(ctx context.Context, id, token string, ttl time.Duration) (Task, error) {
	ms, err := ttlMs(ttl)
	if err != nil {
		return Task{}, err
	}
	k, err := t.k.enter(ctx)
	if err != nil {
		return Task{}, err
	}
	defer t.k.leave()
	var out C.gak_task
	if err := check(C.gak_taskboard_renew(k, str(id), str(token), ms, &out)); err != nil {
		return Task{}, err
	}
	defer C.gak_task_clear(&out)
	return goTask(&out), nil
}
