//! The side-effect gate: idempotency keys, per-resource fencing, uncertain
//! state and reconciliation, fenced sinks (SPEC 5, 8 "Side effect").
//!
//! Two records per effect: the key's (`actions`: fingerprint, attempt,
//! verdict, reconcile claim) and the resource's (`resources`: highest fence,
//! its holder, the hold). A grant writes both in one transaction.
use serde::{Deserialize, Serialize};

use crate::txn::{decode, load, mint, store};
use crate::{
    Acquired, Action, Error, Lease, ReconcileClaim, Resolution, Resolved, RetrySafety, Table, Txn,
    input,
};

/// The reason an expired intent reports.
pub const INTENT_EXPIRED: &str = "intent-expired";

/// A key's stored record.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct KeyRecord {
    key: String,
    /// Recorded at the first grant, kept for the key's life.
    retry_safety: RetrySafety,
    fingerprint: Option<String>,
    state: KeyState,
    /// A live or expired claim to reconcile; only on uncertain keys.
    reconcile: Option<ReconcileClaim>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "state")]
enum KeyState {
    /// No attempt in flight; may be granted.
    Cleared,
    /// An attempt was granted and has no verdict yet (the execution intent).
    /// Expired (`now >= until`) it means uncertain: the holder may have
    /// applied the effect and died before recording it.
    Intent {
        resource: String,
        fence: u64,
        holder: String,
        until: u64,
    },
    /// Marked uncertain by its holder.
    Uncertain { reason: String },
    /// Applied, with the first recorded result.
    Completed { result: Vec<u8> },
}

/// A resource's stored record.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct ResourceRecord {
    resource: String,
    /// The highest fence ever granted on this resource.
    fence: u64,
    /// The holder minted with that fence.
    holder: String,
    /// The key it was granted to.
    key: String,
    /// The hold's deadline; none once released.
    hold_until: Option<u64>,
}

impl KeyRecord {
    /// Why the key is uncertain, if it is.
    fn uncertain_reason(&self, now: u64) -> Option<&str> {
        match &self.state {
            KeyState::Uncertain { reason } => Some(reason),
            KeyState::Intent { until, .. } if now >= *until => Some(INTENT_EXPIRED),
            _ => None,
        }
    }
}

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

