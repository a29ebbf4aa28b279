//! The model's checkpoints and commit gate (SPEC 3, 4, 8): a snapshot is
//! saved only if newer, an outcome is committed once.
use gak::{Outcome, Snapshot};

use super::{Model, err};
use crate::model::{H, Out};

impl Model {
    // ---- checkpoint and commitgate (SPEC 3, 4, 8)

    pub(super) fn save(&mut self, snap: &Snapshot) -> Out<H> {
        if self.outcomes.contains_key(&(snap.run_id.clone(), None)) {
            return err("terminal");
        }
        if let Some(persisted) = self.snaps.get(&snap.run_id) {
            if snap.fence.unwrap_or(0) < persisted.fence.unwrap_or(0) {
                return err("fence-stale");
            }
            if snap.seq <= persisted.seq {
                return err("stale-seq");
            }
        }
        if snap.seq == 0 {
            return err("stale-seq");
        }
        self.snaps.insert(snap.run_id.clone(), snap.clone());
        Out::Unit
    }

    pub(super) fn commit(
        &mut self,
        run: &str,
        step: &Option<String>,
        fence: u64,
        outcome: &Outcome,
    ) -> Out<H> {
        if let Some(persisted) = self.snaps.get(run).and_then(|s| s.fence)
            && fence < persisted
        {
            return err("fence-stale");
        }
        if step.is_some() && self.outcomes.contains_key(&(run.to_owned(), None)) {
            return err("terminal");
        }
        match self.outcomes.get(&(run.to_owned(), step.clone())) {
            Some(first) if first == outcome => Out::Outcome(first.clone()),
            Some(_) => err("already-committed"),
            None => {
                self.outcomes
                    .insert((run.to_owned(), step.clone()), outcome.clone());
                Out::Outcome(outcome.clone())
            }
        }
    }
}
