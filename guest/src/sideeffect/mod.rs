//! The side-effect gate: idempotency keys, per-resource fencing, uncertain
//! state and reconciliation, fenced sinks (SPEC 5, 8 "Side effect"), and the
//! operators' listings of keys by state (SPEC 9).
use crate::format::{V, Version};
use crate::txn::{decode, mint, read_many, store};
use crate::{
    Acquired, Action, Error, Lease, ReconcileClaim, Resolution, Resolved, RetrySafety, Table, Txn,
    input,
};

mod count;
mod list;
mod record;
mod sink;

pub use count::{count, recount};
pub use list::{get, list};
pub use record::INTENT_EXPIRED;
pub(crate) use record::{KeyRecord, Phase, write_key};
use record::{Reconcile, ResourceRecord, digest};
pub use sink::{sink_advance, sink_seen};

fn validate_action(action: &Action) -> Result<(), Error> {
    input::id("key", &action.key)?;
    input::id("resource", &action.resource)?;
    if let Some(fp) = &action.fingerprint {
        input::id("fingerprint", fp)?;
    }
    Ok(())
}

fn validate_lease(lease: &Lease) -> Result<(), Error> {
    // A malformed lease (fence 0, forged holder) fails the triple check; only
    // numbers no host language can hold exactly are refused up front.
    input::number("lease fence", lease.fence)
}

fn decode_resource(value: &str) -> Result<ResourceRecord, Error> {
    decode(Table::Resources, value)
}

/// One atomic decision, in the spec's precedence. Getting the order wrong
/// re-opens double application: e.g. granting on an expired intent would let
/// a second worker apply an effect the first one applied before dying.
pub fn acquire(tx: &mut impl Txn, action: &Action, ttl: u64) -> Result<Acquired, Error> {
    validate_action(action)?;
    input::ttl(ttl)?;
    let found = read_many(
        tx,
        &[
            (Table::Actions, action.key.as_str()),
            (Table::Resources, action.resource.as_str()),
        ],
    )?;
    // The clock after the reads: with a binding that locks on read, expiry
    // is judged at an instant no older than the state it is judged on.
    let now = tx.now()?;
    let record = found[0].as_deref().map(KeyRecord::decode).transpose()?;
    let resource = found[1].as_deref().map(decode_resource).transpose()?;

    if let Some(rec) = &record {
        if let (Some(first), Some(now_fp)) = (&rec.fingerprint, &action.fingerprint)
            && first != now_fp
        {
            return Err(Error::KeyReused);
        }
        if let Phase::Completed { result, .. } = &rec.phase {
            return Ok(Acquired::Replayed(result.clone()));
        }
        if let Some(reason) = rec.uncertain_reason(now) {
            return Ok(Acquired::Uncertain(reason.to_owned()));
        }
        if matches!(rec.phase, Phase::Intent { .. }) {
            return Ok(Acquired::InFlight);
        }
    }
    if let Some(res) = &resource
        && let Some(until) = res.hold_until
        && now < until
        && res.key != action.key
    {
        return Ok(Acquired::Contended(until));
    }

    let fence = resource.as_ref().map_or(0, |r| r.fence) + 1;
    let (holder, holder_sha256) = mint(tx)?;
    let until = now.saturating_add(ttl);
    let (retry_safety, fingerprint) = match &record {
        Some(rec) => (rec.retry_safety, rec.fingerprint.clone()),
        None => (action.retry_safety, action.fingerprint.clone()),
    };
    let key_record = KeyRecord {
        v: Version::CURRENT,
        key: action.key.clone(),
        retry_safety,
        fingerprint,
        resource: action.resource.clone(),
        phase: Phase::Intent {
            fence,
            holder_sha256: holder_sha256.clone(),
            until,
        },
        reconcile: None,
    };
    let resource_record = ResourceRecord {
        v: V,
        resource: action.resource.clone(),
        fence,
        holder_sha256,
        key: action.key.clone(),
        hold_until: Some(until),
    };
    store(tx, Table::Resources, &action.resource, &resource_record)?;
    write_key(tx, record.as_ref(), &key_record)?;
    Ok(Acquired::Granted(Lease {
        key: action.key.clone(),
        resource: action.resource.clone(),
        fence,
        holder,
        until,
    }))
}

/// What a lease that passed the triple check is dealing with.
struct Checked {
    key: Option<KeyRecord>,
    resource: ResourceRecord,
    holder_sha256: String,
}

impl Checked {
    /// Is the lease's attempt still without a verdict?
    fn attempt_live(&self, lease: &Lease) -> bool {
        matches!(&self.key, Some(KeyRecord { phase: Phase::Intent { fence, holder_sha256, .. }, .. })
            if *fence == lease.fence && *holder_sha256 == self.holder_sha256)
    }

