//! The side-effect gate's stored records, and the key-state index kept
//! beside them.
//!
//! Two records per effect: the key's (`actions`: fingerprint, attempt,
//! verdict, reconcile claim) and the resource's (`resources`: highest fence,
//! its holder, the hold). A grant writes both in one transaction. Every key
//! is also listed under its phase (`ks/<phase>/<key>` in `indexes`), and a
//! completed key under its completion time (`rt/…`), in the same
//! transaction as the key's record; a key that is or will turn uncertain
//! is also listed under the time it does (`kt/…`), and every change is added
//! to the counts by state ([`crate::count`]).
use serde::{Deserialize, Serialize};

use crate::count::Tally;
use crate::format::{self, V, Version};
use crate::txn::{mark, store};
use crate::{Error, KeyState, RetrySafety, Table, Txn, keys};

/// The reason an expired intent reports.
pub const INTENT_EXPIRED: &str = "intent-expired";

/// A key's record, as the rules use it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct KeyRecord {
    /// The format it was read in (a new record: [`Version::CURRENT`]); only
    /// records a format-2 kernel wrote are in the counts and in `kt/`.
    pub v: Version,
    pub key: String,
    /// Recorded at the first grant, kept for the key's life.
    pub retry_safety: RetrySafety,
    pub fingerprint: Option<String>,
    /// The resource of the latest attempt.
    pub resource: String,
    pub phase: Phase,
    /// A live or expired claim to reconcile; only on uncertain keys (a
    /// verdict or a resolution clears it).
    pub reconcile: Option<Reconcile>,
}

/// Where a key's attempts stand.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    /// No attempt in flight; may be granted.
    Cleared,
    /// An attempt was granted and has no verdict yet (the execution intent).
    /// Expired (`now >= until`) it means uncertain: the holder may have
    /// applied the effect and died before recording it.
    Intent {
        fence: u64,
        holder_sha256: String,
        until: u64,
    },
    /// Marked uncertain by its holder, at `since` (none: marked by a
    /// format-1 kernel, which did not keep the time).
    Uncertain { reason: String, since: Option<u64> },
    /// Applied, with the first recorded result.
    Completed { result: Vec<u8>, at: u64 },
}

impl Phase {
    /// The phase's name in the key-state index.
    pub fn indexed(&self) -> KeyState {
        match self {
            Phase::Cleared => KeyState::Cleared,
            Phase::Intent { .. } => KeyState::InFlight,
            Phase::Uncertain { .. } => KeyState::Uncertain,
            Phase::Completed { .. } => KeyState::Completed,
        }
    }
}

/// A reconcile claim as stored: its digest and deadline.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) struct Reconcile {
    pub claim_sha256: String,
    pub until: u64,
}

impl KeyRecord {
    /// Why the key is uncertain, if it is.
    pub fn uncertain_reason(&self, now: u64) -> Option<&str> {
        match &self.phase {
            Phase::Uncertain { reason, .. } => Some(reason),
            Phase::Intent { until, .. } if now >= *until => Some(INTENT_EXPIRED),
            _ => None,
        }
    }
}

/// The key record on disk: one flat object, readable with `->>`.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
struct KeyRow {
    v: Version,
    key: String,
    retry_safety: RetrySafety,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    fingerprint: Option<String>,
    resource: String,
    state: KeyState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    fence: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    holder_sha256: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    until: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    since: Option<u64>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "optional_base64"
    )]
    result: Option<Vec<u8>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    completed_at: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    reconcile: Option<Reconcile>,
}

mod optional_base64 {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &Option<Vec<u8>>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(bytes) => crate::format::base64::serialize(bytes, s),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<u8>>, D::Error> {
        #[derive(Deserialize)]
        struct Wrap(#[serde(with = "crate::format::base64")] Vec<u8>);
        Ok(Option::<Wrap>::deserialize(d)?.map(|w| w.0))
    }
}

fn missing(what: &str) -> Error {
    Error::storage(format!("corrupt record in actions: {what} is missing"))
}

impl KeyRecord {
    pub fn decode(value: &str) -> Result<KeyRecord, Error> {
        let row: KeyRow = crate::txn::decode(Table::Actions, value)?;
        let phase = match row.state {
            KeyState::Cleared => Phase::Cleared,
            KeyState::InFlight => Phase::Intent {
                fence: row.fence.ok_or_else(|| missing("fence"))?,
                holder_sha256: row.holder_sha256.ok_or_else(|| missing("holder-sha256"))?,
                until: row.until.ok_or_else(|| missing("until"))?,
            },
            KeyState::Uncertain => Phase::Uncertain {
                reason: row.reason.ok_or_else(|| missing("reason"))?,
                since: row.since,
            },
            KeyState::Completed => Phase::Completed {
                result: row.result.ok_or_else(|| missing("result"))?,
                at: row.completed_at.ok_or_else(|| missing("completed-at"))?,
            },
        };
        Ok(KeyRecord {
            v: row.v,
            key: row.key,
            retry_safety: row.retry_safety,
            fingerprint: row.fingerprint,
            resource: row.resource,
            phase,
            reconcile: row.reconcile,
        })
    }

