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

/// The claim queue: ready tasks in seed order (`indexes`) that no live
/// claim holds. (Databases written before 0.3 also keep claimed tasks here.)
pub const QUEUE: &str = "q/";

/// A task's place in the claim queue.
pub fn queue(seq: u64) -> String {
    format!("{QUEUE}{seq:016x}")
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
}