    fn completed_result(&self) -> Option<&[u8]> {
        match &self.key {
            Some(KeyRecord {
                phase: Phase::Completed { result, .. },
                ..
            }) => Some(result),
            _ => None,
        }
    }

    /// Give the live attempt its verdict, and drop the hold if asked. A
    /// verdict that settles the key (complete, abandon) also ends any
    /// reconciliation of it: the key is no longer uncertain.
    fn settle(self, tx: &mut impl Txn, phase: Phase, release_hold: bool) -> Result<(), Error> {
        let old = self.key.expect("a live attempt has a key record");
        let reconcile = match phase {
            Phase::Completed { .. } | Phase::Cleared => None,
            _ => old.reconcile.clone(),
        };
        let new = KeyRecord {
            phase,
            reconcile,
            ..old.clone()
        };
        write_key(tx, Some(&old), &new)?;
        if release_hold {
            release_hold_of(tx, self.resource)?;
        }
        Ok(())
    }
}

fn release_hold_of(tx: &mut impl Txn, mut resource: ResourceRecord) -> Result<(), Error> {
    if resource.hold_until.is_some() {
        resource.hold_until = None;
        store(tx, Table::Resources, &resource.resource.clone(), &resource)?;
    }
    Ok(())
}

/// The triple check, in this order: key and resource match the action
/// (`resource-mismatch`), the fence is the resource's newest (`fence-stale`),
/// the holder is the one minted at grant (`not-holder`).
fn triple_check(tx: &mut impl Txn, action: &Action, lease: &Lease) -> Result<Checked, Error> {
    validate_action(action)?;
    validate_lease(lease)?;
    if lease.key != action.key || lease.resource != action.resource {
        return Err(Error::ResourceMismatch);
    }
    let found = read_many(
        tx,
        &[
            (Table::Actions, action.key.as_str()),
            (Table::Resources, action.resource.as_str()),
        ],
    )?;
    let resource = match &found[1] {
        Some(v) => decode_resource(v)?,
        None => return Err(Error::FenceStale),
    };
    if resource.fence != lease.fence {
        return Err(Error::FenceStale);
    }
    // The holder minted at *this key's* grant: a genuine fence and holder
    // relabelled with another key is a forged lease, not that key's.
    let holder_sha256 = digest(&lease.holder);
    if resource.holder_sha256 != holder_sha256 || resource.key != lease.key {
        return Err(Error::NotHolder);
    }
    let key = found[0].as_deref().map(KeyRecord::decode).transpose()?;
    Ok(Checked {
        key,
        resource,
        holder_sha256,
    })
}

/// Record the key completed with `result`; the first result wins.
pub fn complete(
    tx: &mut impl Txn,
    action: &Action,
    lease: &Lease,
    result: &[u8],
) -> Result<Vec<u8>, Error> {
    input::payload("result", result)?;
    let checked = triple_check(tx, action, lease)?;
    if let Some(first) = checked.completed_result() {
        return Ok(first.to_vec());
    }
    if !checked.attempt_live(lease) {
        return Err(Error::NotHolder);
    }
    let at = tx.now()?;
    let result = result.to_vec();
    let phase = Phase::Completed {
        result: result.clone(),
        at,
    };
    checked.settle(tx, phase, true)?;
    Ok(result)
}

/// Release the resource hold only. The intent stays: a holder that applied
/// the effect and died before recording it must surface as uncertain, never
/// as a key that can be granted again.
pub fn release(tx: &mut impl Txn, action: &Action, lease: &Lease) -> Result<(), Error> {
    let checked = triple_check(tx, action, lease)?;
    release_hold_of(tx, checked.resource)
}

/// The attempt definitely did not apply: withdraw the intent, release the
/// hold. The key keeps its fingerprint and retry-safety.
pub fn abandon(
    tx: &mut impl Txn,
    action: &Action,
    lease: &Lease,
    reason: &str,
) -> Result<(), Error> {
    input::reason(reason)?;
    let checked = triple_check(tx, action, lease)?;
    if !checked.attempt_live(lease) {
        return Err(Error::NotHolder);
    }
    checked.settle(tx, Phase::Cleared, true)
}

