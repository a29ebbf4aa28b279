//! The model's taskboard (SPEC 6, 8): seeding, claims, and what a task
//! token can still do.
use std::collections::BTreeSet;

use gak::{TaskSeed, TaskState};

use super::{MTask, Model, Mutant, bad_ttl, err};
use crate::model::{H, Out};

impl Model {
    // ---- taskboard (SPEC 6, 8)

    pub(super) fn seed(&mut self, seeds: &[TaskSeed]) -> Out<H> {
        let mut ids = BTreeSet::new();
        for s in seeds {
            if !ids.insert(&s.id) || s.state == Some(TaskState::Claimed) {
                return err("invalid-input");
            }
        }
        for s in seeds {
            // Re-seeding overwrites content, clears the lease, keeps the fence.
            let fence = self.tasks.get(&s.id).map_or(0, |t| t.fence);
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

    pub(super) fn claim(&mut self, id: &str, agent: &str, ttl: u64) -> Out<H> {
        if bad_ttl(ttl) {
            return err("invalid-input");
        }
        let Some(t) = self.tasks.get(id) else {
            return err("not-found");
        };
        if t.state == TaskState::Done {
            return err("terminal");
        }
        let deps_done = t.deps.iter().all(|d| {
            self.tasks
                .get(d)
                .is_some_and(|d| d.state == TaskState::Done)
        });
        if !deps_done {
            return err("deps-pending");
        }
        if t.state == TaskState::Claimed && self.task_live(t.until) {
            return err("taken");
        }
        let token = self.mint();
        let now = self.now;
        let t = self.tasks.get_mut(id).expect("checked");
        t.state = TaskState::Claimed;
        t.fence += 1;
        t.owner = Some(agent.to_owned());
        t.token = Some(token);
        t.until = Some(now + ttl);
        Out::Task(t.view(id, true))
    }

    /// SPEC 6 does not say whether a token presented for an unknown task is
    /// `not-found` or `lease-lost`: either is accepted.
    fn unknown_task() -> Out<H> {
        Out::ErrOneOf(vec!["not-found", "lease-lost"])
    }

    pub(super) fn task_release(&mut self, id: &str, token: H) -> Out<H> {
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
}