/// One atomic decision, in the spec's precedence. Getting the order wrong
/// re-opens double application: e.g. granting on an expired intent would let
/// a second worker apply an effect the first one applied before dying.
pub fn acquire(tx: &mut impl Txn, action: &Action, ttl: u64) -> Result<Acquired, Error> {
    validate_action(action)?;
    input::ttl(ttl)?;
    let now = tx.now();
    let found = tx.get_many(&[
        (Table::Actions, action.key.as_str()),
        (Table::Resources, action.resource.as_str()),
    ])?;
    let record: Option<KeyRecord> = found[0]
        .as_deref()
        .map(|v| decode(Table::Actions, v))
        .transpose()?;
    let resource: Option<ResourceRecord> = found[1]
        .as_deref()
        .map(|v| decode(Table::Resources, v))
        .transpose()?;

    if let Some(rec) = &record {
        if let (Some(first), Some(now_fp)) = (&rec.fingerprint, &action.fingerprint)
            && first != now_fp
        {
            return Err(Error::KeyReused);
        }
        if let KeyState::Completed { result } = &rec.state {
            return Ok(Acquired::Replayed(result.clone()));
        }
        if let Some(reason) = rec.uncertain_reason(now) {
            return Ok(Acquired::Uncertain(reason.to_owned()));
        }
        if matches!(rec.state, KeyState::Intent { .. }) {
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
    let holder = mint(tx);
    let until = now.saturating_add(ttl);
    let (retry_safety, fingerprint) = match &record {
        Some(rec) => (rec.retry_safety, rec.fingerprint.clone()),
        None => (action.retry_safety, action.fingerprint.clone()),
    };
    let key_record = KeyRecord {
        key: action.key.clone(),
        retry_safety,
        fingerprint,
        state: KeyState::Intent {
            resource: action.resource.clone(),
            fence,
            holder: holder.clone(),
            until,
        },
        reconcile: None,
    };
    let resource_record = ResourceRecord {
        resource: action.resource.clone(),
        fence,
        holder: holder.clone(),
        key: action.key.clone(),
        hold_until: Some(until),
    };
    store(tx, Table::Resources, &action.resource, &resource_record)?;
    store(tx, Table::Actions, &action.key, &key_record)?;
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
}

impl Checked {
    /// Is the lease's attempt still without a verdict?
    fn attempt_live(&self, lease: &Lease) -> bool {
        matches!(&self.key, Some(KeyRecord { state: KeyState::Intent { fence, holder, .. }, .. })
            if *fence == lease.fence && *holder == lease.holder)
    }

    fn completed_result(&self) -> Option<&[u8]> {
        match &self.key {
            Some(KeyRecord {
                state: KeyState::Completed { result },
                ..
            }) => Some(result),
            _ => None,
        }
    }
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
    let found = tx.get_many(&[
        (Table::Actions, action.key.as_str()),
        (Table::Resources, action.resource.as_str()),
    ])?;
    let resource: ResourceRecord = match &found[1] {
        Some(v) => decode(Table::Resources, v)?,
        None => return Err(Error::FenceStale),
    };
    if resource.fence != lease.fence {
        return Err(Error::FenceStale);
    }
    // The holder minted at *this key's* grant: a genuine fence and holder
    // relabelled with another key is a forged lease, not that key's.
    if resource.holder != lease.holder || resource.key != lease.key {
        return Err(Error::NotHolder);
    }
    let key = found[0]
        .as_deref()
        .map(|v| decode(Table::Actions, v))
        .transpose()?;
    Ok(Checked { key, resource })
}

/// Write the key's new state and drop the hold if this lease holds it.
fn settle(
    tx: &mut impl Txn,
    checked: Checked,
    state: KeyState,
    release_hold: bool,
) -> Result<(), Error> {
    let mut key = checked.key.expect("a live attempt has a key record");
    key.state = state;
    store(tx, Table::Actions, &key.key.clone(), &key)?;
    if release_hold && checked.resource.hold_until.is_some() {
        let mut resource = checked.resource;
        resource.hold_until = None;
        store(tx, Table::Resources, &resource.resource.clone(), &resource)?;
    }
    Ok(())
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
    let result = result.to_vec();
    settle(
        tx,
        checked,
        KeyState::Completed {
            result: result.clone(),
        },
        true,
    )?;
    Ok(result)
}

/// Release the resource hold only. The intent stays: a holder that applied
/// the effect and died before recording it must surface as uncertain, never
/// as a key that can be granted again.
pub fn release(tx: &mut impl Txn, action: &Action, lease: &Lease) -> Result<(), Error> {
    let checked = triple_check(tx, action, lease)?;
    if checked.resource.hold_until.is_some() {
        let mut resource = checked.resource;
        resource.hold_until = None;
        store(tx, Table::Resources, &action.resource, &resource)?;
    }
    Ok(())
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
    settle(tx, checked, KeyState::Cleared, true)
}

/// A qualification check, not a heartbeat: a holder that lost its hold must
/// stop, not silently extend a lease someone else may now rely on.
pub fn renew(tx: &mut impl Txn, action: &Action, lease: &Lease, ttl: u64) -> Result<Lease, Error> {
    input::ttl(ttl)?;
    let checked = triple_check(tx, action, lease)?;
    if !checked.attempt_live(lease) {
        return Err(Error::NotHolder);
    }
    let now = tx.now();
    if checked.resource.hold_until.is_none_or(|until| now >= until) {
        return Err(Error::LeaseExpired);
    }
    let until = now.saturating_add(ttl);
    let mut resource = checked.resource;
    resource.hold_until = Some(until);
    let mut key = checked.key.expect("a live attempt has a key record");
    if let KeyState::Intent { until: u, .. } = &mut key.state {
        *u = until;
    }
    store(tx, Table::Resources, &action.resource, &resource)?;
    store(tx, Table::Actions, &action.key, &key)?;
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
    settle(
        tx,
        checked,
        KeyState::Uncertain {
            reason: reason.to_owned(),
        },
        false,
    )
}

fn uncertain_key(tx: &mut impl Txn, action: &Action) -> Result<Option<KeyRecord>, Error> {
    validate_action(action)?;
    load(tx, Table::Actions, &action.key)
}

/// Claim the right to reconcile an uncertain key; one reconciler at a time.
pub fn begin_reconcile(
    tx: &mut impl Txn,
    action: &Action,
    ttl: u64,
) -> Result<ReconcileClaim, Error> {
    input::ttl(ttl)?;
    let mut record = uncertain_key(tx, action)?.ok_or(Error::NotUncertain)?;
    let now = tx.now();
    if record.uncertain_reason(now).is_none() {
        return Err(Error::NotUncertain);
    }
    if record.reconcile.as_ref().is_some_and(|c| now < c.until) {
        return Err(Error::ReconcileTaken);
    }
    let claim = ReconcileClaim {
        claim: mint(tx),
        until: now.saturating_add(ttl),
    };
    record.reconcile = Some(claim.clone());
    store(tx, Table::Actions, &action.key, &record)?;
    Ok(claim)
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
    let mut record = uncertain_key(tx, action)?.ok_or(Error::NotUncertain)?;
    if let KeyState::Completed { result } = &record.state {
        return Ok(Resolved::Replayed(result.clone()));
    }
    let now = tx.now();
    if record.uncertain_reason(now).is_none() {
        return Err(Error::NotUncertain);
    }
    let resolved = if resolution.applied {
        let result = resolution.result.clone().unwrap_or_default();
        record.state = KeyState::Completed {
            result: result.clone(),
        };
        Resolved::Replayed(result)
    } else {
        // Retrying an unsafe effect that might have happened is exactly the
        // double application this kernel exists to prevent: only an explicit
        // override may reopen it.
        if record.retry_safety == RetrySafety::Unsafe && !resolution.force_retryable {
            return Err(Error::UnsafeNotRetryable);
        }
        record.state = KeyState::Cleared;
        Resolved::Cleared
    };
    record.reconcile = None;
    store(tx, Table::Actions, &action.key, &record)?;
    Ok(resolved)
}

/// A fenced sink's stored record.
#[derive(Serialize, Deserialize)]
struct SinkRecord {
    resource: String,
    seen_fence: u64,
}

/// The fence compare of a fenced sink; the host runs the body in the same
/// transaction. Equal fences pass so one holder can write in batches.
pub fn sink_advance(tx: &mut impl Txn, resource: &str, presented: u64) -> Result<(), Error> {
    input::id("resource", resource)?;
    input::number("fence", presented)?;
    if presented < sink_seen(tx, resource)? {
        return Err(Error::FenceStale);
    }
    let record = SinkRecord {
        resource: resource.to_owned(),
        seen_fence: presented,
    };
    store(tx, Table::Sinks, resource, &record)
}

/// The highest fence the sink has seen, 0 when never written.
pub fn sink_seen(tx: &mut impl Txn, resource: &str) -> Result<u64, Error> {
    input::id("resource", resource)?;
    Ok(load::<SinkRecord>(tx, Table::Sinks, resource)?.map_or(0, |r| r.seen_fence))
}

#[cfg(test)]
mod tests;
