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

// ClaimBatch claims up to limit (1–1000) ready tasks for agent for ttl in
// one transaction, in claim order (higher priority first, then seed
// order; a task not yet due or whose group is full is passed over), each
// with its token. None ready is an empty slice, not an error.
func (t Taskboard) ClaimBatch(ctx context.Context, agent string, ttl time.Duration, limit int) ([]Task, error) {
	ms, err := ttlMs(ttl)
	if err != nil {
		return nil, err
	}
	l, err := limit32(limit)
	if err != nil {
		return nil, err
	}
	k, err := t.k.enter(ctx)
	if err != nil {
		return nil, err
	}
	defer t.k.leave()
	var out C.gak_task_list
	if err := check(C.gak_taskboard_claim_batch(k, str(agent), ms, l, &out)); err != nil {
		return nil, err
	}
	defer C.gak_task_list_clear(&out)
	tasks := make([]Task, int(out.len))
	if out.len > 0 {
		items := unsafe.Slice(out.items, int(out.len))
		for i := range items {
			tasks[i] = goTask(&items[i])
		}
	}
	return tasks, nil
}

// CompleteBatch completes many claims (1–1000 distinct ids) in one
// transaction. Each item answers, in the order given, what Complete would
// have for it alone: Completed, or NotFound / LeaseLost (that item changes
// nothing). A malformed call is refused whole with CodeInvalidInput.
func (t Taskboard) CompleteBatch(ctx context.Context, items []Completion) ([]CompletionResult, error) {
	if err := (&scale{}).completions(items, "items"); err != nil {
		return nil, err
	}
	var a arena
	defer a.free()
	list, n, err := a.completions(items)
	if err != nil {
		return nil, err
	}
	k, err := t.k.enter(ctx)
	if err != nil {
		return nil, err
	}
	defer t.k.leave()
	var out C.gak_completion_result_list
	if err := check(C.gak_taskboard_complete_batch(k, list, n, &out)); err != nil {
		return nil, err
	}
	defer C.gak_completion_result_list_clear(&out)
	results := make([]CompletionResult, int(out.len))
	if out.len > 0 {
		items := unsafe.Slice(out.items, int(out.len))
		for i := range items {
			results[i] = goCompletionResult(&items[i])
		}
	}
	return results, nil
}

// Fail reports that a claimed task's handler failed: reason (at most 4096
// bytes) becomes its LastError and its lease is cleared; it is due again
// retryAfter milliseconds from now (nil: at once), or turns TaskDead when
// its attempts are used up. Only its current token may (CodeLeaseLost
// otherwise; CodeNotFound); failing again with the token that failed it
// answers the task as it is.
func (t Taskboard) Fail(ctx context.Context, id, token, reason string, retryAfter *uint64) (Task, error) {
	var has C.bool
	var after C.uint64_t
	if retryAfter != nil {
		has, after = true, C.uint64_t(*retryAfter)
	}
	k, err := t.k.enter(ctx)
	if err != nil {
		return Task{}, err
	}
	defer t.k.leave()
	var out C.gak_task
	if err := check(C.gak_taskboard_fail(k, str(id), str(token), str(reason), has, after, &out)); err != nil {
		return Task{}, err
	}
	defer C.gak_task_clear(&out)
	return goTask(&out), nil
}

// Revive brings a dead task back: open, attempts 0, LastError and
// NotBefore cleared, everything else kept. Refused CodeNotFound, and
// CodeNotDead when the task is not dead.
func (t Taskboard) Revive(ctx context.Context, id string) (Task, error) {
	k, err := t.k.enter(ctx)
	if err != nil {
		return Task{}, err
	}
	defer t.k.leave()
	var out C.gak_task
	if err := check(C.gak_taskboard_revive(k, str(id), &out)); err != nil {
		return Task{}, err
	}
	defer C.gak_task_clear(&out)
	return goTask(&out), nil
}

