//! Monotonic progress snapshots (SPEC 3, 8 "Checkpoint").
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::format::V;
use crate::txn::{decode, load, read_many, store};
use crate::{Error, Snapshot, Table, Txn, input};

/// A snapshot as stored: `fields` as a JSON object (keys sorted).
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
struct Record {
    v: V,
    run_id: String,
    seq: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    fence: Option<u64>,
    status: String,
    done: Vec<String>,
    fields: BTreeMap<String, String>,
}

impl Record {
    fn of(snap: &Snapshot) -> Record {
        Record {
            v: V,
            run_id: snap.run_id.clone(),
            seq: snap.seq,
            fence: snap.fence,
            status: snap.status.clone(),
            done: snap.done.clone(),
            fields: snap.fields.iter().cloned().collect(),
        }
    }

    fn snapshot(self) -> Snapshot {
        Snapshot {
            run_id: self.run_id,
            seq: self.seq,
            fence: self.fence,
            status: self.status,
            done: self.done,
            fields: self.fields.into_iter().collect(),
        }
    }
}

fn load_record(tx: &mut impl Txn, run_id: &str) -> Result<Option<Record>, Error> {
    load(tx, Table::Snapshots, run_id)
}

/// The owner fence of a stored snapshot.
pub(crate) fn stored_fence(value: &str) -> Result<Option<u64>, Error> {
    Ok(decode::<Record>(Table::Snapshots, value)?.fence)
}

/// Write `snap` only if it is newer than what is persisted.
///
/// Checks, in order: `invalid-input`, `terminal`, `fence-stale`, `stale-seq`.
/// The owner fence is why a zombie owner whose run was taken over can never
/// write again, even with a larger seq: the new owner saved with a higher
/// takeover generation.
pub fn save_if_newer(tx: &mut impl Txn, snap: &Snapshot) -> Result<(), Error> {
    validate(snap)?;
    // One read: the run's terminal outcome and its snapshot.
    let run_outcome = crate::keys::outcome(&snap.run_id, None);
    let found = read_many(
        tx,
        &[
            (Table::Outcomes, run_outcome.as_str()),
            (Table::Snapshots, snap.run_id.as_str()),
        ],
    )?;
    if found[0].is_some() {
        return Err(Error::Terminal);
    }
    let current = found[1]
        .as_deref()
        .map(|v| decode::<Record>(Table::Snapshots, v))
        .transpose()?;
    if let Some(current) = current {
        if snap.fence.unwrap_or(0) < current.fence.unwrap_or(0) {
            return Err(Error::FenceStale);
        }
        if snap.seq <= current.seq {
            return Err(Error::StaleSeq);
        }
    }
    // seq 0 is never a real commit: letting it land would give it the one
    // write that could later be overwritten by another seq-0 "first" save.
    if snap.seq == 0 {
        return Err(Error::StaleSeq);
    }
    store(tx, Table::Snapshots, &snap.run_id, &Record::of(snap))
}

/// The persisted snapshot, or `not-found` (never an empty one: a run that
/// never ran must not look like "nothing done yet").
pub fn load_snapshot(tx: &mut impl Txn, run_id: &str) -> Result<Snapshot, Error> {
    input::id("run-id", run_id)?;
    load_record(tx, run_id)?
        .map(Record::snapshot)
        .ok_or(Error::NotFound)
}

fn validate(snap: &Snapshot) -> Result<(), Error> {
    input::id("run-id", &snap.run_id)?;
    input::number("seq", snap.seq)?;
    if let Some(fence) = snap.fence {
        input::number("fence", fence)?;
    }
    if snap.status.is_empty() {
        return Err(Error::InvalidInput("status is empty".into()));
    }
    input::text("status", &snap.status, input::MAX_STATUS)?;
    input::ids("done", &snap.done)?;
    let mut size = 0;
    for (i, (key, value)) in snap.fields.iter().enumerate() {
        if i > 0 && snap.fields[i - 1].0 >= *key {
            return Err(Error::InvalidInput(
                "fields must be sorted by key without duplicates".into(),
            ));
        }
        input::no_nul("fields", key)?;
        input::no_nul("fields", value)?;
        size += key.len() + value.len();
    }
    if size > input::MAX_PAYLOAD {
        return Err(Error::InvalidInput("fields are larger than 1 MiB".into()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::MemTxn;

    fn snap(seq: u64, fence: Option<u64>) -> Snapshot {
        Snapshot {
            run_id: "r".into(),
            seq,
            fence,
            status: "running".into(),
            done: vec![],
            fields: vec![],
        }
    }

    #[test]
    fn only_strictly_newer_seq_lands() {
        let mut tx = MemTxn::default();
        save_if_newer(&mut tx, &snap(2, None)).unwrap();
        assert_eq!(save_if_newer(&mut tx, &snap(2, None)), Err(Error::StaleSeq));
        assert_eq!(save_if_newer(&mut tx, &snap(1, None)), Err(Error::StaleSeq));
        assert_eq!(load_snapshot(&mut tx, "r").unwrap().seq, 2);
    }

    #[test]
    fn seq_zero_is_stale_even_first() {
        let mut tx = MemTxn::default();
        assert_eq!(save_if_newer(&mut tx, &snap(0, None)), Err(Error::StaleSeq));
        assert_eq!(load_snapshot(&mut tx, "r"), Err(Error::NotFound));
    }

    #[test]
    fn lower_fence_is_refused_even_with_newer_seq() {
        let mut tx = MemTxn::default();
        save_if_newer(&mut tx, &snap(1, Some(2))).unwrap();
        assert_eq!(
            save_if_newer(&mut tx, &snap(9, Some(1))),
            Err(Error::FenceStale)
        );
        assert_eq!(
            save_if_newer(&mut tx, &snap(9, None)),
            Err(Error::FenceStale)
        );
        // fence-stale is checked before stale-seq
        assert_eq!(
            save_if_newer(&mut tx, &snap(1, Some(1))),
            Err(Error::FenceStale)
        );
    }

    #[test]
    fn unsorted_fields_are_invalid() {
        let mut tx = MemTxn::default();
        let mut s = snap(1, None);
        s.fields = vec![("b".into(), "1".into()), ("a".into(), "2".into())];
        assert!(matches!(
            save_if_newer(&mut tx, &s),
            Err(Error::InvalidInput(_))
        ));
        s.fields = vec![("a".into(), "1".into()), ("a".into(), "2".into())];
        assert!(matches!(
            save_if_newer(&mut tx, &s),
            Err(Error::InvalidInput(_))
        ));
    }
}
