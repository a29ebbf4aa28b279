//! Where every record and index entry lives: the key layout of the tables
//! (documented for operators in `FORMAT.md`).
//!
//! Variable-length parts that are followed by more key are written as
//! `len:value`, so no id can make two different addresses collide and a
//! prefix names exactly one owner.
use crate::{KeyState, TaskState};

/// The commitgate outcome of `(run_id, step)`: `len:run-id` + step.
pub fn outcome(run_id: &str, step: Option<&str>) -> String {
    format!("{}:{run_id}{}", run_id.len(), step.unwrap_or(""))
}

/// The prefix of every outcome of `run_id` (the run's and its steps').
pub fn run_outcomes(run_id: &str) -> String {
    outcome(run_id, None)
}

/// The claim queue of priority 0: ready tasks in seed order (`indexes`)
/// that no live claim holds. (Databases written before 0.3 also keep claimed
/// tasks here.) The claim order walks [`HIGHER`], then this, then [`LOWER`].
pub const QUEUE: &str = "q/";

/// The claim queue of positive priorities, highest first (0.4).
pub const HIGHER: &str = "qh/";

/// The claim queue of negative priorities, highest (nearest 0) first (0.4).
pub const LOWER: &str = "ql/";

/// The claim queues in claim order.
pub const QUEUES: [&str; 3] = [HIGHER, QUEUE, LOWER];

/// A priority-0 task's place in the claim queue (format 1's only place,
/// kept as it was so a format-1 board needs no migration).
pub fn queue(seq: u64) -> String {
    format!("{QUEUE}{seq:016x}")
}

/// A ready task's place in the claim order: priority first (higher first),
/// then seed order.
pub fn ready(priority: i32, seq: u64) -> String {
    match priority {
        0 => queue(seq),
        p if p > 0 => format!("{HIGHER}{:08x}/{seq:016x}", i32::MAX - p),
        p => format!("{LOWER}{:08x}/{seq:016x}", -(p + 1)),
    }
}

/// Every priority as eight hex digits, higher priorities first.
fn rank(priority: i32) -> String {
    format!("{:08x}", (i64::from(i32::MAX) - i64::from(priority)) as u32)
}

/// The ready tasks of `group`, in claim order (0.4). Only the group's first
/// one stands in the claim queues, and only while the group has a free slot
/// (its head), so a full group's tasks are never read by a claimer.
pub fn group_queue(group: &str) -> String {
    format!("qg/{}:{group}/", group.len())
}

/// A ready grouped task's place in its group's queue.
pub fn group_ready(group: &str, priority: i32, seq: u64) -> String {
    format!("{}{}/{seq:016x}", group_queue(group), rank(priority))
}

/// Priority and seed order of a group-queue entry's key under `prefix`.
pub fn parse_group_ready(prefix: &str, key: &str) -> Option<(i32, u64)> {
    let (rank, seq) = key.strip_prefix(prefix)?.split_once('/')?;
    let rank = u32::from_str_radix(rank, 16).ok()?;
    let seq = u64::from_str_radix(seq, 16).ok()?;
    let priority = i64::from(i32::MAX) - i64::from(rank);
    Some((i32::try_from(priority).ok()?, seq))
}

/// The claim-queue key standing in for `group`'s first ready task (its
/// head): right after the place the task would have without a group, so it
/// keeps that place in the claim order, and never the same key as a task's
/// own entry or another group's head.
pub fn head(group: &str, priority: i32, seq: u64) -> String {
    format!("{}/g{}:{group}", ready(priority, seq), group.len())
}

/// Tasks not due yet, by the instant they come due (then seed order, 0.4).
pub const DELAYED: &str = "qd/";

/// A delayed task's entry.
pub fn delayed(not_before: u64, seq: u64) -> String {
    format!("{DELAYED}{not_before:016x}/{seq:016x}")
}

/// The delayed entry a `list-delayed` cursor names (the key without its
/// prefix, exactly as [`delayed`] writes it), or none when malformed.
pub fn delayed_cursor(cursor: &str) -> Option<String> {
    let (at, seq) = cursor.split_once('/')?;
    let hex = |s: &str| s.len() == 16 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    (hex(at) && hex(seq)).then(|| format!("{DELAYED}{cursor}"))
}

/// The due instant of a delayed entry's key.
pub fn parse_delayed(key: &str) -> Option<u64> {
    let rest = key.strip_prefix(DELAYED)?;
    let (at, seq) = rest.split_once('/')?;
    u64::from_str_radix(seq, 16).ok()?;
    u64::from_str_radix(at, 16).ok()
}