// SetGroupLimit allows at most *limit (1–100,000) live claims of the
// group's tasks at once; nil removes the limit. Lowering a limit revokes
// no claim; a claim of a task whose group is full is refused
// CodeGroupFull.
func (t Taskboard) SetGroupLimit(ctx context.Context, group string, limit *uint32) error {
	var has C.bool
	var l C.uint32_t
	if limit != nil {
		has, l = true, C.uint32_t(*limit)
	}
	k, err := t.k.enter(ctx)
	if err != nil {
		return err
	}
	defer t.k.leave()
	return check(C.gak_taskboard_set_group_limit(k, str(group), has, l))
}

// GetGroup is the group's limit and its live claims, counted exactly;
// CodeNotFound for a group without a limit.
func (t Taskboard) GetGroup(ctx context.Context, group string) (GroupInfo, error) {
	k, err := t.k.enter(ctx)
	if err != nil {
		return GroupInfo{}, err
	}
	defer t.k.leave()
	var out C.gak_group_info
	if err := check(C.gak_taskboard_get_group(k, str(group), &out)); err != nil {
		return GroupInfo{}, err
	}
	return goGroupInfo(&out), nil
}

// ListGroups is one page of the groups the board knows (a limit, a claim
// or a ready task), by name, after the name after ("" from the start), at
// most limit (1–1000), each with its limit and exact live claims.
func (t Taskboard) ListGroups(ctx context.Context, after string, limit int) (GroupPage, error) {
	l, err := limit32(limit)
	if err != nil {
		return GroupPage{}, err
	}
	k, err := t.k.enter(ctx)
	if err != nil {
		return GroupPage{}, err
	}
	defer t.k.leave()
	var out C.gak_group_page
	if err := check(C.gak_taskboard_list_groups(k, str(after), l, &out)); err != nil {
		return GroupPage{}, err
	}
	defer C.gak_group_page_clear(&out)
	return goGroupPage(&out), nil
}

// ListDelayed is one page of the tasks waiting for their not-before, by
// due time then seed order, after the cursor after (a previous page's
// Next; "" from the start), at most limit (1–1000). Never a token.
func (t Taskboard) ListDelayed(ctx context.Context, after string, limit int) (TaskPage, error) {
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
	if err := check(C.gak_taskboard_list_delayed(k, str(after), l, &out)); err != nil {
		return TaskPage{}, err
	}
	defer C.gak_task_page_clear(&out)
	return goTaskPage(&out), nil
}

// Count is how many tasks the board holds in each stored state (an expired
// claim counts as claimed), read from 256 count records, never the board.
// Exact is false on a board a format-1 kernel wrote until Recount has
// visited its tasks.
func (t Taskboard) Count(ctx context.Context) (TaskCounts, error) {
	k, err := t.k.enter(ctx)
	if err != nil {
		return TaskCounts{}, err
	}
	defer t.k.leave()
	var out C.gak_task_counts
	if err := check(C.gak_taskboard_count(k, &out)); err != nil {
		return TaskCounts{}, err
	}
	return goTaskCounts(&out), nil
}

// Recount counts up to limit (1–1000) of the tasks a format-1 kernel wrote
// that Count does not cover yet, and says whether every task is counted now.
func (t Taskboard) Recount(ctx context.Context, limit int) (bool, error) {
	l, err := limit32(limit)
	if err != nil {
		return false, err
	}
	k, err := t.k.enter(ctx)
	if err != nil {
		return false, err
	}
	defer t.k.leave()
	var done C.bool
	if err := check(C.gak_taskboard_recount(k, l, &done)); err != nil {
		return false, err
	}
	return bool(done), nil
}

// ListGroup is one page of the tasks of group (any state), by id, after
// the id after ("" from the start), at most limit (1–1000). Never a token.
func (t Taskboard) ListGroup(ctx context.Context, group, after string, limit int) (TaskPage, error) {
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
	if err := check(C.gak_taskboard_list_group(k, str(group), str(after), l, &out)); err != nil {
		return TaskPage{}, err
	}
	defer C.gak_task_page_clear(&out)
	return goTaskPage(&out), nil
}
