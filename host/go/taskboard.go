package gak

/*
#include "gak.h"
*/
import "C"

import (
	"context"
	"math"
	"time"
	"unsafe"
)

// Taskboard is a board of tasks with dependencies, claimed by token
// (SPEC 6, 9).
type Taskboard struct{ k *Kernel }

func taskStateNumber(s TaskState) (C.gak_task_state, error) {
	switch s {
	case "":
		return C.GAK_TASK_ANY, nil
	case TaskOpen:
		return C.GAK_TASK_OPEN, nil
	case TaskClaimed:
		return C.GAK_TASK_CLAIMED, nil
	case TaskDone:
		return C.GAK_TASK_DONE, nil
	case TaskFailed:
		return C.GAK_TASK_FAILED, nil
	}
	return 0, refused(CodeInvalidInput, "unknown task state "+quote(string(s)))
}

func taskStateName(n C.gak_task_state) TaskState {
	switch n {
	case C.GAK_TASK_OPEN:
		return TaskOpen
	case C.GAK_TASK_CLAIMED:
		return TaskClaimed
	case C.GAK_TASK_DONE:
		return TaskDone
	case C.GAK_TASK_FAILED:
		return TaskFailed
	}
	return TaskState("unknown")
}

func limit32(n int) (C.uint32_t, error) {
	if n < 0 || n > math.MaxUint32 {
		return 0, refused(CodeInvalidInput, "limit out of range")
	}
	return C.uint32_t(n), nil
}

func goTask(t *C.gak_task) Task {
	return Task{
		ID:    goStr(t.id),
		Title: goStr(t.title),
		Deps:  goStrs(t.deps, t.deps_len),
		State: taskStateName(t.state),
		Owner: goStr(t.owner),
		Token: goStr(t.token),
		Until: goOpt(t.has_until, t.until),
		Fence: uint64(t.fence),
	}
}

// Seed loads tasks onto the board (idempotent; re-seeding a task
// overwrites its content and clears its lease, keeping its fence).
func (t Taskboard) Seed(ctx context.Context, tasks []TaskSeed) error {
	k, err := t.k.enter(ctx)
	if err != nil {
		return err
	}
	defer t.k.leave()
	if err := (&scale{}).seeds(tasks); err != nil {
		return err
	}
	var a arena
	defer a.free()
	var seeds *C.gak_task_seed
	if len(tasks) > 0 {
		seeds = (*C.gak_task_seed)(a.alloc(len(tasks) * int(unsafe.Sizeof(C.gak_task_seed{}))))
		items := unsafe.Slice(seeds, len(tasks))
		for i, seed := range tasks {
			state, err := taskStateNumber(seed.State)
			if err != nil {
				return err
			}
			item := &items[i]
			item.id = a.str(seed.ID)
			if seed.Title != "" {
				item.title = a.str(seed.Title)
			}
			item.deps, item.deps_len = a.strs(seed.Deps)
			item.state = state
		}
	}
	return check(C.gak_taskboard_seed(k, seeds, C.size_t(len(tasks))))
}

// List is one page of the board: tasks of state ("" for all) after the
// id after ("" from the start), at most limit (1–1000). Never a token.
func (t Taskboard) List(ctx context.Context, state TaskState, after string, limit int) (TaskPage, error) {
	k, err := t.k.enter(ctx)
	if err != nil {
		return TaskPage{}, err
	}
	defer t.k.leave()
	n, err := taskStateNumber(state)
	if err != nil {
		return TaskPage{}, err
	}
	l, err := limit32(limit)
	if err != nil {
		return TaskPage{}, err
	}
	var out C.gak_task_page
	if err := check(C.gak_taskboard_list(k, n, str(after), l, &out)); err != nil {
		return TaskPage{}, err
	}
	defer C.gak_task_page_clear(&out)
	page := TaskPage{Items: make([]Task, int(out.len)), Next: goStr(out.next)}
	if out.len > 0 {
		items := unsafe.Slice(out.items, int(out.len))
		for i := range items {
			page.Items[i] = goTask(&items[i])
		}
	}
	return page, nil
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
	k, err := t.k.enter(ctx)
	if err != nil {
		return Task{}, err
	}
	defer t.k.leave()
	ms, err := ttlMs(ttl)
	if err != nil {
		return Task{}, err
	}
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
	k, err := t.k.enter(ctx)
	if err != nil {
		return Task{}, false, err
	}
	defer t.k.leave()
	ms, err := ttlMs(ttl)
	if err != nil {
		return Task{}, false, err
	}
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
	k, err := t.k.enter(ctx)
	if err != nil {
		return Task{}, err
	}
	defer t.k.leave()
	ms, err := ttlMs(ttl)
	if err != nil {
		return Task{}, err
	}
	var out C.gak_task
	if err := check(C.gak_taskboard_renew(k, str(id), str(token), ms, &out)); err != nil {
		return Task{}, err
	}
	defer C.gak_task_clear(&out)
	return goTask(&out), nil
}