/// A qualification check, not a heartbeat: a holder that lost its hold must
/// stop, not silently extend a lease someone else may now rely on.
pub fn renew(tx: &mut impl Txn, action: &Action, lease: &Lease, ttl: u64) -> Result<Lease, Error> {
    input::ttl(ttl)?;
    let checked = triple_check(tx, action, lease)?;
    if !checked.attempt_live(lease) {
        return Err(Error::NotHolder);
    }
    let now = tx.now()?;
    if checked.resource.hold_until.is_none_or(|until| now >= until) {
        return Err(Error::LeaseExpired);
    }
    let until = now.saturating_add(ttl);
    let mut resource = checked.resource;
    resource.hold_until = Some(until);
    let old = checked.key.expect("a live attempt has a key record");
    let mut new = old.clone();
    if let Phase::Intent { until: u, .. } = &mut new.phase {
        *u = until;
    }
    store(tx, Table::Resources, &action.resource, &resource)?;
    write_key(tx, Some(&old), &new)?;
    Ok(Lease {
        until,
        ..lease.clone()
    })
}

/// Mark the key uncertain, withdrawing the intent in the same write. The
/// hold is kept: the caller releases it (the seed's flow).
pub fn mark_uncertain(
    tx: &mut impl Txn,
    action: &Action,
    lease: &Lease,
    reason: &str,
) -> Result<(), Error> {
    input::reason(reason)?;
    let checked = triple_check(tx, action, lease)?;
    if !checked.attempt_live(lease) {
        return Err(Error::NotHolder);
    }
    let phase = Phase::Uncertain {
        reason: reason.to_owned(),
        since: Some(tx.now()?),
    };
    checked.settle(tx, phase, false)
}

fn uncertain_key(tx: &mut impl Txn, action: &Action) -> Result<Option<KeyRecord>, Error> {
    validate_action(action)?;
    tx.get(Table::Actions, &action.key)?
        .as_deref()
        .map(KeyRecord::decode)
        .transpose()
}

/// Claim the right to reconcile an uncertain key; one reconciler at a time.
pub fn begin_reconcile(
    tx: &mut impl Txn,
    action: &Action,
    ttl: u64,
) -> Result<ReconcileClaim, Error> {
    input::ttl(ttl)?;
    let old = uncertain_key(tx, action)?.ok_or(Error::NotUncertain)?;
    let now = tx.now()?;
    if old.uncertain_reason(now).is_none() {
        return Err(Error::NotUncertain);
    }
    if old.reconcile.as_ref().is_some_and(|c| now < c.until) {
        return Err(Error::ReconcileTaken);
    }
    let (claim, claim_sha256) = mint(tx)?;
    let until = now.saturating_add(ttl);
    let new = KeyRecord {
        reconcile: Some(Reconcile {
            claim_sha256,
            until,
        }),
        ..old.clone()
    };
    write_key(tx, Some(&old), &new)?;
    Ok(ReconcileClaim { claim, until })
}

/// Record a verdict from downstream facts. No fence check: the original
/// holder may be long dead. The first verdict wins.
pub fn resolve_uncertain(
    tx: &mut impl Txn,
    action: &Action,
    resolution: &Resolution,
) -> Result<Resolved, Error> {
    if let Some(result) = &resolution.result {
        input::payload("result", result)?;
    }
    if let Some(claim) = &resolution.claim {
        input::id("claim", claim)?;
    }
    let old = uncertain_key(tx, action)?.ok_or(Error::NotUncertain)?;
    if let Phase::Completed { result, .. } = &old.phase {
        return Ok(Resolved::Replayed(result.clone()));
    }
    let now = tx.now()?;
    if old.uncertain_reason(now).is_none() {
        return Err(Error::NotUncertain);
    }
    // A verdict given under a claim that is no longer the key's (taken over
    // after it expired) rests on an investigation someone else redid.
    if let Some(claim) = &resolution.claim
        && old.reconcile.as_ref().map(|r| r.claim_sha256.as_str()) != Some(digest(claim).as_str())
    {
        return Err(Error::ReconcileTaken);
    }
    let (phase, resolved) = if resolution.applied {
        let result = resolution.result.clone().unwrap_or_default();
        let phase = Phase::Completed {
            result: result.clone(),
            at: now,
        };
        (phase, Resolved::Replayed(result))
    } else {
        // Retrying an unsafe effect that might have happened is exactly the
        // double application this kernel exists to prevent: only an explicit
        // override may reopen it.
        if old.retry_safety == RetrySafety::Unsafe && !resolution.force_retryable {
            return Err(Error::UnsafeNotRetryable);
        }
        (Phase::Cleared, Resolved::Cleared)
    };
    let new = KeyRecord {
        phase,
        reconcile: None,
        ..old.clone()
    };
    write_key(tx, Some(&old), &new)?;
    Ok(resolved)
}

#[cfg(test)]
mod tests;
