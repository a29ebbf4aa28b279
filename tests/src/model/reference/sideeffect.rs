//! The model's side-effect keys (SPEC 5, 8, 9): grants, the triple check,
//! verdicts, reconciliation, fenced sinks, and a key as an operator sees
//! it.
use gak::{Action, KeyInfo, KeyState, Resolution, Resolved, RetrySafety};

use super::{Hold, Intent, MKey, Model, Mutant, bad_ttl, err};
use crate::model::answer::{AcqV, LeaseV};
use crate::model::{H, Out};

impl Model {
    // ---- side effects (SPEC 5, 8)

    pub(super) fn acquire(&mut self, action: &Action, ttl: u64) -> Out<H> {
        if bad_ttl(ttl) {
            return err("invalid-input");
        }
        let now = self.now;
        if let Some(k) = self.keys.get(&action.key) {
            // 0. one key, one logical action (an absent fingerprint never conflicts)
            if let (Some(recorded), Some(presented)) = (&k.fingerprint, &action.fingerprint)
                && recorded != presented
            {
                return err("key-reused");
            }
            // 1. completed
            if let Some(result) = &k.completed {
                return Out::Acq(AcqV::Replayed(result.clone()));
            }
            // 2. uncertain: marked, or intent expired without a verdict
            if let Some(reason) = &k.marked {
                return Out::Acq(AcqV::Uncertain(reason.clone()));
            }
            if let Some(intent) = &k.intent {
                let expired =
                    now >= intent.until && self.mutant != Some(Mutant::IntentNeverExpires);
                // 3. in flight
                return Out::Acq(if expired {
                    AcqV::Uncertain("intent-expired".into())
                } else {
                    AcqV::InFlight
                });
            }
        }
        // 4. the resource is held by a live lease of another key
        let res = self.resources.entry(action.resource.clone()).or_default();
        if let Some(hold) = &res.hold
            && hold.key != action.key
            && now < hold.until
        {
            return Out::Acq(AcqV::Contended(hold.until));
        }
        // 5. grant
        res.max_fence += 1;
        let fence = res.max_fence;
        let until = now + ttl;
        res.hold = Some(Hold {
            key: action.key.clone(),
            until,
        });
        let holder = self.mint();
        self.grants.insert(
            (action.resource.clone(), fence),
            (action.key.clone(), holder),
        );
        let key = self.keys.entry(action.key.clone()).or_insert_with(|| MKey {
            fingerprint: action.fingerprint.clone(),
            safety: action.retry_safety,
            resource: action.resource.clone(),
            completed_at: None,
            intent: None,
            marked: None,
            completed: None,
            claim: None,
        });
        key.resource.clone_from(&action.resource);
        // A new attempt: no reconciliation of an earlier one carries over.
        key.claim = None;
        key.intent = Some(Intent {
            resource: action.resource.clone(),
            fence,
            until,
        });
        Out::Acq(AcqV::Granted(LeaseV {
            key: action.key.clone(),
            resource: action.resource.clone(),
            fence,
            holder,
            until,
        }))
    }