    fn row(&self) -> KeyRow {
        let mut row = KeyRow {
            v: Version::CURRENT,
            key: self.key.clone(),
            retry_safety: self.retry_safety,
            fingerprint: self.fingerprint.clone(),
            resource: self.resource.clone(),
            state: self.phase.indexed(),
            fence: None,
            holder_sha256: None,
            until: None,
            reason: None,
            since: None,
            result: None,
            completed_at: None,
            reconcile: self.reconcile.clone(),
        };
        match &self.phase {
            Phase::Cleared => {}
            Phase::Intent {
                fence,
                holder_sha256,
                until,
            } => {
                row.fence = Some(*fence);
                row.holder_sha256 = Some(holder_sha256.clone());
                row.until = Some(*until);
            }
            Phase::Uncertain { reason, since } => {
                row.reason = Some(reason.clone());
                row.since = *since;
            }
            Phase::Completed { result, at } => {
                row.result = Some(result.clone());
                row.completed_at = Some(*at);
            }
        }
        row
    }
}

/// The value of a key-state index entry: the intent's deadline, so listings
/// can tell live intents from expired ones without reading the key.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) struct KeyStateEntry {
    pub v: V,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<u64>,
}

/// The value of a [`keys::KEY_TIMES`] entry: whether the time is an
/// intent's deadline (`in-flight`) or when the key was marked
/// (`uncertain`).
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) struct KeyTimeEntry {
    pub v: V,
    pub state: KeyState,
}

impl KeyRecord {
    /// Its [`keys::KEY_TIMES`] entry's time and state, if it has one.
    fn timed(&self) -> Option<(u64, KeyState)> {
        match &self.phase {
            Phase::Intent { until, .. } => Some((*until, KeyState::InFlight)),
            Phase::Uncertain {
                since: Some(since), ..
            } => Some((*since, KeyState::Uncertain)),
            _ => None,
        }
    }
}

/// Write `new` and keep the key-state, key-time and retention indexes and
/// the counts exact, given the record it replaces. A key marked uncertain
/// with no time (a format-1 record rewritten) is timed now.
pub(crate) fn write_key(
    tx: &mut impl Txn,
    old: Option<&KeyRecord>,
    new: &KeyRecord,
) -> Result<(), Error> {
    let mut new = new.clone();
    if let Phase::Uncertain {
        since: s @ None, ..
    } = &mut new.phase
    {
        *s = Some(tx.now()?);
    }
    let new = &new;
    // A record a format-1 kernel wrote is neither counted nor timed.
    let counted = old.filter(|o| o.v.0 >= 2);
    let mut tally = Tally::default();
    tally.key(
        counted.map(|o| o.phase.indexed()),
        Some(new.phase.indexed()),
        &new.key,
    );
    tally.flush(tx)?;
    let (was, is) = (counted.and_then(KeyRecord::timed), new.timed());
    if was != is {
        if let Some((at, _)) = was {
            tx.delete(Table::Indexes, &keys::key_time(at, &new.key))?;
        }
        if let Some((at, state)) = is {
            let entry = KeyTimeEntry { v: V, state };
            store(tx, Table::Indexes, &keys::key_time(at, &new.key), &entry)?;
        }
    }
    let (before, after) = (old.map(|o| o.phase.indexed()), new.phase.indexed());
    if let Some(b) = before
        && b != after
    {
        tx.delete(Table::Indexes, &keys::key_state(b, &new.key))?;
    }
    let until = match &new.phase {
        Phase::Intent { until, .. } => Some(*until),
        _ => None,
    };
    if before != Some(after) || until.is_some() {
        let entry = KeyStateEntry { v: V, until };
        store(
            tx,
            Table::Indexes,
            &keys::key_state(after, &new.key),
            &entry,
        )?;
    }
    let finished = |r: &KeyRecord| match r.phase {
        Phase::Completed { at, .. } => Some(at),
        _ => None,
    };
    if let (None, Some(at)) = (old.and_then(finished), finished(new)) {
        mark(tx, &keys::retention(at, keys::Finished::Key, &new.key))?;
    }
    store(tx, Table::Actions, &new.key, &new.row())
}

/// A resource's stored record.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) struct ResourceRecord {
    pub v: V,
    pub resource: String,
    /// The highest fence ever granted on this resource.
    pub fence: u64,
    /// SHA-256 of the holder minted with that fence.
    pub holder_sha256: String,
    /// The key it was granted to.
    pub key: String,
    /// The hold's deadline; none once released.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hold_until: Option<u64>,
}

/// A fenced sink's stored record.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) struct SinkRecord {
    pub v: V,
    pub resource: String,
    pub seen_fence: u64,
}

/// The digest a presented holder or claim is compared by.
pub(crate) fn digest(capability: &str) -> String {
    format::digest(capability)
}
