//! The model's taskboard (SPEC 6, 8, 10): seeding, claims, what a task
//! token can still do, and the job queue (claim order, batches, attempts,
//! dead tasks, delays, groups).
use std::collections::BTreeSet;

use gak::{TaskSeed, TaskState};

use super::{MTask, Model, Mutant, bad_ttl, err};
use crate::model::{H, MAX_TTL, Out};

/// SPEC 8: numbers stay below 2^53.
const MAX_NUMBER: u64 = 1 << 53;

fn bad_id(id: &str) -> bool {
    id.is_empty() || id.len() > 256
}

impl Model {
    // ---- taskboard (SPEC 6, 8, 10)

    pub(super) fn seed(&mut self, seeds: &[TaskSeed]) -> Out<H> {
        let mut ids = BTreeSet::new();
        for s in seeds {
            if !ids.insert(&s.id)
                || matches!(s.state, Some(TaskState::Claimed | TaskState::Dead))
                || s.max_attempts.is_some_and(|m| !(1..=1000).contains(&m))
                || s.group.as_deref().is_some_and(bad_id)
                || s.not_before.is_some_and(|n| n >= MAX_NUMBER)
            {
                return err("invalid-input");
            }
        }
        for s in seeds {
            // Re-seeding overwrites content, clears the lease, keeps the fence
            // and the task's place in seed order; attempts start again.
            let (fence, order) = match self.tasks.get(&s.id) {
                Some(t) => (t.fence, t.order),
                None => {
                    self.seeded += 1;
                    (0, self.seeded)
                }
            };
            self.tasks.insert(
                s.id.clone(),
                MTask {
                    title: s.title.clone().unwrap_or_default(),
                    deps: s.deps.clone(),
                    state: s.state.unwrap_or(TaskState::Open),
                    owner: None,
                    token: None,
                    until: None,
                    fence,
                    completed_by: None,
                    priority: s.priority.unwrap_or(0),
                    not_before: s.not_before,
                    max_attempts: s.max_attempts,
                    group: s.group.clone(),
                    attempts: 0,
                    last_error: None,
                    failed_by: None,
                    order,
                },
            );
        }
        Out::Unit
    }

    fn task_live(&self, until: Option<u64>) -> bool {
        let until = until.expect("a claimed task has a deadline");
        if self.mutant == Some(Mutant::TaskLiveAtUntil) {
            self.now <= until
        } else {
            self.now < until
        }
    }

    fn live_claim(&self, t: &MTask) -> bool {
        t.state == TaskState::Claimed && self.task_live(t.until)
    }

    /// Claims counted against a group's limit: live ones (SPEC 10).
    pub(crate) fn group_live(&self, group: &str) -> u32 {
        let counts = |t: &MTask| {
            t.state == TaskState::Claimed
                && (self.mutant == Some(Mutant::GroupCountIgnoresExpiry) || self.task_live(t.until))
        };
        let n = self
            .tasks
            .values()
            .filter(|t| t.group.as_deref() == Some(group) && counts(t))
            .count();
        u32::try_from(n).expect("few tasks")
    }

    /// Would one more live claim exceed the task's group's limit?
    pub(crate) fn group_full(&self, t: &MTask) -> bool {
        t.group
            .as_ref()
            .and_then(|g| self.groups.get(g).map(|limit| (g, *limit)))
            .is_some_and(|(g, limit)| self.group_live(g) >= limit)
    }

    /// `now >= not-before`, when set.
    pub(crate) fn due(&self, t: &MTask) -> bool {
        t.not_before.is_none_or(|at| {
            let backing_off = t.state == TaskState::Failed && t.last_error.is_some();
            if self.mutant == Some(Mutant::BackoffEndsLate) && backing_off {
                self.now > at
            } else {
                self.now >= at
            }
        })
    }

    pub(crate) fn deps_done(&self, t: &MTask) -> bool {
        t.deps.iter().all(|d| {
            self.tasks
                .get(d)
                .is_some_and(|d| d.state == TaskState::Done)
        })
    }

    pub(crate) fn exhausted(t: &MTask) -> bool {
        t.max_attempts.is_some_and(|m| t.attempts >= m)
    }