    /// The triple check: key/resource, newest fence, holder minted at grant.
    fn triple(&self, action: &Action, lease: &LeaseV<H>) -> Result<(), &'static str> {
        if lease.key != action.key || lease.resource != action.resource {
            return Err("resource-mismatch");
        }
        let newest = self
            .resources
            .get(&lease.resource)
            .map_or(0, |r| r.max_fence);
        if newest == 0 || lease.fence != newest {
            return Err("fence-stale");
        }
        // (3) the holder minted at the grant of this key: a genuine fence
        // and holder relabelled with another key is a forged lease.
        match self.grants.get(&(lease.resource.clone(), lease.fence)) {
            Some((key, holder)) if *holder == lease.holder && *key == lease.key => Ok(()),
            _ => Err("not-holder"),
        }
    }

    /// The lease's attempt has no verdict yet (its intent is the key's).
    fn attempt_open(&self, lease: &LeaseV<H>) -> bool {
        self.keys
            .get(&lease.key)
            .and_then(|k| k.intent.as_ref())
            .is_some_and(|i| i.resource == lease.resource && i.fence == lease.fence)
    }

    /// Release the resource's hold (after a passed triple check it is this
    /// lease's, if any).
    fn drop_hold(&mut self, resource: &str) {
        if let Some(r) = self.resources.get_mut(resource) {
            r.hold = None;
        }
    }

    fn key_mut(&mut self, key: &str) -> &mut MKey {
        self.keys.get_mut(key).expect("a granted key is recorded")
    }

    pub(super) fn complete(&mut self, action: &Action, lease: &LeaseV<H>, result: &[u8]) -> Out<H> {
        if let Err(e) = self.triple(action, lease) {
            return err(e);
        }
        if let Some(first) = self.keys.get(&lease.key).and_then(|k| k.completed.clone()) {
            // SPEC 8: once the attempt has a verdict, its lease's `complete`
            // on a completed key gets the first result, and nothing else
            // happens (only `release` frees a hold mark-uncertain left).
            return Out::Bytes(first);
        }
        if !self.attempt_open(lease) {
            return err("not-holder");
        }
        let now = self.now;
        let key = self.key_mut(&lease.key);
        key.completed = Some(result.to_vec());
        key.completed_at = Some(now);
        key.intent = None;
        // The holder's late verdict ends any reconciliation (a reading of
        // the SPEC: see `crate::model`).
        key.claim = None;
        self.drop_hold(&lease.resource);
        Out::Bytes(result.to_vec())
    }

    pub(super) fn release(&mut self, action: &Action, lease: &LeaseV<H>) -> Out<H> {
        if let Err(e) = self.triple(action, lease) {
            return err(e);
        }
        self.drop_hold(&lease.resource);
        Out::Unit
    }

    pub(super) fn abandon(&mut self, action: &Action, lease: &LeaseV<H>) -> Out<H> {
        if let Err(e) = self.triple(action, lease) {
            return err(e);
        }
        if !self.attempt_open(lease) {
            return err("not-holder");
        }
        let key = self.key_mut(&lease.key);
        key.intent = None;
        key.claim = None;
        self.drop_hold(&lease.resource);
        Out::Unit
    }

    pub(super) fn renew(&mut self, action: &Action, lease: &LeaseV<H>, ttl: u64) -> Out<H> {
        if bad_ttl(ttl) {
            return err("invalid-input");
        }
        if let Err(e) = self.triple(action, lease) {
            return err(e);
        }
        if !self.attempt_open(lease) {
            return err("not-holder");
        }
        let now = self.now;
        let until = now + ttl;
        let res = self.resources.get_mut(&lease.resource).expect("granted");
        match &mut res.hold {
            Some(hold) if now < hold.until => hold.until = until,
            _ => return err("lease-expired"),
        }
        self.key_mut(&lease.key)
            .intent
            .as_mut()
            .expect("open attempt")
            .until = until;
        Out::Lease(LeaseV {
            until,
            ..lease.clone()
        })
    }

    pub(super) fn mark(&mut self, action: &Action, lease: &LeaseV<H>, reason: &str) -> Out<H> {
        if let Err(e) = self.triple(action, lease) {
            return err(e);
        }
        if !self.attempt_open(lease) {
            return err("not-holder");
        }
        let key = self.key_mut(&lease.key);
        key.marked = Some(reason.to_owned());
        key.intent = None;
        Out::Unit
    }

    fn uncertain(&self, key: &MKey) -> bool {
        key.completed.is_none()
            && (key.marked.is_some() || key.intent.as_ref().is_some_and(|i| self.now >= i.until))
    }

    pub(super) fn begin(&mut self, action: &Action, ttl: u64) -> Out<H> {
        if bad_ttl(ttl) {
            return err("invalid-input");
        }
        let now = self.now;
        match self.keys.get(&action.key) {
            Some(k) if self.uncertain(k) => {
                if k.claim.is_some_and(|until| now < until) {
                    return err("reconcile-taken");
                }
            }
            _ => return err("not-uncertain"),
        }
        let claim = self.mint();
        self.key_mut(&action.key).claim = Some(now + ttl);
        Out::Claim {
            claim,
            until: now + ttl,
        }
    }

    pub(super) fn resolve(&mut self, action: &Action, resolution: &Resolution) -> Out<H> {
        let now = self.now;
        let Some(k) = self.keys.get(&action.key) else {
            return err("not-uncertain");
        };
        if let Some(first) = &k.completed {
            return Out::Resolved(Resolved::Replayed(first.clone()));
        }
        if !self.uncertain(k) {
            return err("not-uncertain");
        }
        if !resolution.applied && k.safety == RetrySafety::Unsafe && !resolution.force_retryable {
            return err("unsafe-not-retryable");
        }
        let key = self.key_mut(&action.key);
        key.intent = None;
        key.marked = None;
        key.claim = None;
        if resolution.applied {
            let result = resolution.result.clone().unwrap_or_default();
            key.completed = Some(result.clone());
            key.completed_at = Some(now);
            Out::Resolved(Resolved::Replayed(result))
        } else {
            Out::Resolved(Resolved::Cleared)
        }
    }

    pub(super) fn sink(
        &mut self,
        resource: &str,
        presented: u64,
        fail: bool,
        marker: &str,
    ) -> Out<H> {
        let stale_ok = self.mutant == Some(Mutant::SinkAcceptsStale);
        let (seen, mark) = self.sinks.entry(resource.to_owned()).or_insert((0, None));
        if presented < *seen && !stale_ok {
            return err("fence-stale");
        }
        if fail {
            return err("write-failed");
        }
        *seen = presented;
        *mark = Some(marker.to_owned());
        Out::Unit
    }

    /// SPEC 9: a key as `sideeffect.get` shows it: an expired intent is
    /// `uncertain` (`intent-expired`); a reconcile claim only while live.
    pub(super) fn key_info(&self, key: &str) -> Out<H> {
        let Some(k) = self.keys.get(key) else {
            return err("not-found");
        };
        let now = self.now;
        let mut info = KeyInfo {
            key: key.to_owned(),
            state: KeyState::Cleared,
            retry_safety: k.safety,
            fingerprint: k.fingerprint.clone(),
            resource: k.resource.clone(),
            until: None,
            reason: None,
            completed_at: None,
            reconciling_until: k.claim.filter(|until| now < *until),
        };
        if k.completed.is_some() {
            info.state = KeyState::Completed;
            info.completed_at = k.completed_at;
        } else if let Some(reason) = &k.marked {
            info.state = KeyState::Uncertain;
            info.reason = Some(reason.clone());
        } else if let Some(intent) = &k.intent {
            info.until = Some(intent.until);
            if now >= intent.until {
                info.state = KeyState::Uncertain;
                info.reason = Some("intent-expired".into());
            } else {
                info.state = KeyState::InFlight;
            }
        }
        Out::Key(info)
    }
}