/// Every group's record in `meta`, by name (0.4).
pub const GROUPS: &str = "group/";

/// A group's record in `meta`: its limit, its claims and its head (0.4).
pub fn group(group: &str) -> String {
    format!("{GROUPS}{group}")
}

/// Claimed ready tasks by the deadline of their claim (then seed order), so
/// `claim-next` finds expired claims without reading live ones (0.3).
pub const CLAIMED: &str = "qc/";

/// A claimed ready task's entry, by its claim's deadline.
pub fn claimed(until: u64, seq: u64) -> String {
    format!("{CLAIMED}{until:016x}/{seq:016x}")
}

/// The deadline of a claimed-queue entry's key.
pub fn parse_claimed(key: &str) -> Option<u64> {
    let rest = key.strip_prefix(CLAIMED)?;
    let (until, seq) = rest.split_once('/')?;
    u64::from_str_radix(seq, 16).ok()?;
    u64::from_str_radix(until, 16).ok()
}

/// Every task in `state`, by id.
pub fn task_states(state: TaskState) -> String {
    format!("ts/{}/", state.name())
}

/// A task's entry in the listing of its state.
pub fn task_state(state: TaskState, id: &str) -> String {
    format!("{}{id}", task_states(state))
}

/// Every task of `group`, by id (`list-group`, 0.4).
pub fn group_tasks(group: &str) -> String {
    format!("tg/{}:{group}/", group.len())
}

/// `id`'s entry among its group's tasks.
pub fn group_task(group: &str, id: &str) -> String {
    format!("{}{id}", group_tasks(group))
}

/// Every task that lists `dep` as a dependency.
pub fn dependents(dep: &str) -> String {
    format!("td/{}:{dep}", dep.len())
}

/// The edge "`id` depends on `dep`".
pub fn dependent(dep: &str, id: &str) -> String {
    format!("{}{id}", dependents(dep))
}

/// Every side-effect key whose stored phase is `state`, by key.
pub fn key_states(state: KeyState) -> String {
    format!("ks/{}/", state.name())
}

/// A key's entry in the listing of its phase.
pub fn key_state(state: KeyState, key: &str) -> String {
    format!("{}{key}", key_states(state))
}

/// Keys that are or will turn uncertain, by the time they do (0.4): an
/// intent under its deadline, a key marked uncertain under the time it was
/// marked. The first entry at or before now is the oldest uncertain key.
pub const KEY_TIMES: &str = "kt/";

/// A key's entry among [`KEY_TIMES`].
pub fn key_time(at: u64, key: &str) -> String {
    format!("{KEY_TIMES}{at:016x}/{key}")
}

/// The time of a [`KEY_TIMES`] entry.
pub fn parse_key_time(entry: &str) -> Option<u64> {
    let (at, _) = entry.strip_prefix(KEY_TIMES)?.split_once('/')?;
    u64::from_str_radix(at, 16).ok()
}

/// Finished records by finishing time, oldest first, for `prune`.
pub const RETENTION: &str = "rt/";

/// What a retention entry points at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Finished {
    /// A completed side-effect key.
    Key,
    /// A done task.
    Task,
    /// A run with a terminal outcome.
    Run,
}

impl Finished {
    fn name(self) -> &'static str {
        match self {
            Finished::Key => "key",
            Finished::Task => "task",
            Finished::Run => "run",
        }
    }
}

/// The retention entry of a record that finished at `at`.
pub fn retention(at: u64, kind: Finished, id: &str) -> String {
    format!("{RETENTION}{at:016x}/{}/{id}", kind.name())
}

/// Split a retention entry's key back into its parts.
pub fn parse_retention(key: &str) -> Option<(u64, Finished, &str)> {
    let rest = key.strip_prefix(RETENTION)?;
    let (at, rest) = rest.split_once('/')?;
    let (kind, id) = rest.split_once('/')?;
    let kind = match kind {
        "key" => Finished::Key,
        "task" => Finished::Task,
        "run" => Finished::Run,
        _ => return None,
    };
    Some((u64::from_str_radix(at, 16).ok()?, kind, id))
}

/// Retention entries of done tasks that `prune` found still needed, held
/// under the not-done dependent that needs them until it finishes (or is
/// re-seeded), so no later `prune` reads them again (0.3).
pub fn held_by(dependent: &str) -> String {
    format!("rh/{}:{dependent}", dependent.len())
}

/// The held retention entry of `id` (finished at `at`), needed by `dependent`.
pub fn held(dependent: &str, at: u64, id: &str) -> String {
    format!("{}{at:016x}/{id}", held_by(dependent))
}