    /// The tasks a claim walk could meet with their attempts used up (not
    /// finished, not under a live claim): those a walk that passed them
    /// over may have read and turned dead (see [`super::PassOver::kill`]).
    pub fn used_up(&self) -> std::collections::BTreeSet<String> {
        self.tasks
            .iter()
            .filter(|(_, t)| Self::exhausted(t) && self.free(t))
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// Neither finished nor under a live claim.
    fn free(&self, t: &MTask) -> bool {
        match t.state {
            TaskState::Open | TaskState::Failed => true,
            TaskState::Claimed => !self.task_live(t.until),
            TaskState::Done | TaskState::Dead => false,
        }
    }

    /// SPEC 10's ready, the group's limit included.
    pub(crate) fn ready(&self, t: &MTask) -> bool {
        self.free(t) && self.deps_done(t) && self.due(t) && !self.group_full(t)
    }

    /// Grant `id` to `agent`: a new token, fence + 1, attempts + 1.
    fn grant(&mut self, id: &str, agent: &str, ttl: u64) -> Out<H> {
        let token = self.mint();
        let now = self.now;
        let t = self.tasks.get_mut(id).expect("checked");
        t.state = TaskState::Claimed;
        t.fence += 1;
        t.attempts += 1;
        t.owner = Some(agent.to_owned());
        t.token = Some(token);
        t.until = Some(now + ttl);
        t.failed_by = None;
        Out::Task(t.view(id, true))
    }

    pub(super) fn claim(&mut self, id: &str, agent: &str, ttl: u64) -> Out<H> {
        if bad_ttl(ttl) {
            return err("invalid-input");
        }
        let Some(t) = self.tasks.get(id) else {
            return err("not-found");
        };
        if matches!(t.state, TaskState::Done | TaskState::Dead) {
            return err("terminal");
        }
        if !self.deps_done(t) {
            return err("deps-pending");
        }
        if !self.due(t) {
            return err("not-due");
        }
        if self.live_claim(t) {
            return err("taken");
        }
        if self.group_full(t) {
            return err("group-full");
        }
        if Self::exhausted(t) {
            return err("terminal");
        }
        self.grant(id, agent, ttl)
    }

    /// `claim-batch` (and `claim-next`, limit 1): ready tasks in claim
    /// order (priority, then seed order); exhausted ones met on the way
    /// turn dead. Under [`Model::pass_over`] (the linearizability checker)
    /// a task an overlapping call touched may be passed over, and is
    /// exactly when the kernel did not grant it.
    pub(super) fn claim_batch(&mut self, agent: &str, ttl: u64, limit: u32) -> Out<H> {
        if bad_ttl(ttl) || !(1..=1000).contains(&limit) {
            return err("invalid-input");
        }
        let mut order: Vec<(i32, u64, String)> = self
            .tasks
            .iter()
            .map(|(id, t)| (-t.priority, t.order, id.clone()))
            .collect();
        order.sort();
        let mut granted = Vec::new();
        for (_, _, id) in order {
            if granted.len() == limit as usize {
                break;
            }
            let t = &self.tasks[&id];
            if !self.ready(t) {
                continue;
            }
            // Held: the task itself, or — a grouped task's place in the
            // claim order being its group's, changed only under the group's
            // lock — a task of its group.
            let held = self.pass_over.as_ref().is_some_and(|p| {
                let group = &t.group;
                let group_held = group.is_some()
                    && p.held
                        .iter()
                        .any(|h| self.tasks.get(h).is_some_and(|o| o.group == *group));
                p.held.contains(&id) || group_held || self.mutant == Some(Mutant::PassOverUnheld)
            });
            let kill = self
                .pass_over
                .as_ref()
                .is_some_and(|p| p.kill.contains(&id));
            if Self::exhausted(t) && held && !kill {
                continue; // passed over unread
            }
            if Self::exhausted(t) && self.mutant != Some(Mutant::BatchSkipsAttemptsBound) {
                let t = self.tasks.get_mut(&id).expect("listed");
                t.state = TaskState::Dead;
                t.last_error = Some("attempts-exhausted".into());
                t.owner = None;
                t.token = None;
                t.until = None;
                t.failed_by = None;
                continue;
            }
            if let Some(p) = &self.pass_over
                && held
                && !p.granted.contains(&id)
            {
                continue;
            }
            let Out::Task(t) = self.grant(&id, agent, ttl) else {
                unreachable!("a grant")
            };
            granted.push(t);
        }
        Out::Tasks(granted)
    }

    /// SPEC 6 does not say whether a token presented for an unknown task is
    /// `not-found` or `lease-lost`: either is accepted.
    fn unknown_task() -> Out<H> {
        Out::ErrOneOf(vec!["not-found", "lease-lost"])
    }

    pub(super) fn task_release(&mut self, id: &str, token: H) -> Out<H> {
        let keep = self.mutant == Some(Mutant::ReleaseKeepsAttempt);
        let Some(t) = self.tasks.get_mut(id) else {
            return Self::unknown_task();
        };
        if t.state != TaskState::Claimed || t.token != Some(token) {
            return err("lease-lost");
        }
        t.state = TaskState::Open;
        t.owner = None;
        t.token = None;
        t.until = None;
        if !keep {
            // SPEC 10: a voluntary release gives its attempt back.
            t.attempts = t.attempts.saturating_sub(1);
        }
        Out::Unit
    }

    pub(super) fn task_complete(&mut self, id: &str, token: H) -> Out<H> {
        let Some(t) = self.tasks.get_mut(id) else {
            return Self::unknown_task();
        };
        if t.state == TaskState::Claimed && t.token == Some(token) {
            t.state = TaskState::Done;
            t.token = None;
            t.until = None;
            t.completed_by = Some(token);
            Out::Unit
        } else if t.state == TaskState::Done && t.completed_by == Some(token) {
            Out::Unit
        } else {
            err("lease-lost")
        }
    }

    pub(super) fn task_renew(&mut self, id: &str, token: H, ttl: u64) -> Out<H> {
        if bad_ttl(ttl) {
            return err("invalid-input");
        }
        let now = self.now;
        let Some(t) = self.tasks.get(id) else {
            return Self::unknown_task();
        };
        if t.state != TaskState::Claimed || t.token != Some(token) || now >= t.until.unwrap_or(0) {
            return err("lease-lost");
        }
        let fresh = (self.mutant == Some(Mutant::RenewMintsToken)).then(|| self.mint());
        let t = self.tasks.get_mut(id).expect("checked");
        t.until = Some(now + ttl);
        if let Some(fresh) = fresh {
            t.token = Some(fresh);
        }
        Out::Task(t.view(id, true))
    }

    // ---- the job queue (SPEC 10)

    pub(super) fn complete_batch(&mut self, items: &[(String, H)]) -> Out<H> {
        let distinct: BTreeSet<&String> = items.iter().map(|(id, _)| id).collect();
        if items.is_empty() || items.len() > 1000 || distinct.len() != items.len() {
            return err("invalid-input");
        }
        Out::Items(
            items
                .iter()
                .map(|(id, token)| (id.clone(), self.task_complete(id, *token)))
                .collect(),
        )
    }

    pub(super) fn fail(
        &mut self,
        id: &str,
        token: H,
        reason: &str,
        retry_after: Option<u64>,
    ) -> Out<H> {
        if reason.len() > 4096 || retry_after.is_some_and(|ms| ms > MAX_TTL) {
            return err("invalid-input");
        }
        let now = self.now;
        let Some(t) = self.tasks.get_mut(id) else {
            return Self::unknown_task();
        };
        if t.failed_by == Some(token) {
            // Failing again with the token that failed it: the task as it is.
            return Out::Task(t.view(id, false));
        }
        if t.state != TaskState::Claimed || t.token != Some(token) {
            return err("lease-lost");
        }
        t.last_error = Some(reason.to_owned());
        t.owner = None;
        t.token = None;
        t.until = None;
        t.failed_by = Some(token);
        if Self::exhausted(t) {
            t.state = TaskState::Dead;
        } else {
            t.state = TaskState::Failed;
            t.not_before = retry_after.map(|ms| now + ms);
        }
        Out::Task(t.view(id, false))
    }

    pub(super) fn revive(&mut self, id: &str) -> Out<H> {
        let Some(t) = self.tasks.get_mut(id) else {
            return err("not-found");
        };
        if t.state != TaskState::Dead {
            return err("not-dead");
        }
        t.state = TaskState::Open;
        t.attempts = 0;
        t.last_error = None;
        t.not_before = None;
        t.failed_by = None;
        Out::Task(t.view(id, false))
    }

    pub(super) fn set_group_limit(&mut self, group: &str, limit: Option<u32>) -> Out<H> {
        if bad_id(group) || limit.is_some_and(|l| !(1..=100_000).contains(&l)) {
            return err("invalid-input");
        }
        match limit {
            Some(l) => self.groups.insert(group.to_owned(), l),
            None => self.groups.remove(group),
        };
        Out::Unit
    }

    pub(super) fn get_group(&self, group: &str) -> Out<H> {
        match self.groups.get(group) {
            Some(&limit) => Out::Group {
                limit,
                live: self.group_live(group),
            },
            None => err("not-found"),
        }
    }
}