/// The finishing time and task id of a held entry under `prefix`.
pub fn parse_held<'a>(prefix: &str, key: &'a str) -> Option<(u64, &'a str)> {
    let (at, id) = key.strip_prefix(prefix)?.split_once('/')?;
    Some((u64::from_str_radix(at, 16).ok()?, id))
}

/// The board-wide record in `meta`.
pub const BOARD: &str = "taskboard";

/// The board's task counts by state, kept in [`COUNT_SHARDS`] records
/// (`meta`, `count/<shard as 2 hex digits>`) so concurrent calls rarely
/// write the same one; the counts are their sums (0.4).
pub const COUNTS: &str = "count/";

/// How many count records there are.
pub const COUNT_SHARDS: u64 = 256;

/// One count record.
pub fn count_shard(shard: u64) -> String {
    format!("{COUNTS}{:02x}", shard % COUNT_SHARDS)
}

/// Whether the counts cover every task (`meta`): written when the board
/// is created, or when `recount` has visited the tasks of a board a
/// format-1 kernel wrote (0.4).
pub const COUNTED: &str = "counted";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_never_collide() {
        // run "ab" with no step vs run "a" with step "b"
        assert_ne!(outcome("ab", None), outcome("a", Some("b")));
        assert_ne!(outcome("a", Some("1:b")), outcome("a1:", Some("b")));
        assert!(outcome("a", Some("b")).starts_with(&run_outcomes("a")));
        assert!(!outcome("ab", None).starts_with(&run_outcomes("a")));
        assert!(!dependent("ab", "c").starts_with(&dependents("a")));
        assert_ne!(dependent("a", "bc"), dependent("ab", "c"));
    }

    #[test]
    fn queue_and_retention_keys_sort_by_number() {
        assert!(queue(9) < queue(10));
        assert!(queue(255) < queue(256));
        assert!(retention(9, Finished::Run, "z") < retention(10, Finished::Key, "a"));
        let key = retention(1234, Finished::Task, "a/b");
        assert_eq!(parse_retention(&key), Some((1234, Finished::Task, "a/b")));
        assert!(claimed(9, 500) < claimed(10, 1));
        assert_eq!(parse_claimed(&claimed(1234, 7)), Some(1234));
        assert!(!claimed(1, 1).starts_with(QUEUE));
        let held_key = held("d/1", 77, "a/b");
        assert_eq!(parse_held(&held_by("d/1"), &held_key), Some((77, "a/b")));
        assert!(!held("ab", 1, "c").starts_with(&held_by("a")));
    }

    #[test]
    fn claim_order_is_priority_then_seed_order() {
        let order = [
            ready(i32::MAX, 9),
            ready(7, 1),
            ready(7, 2),
            ready(1, 0),
            ready(0, 0),
            ready(0, 5),
            ready(-1, 0),
            ready(-1, 3),
            ready(i32::MIN, 0),
        ];
        let walked: Vec<&String> = QUEUES
            .iter()
            .flat_map(|q| {
                let mut in_q: Vec<&String> = order.iter().filter(|k| k.starts_with(q)).collect();
                in_q.sort();
                in_q
            })
            .collect();
        assert_eq!(walked, order.iter().collect::<Vec<_>>());
        assert_eq!(ready(0, 5), queue(5));
        let mut grouped = [
            group_ready("g", -3, 1),
            group_ready("g", 0, 9),
            group_ready("g", 0, 2),
            group_ready("g", i32::MIN, 0),
            group_ready("g", i32::MAX, 4),
        ];
        grouped.sort();
        let parsed: Vec<(i32, u64)> = grouped
            .iter()
            .map(|k| parse_group_ready(&group_queue("g"), k).unwrap())
            .collect();
        assert_eq!(
            parsed,
            [(i32::MAX, 4), (0, 2), (0, 9), (-3, 1), (i32::MIN, 0)]
        );
        assert!(!group_ready("ab", 0, 1).starts_with(&group_queue("a")));
        // A head sorts right after its task's own place, before the next.
        for p in [i32::MIN, -1, 0, 1, i32::MAX] {
            assert!(ready(p, 5) < head("g", p, 5));
            assert!(head("g", p, 5) < ready(p, 6));
            assert_ne!(head("g", p, 5), head("h", p, 5));
        }
        assert_eq!(parse_delayed(&delayed(77, 3)), Some(77));
        assert!(delayed(9, 500) < delayed(10, 1));
    }
}
