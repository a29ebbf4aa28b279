//! The commit gate: a run's or a step's terminal outcome is committed once,
//! only by its current holder (SPEC 4, 8 "Commitgate").
use serde::{Deserialize, Serialize};

use crate::format::V;
use crate::keys::{self, outcome as key};
use crate::txn::{decode, load, mark, read_many, store};
use crate::{Error, Outcome, Status, Table, Txn, checkpoint, input};

/// What the outcomes table holds: the outcome plus its address, so an
/// operator reading the table sees which run and step it belongs to, and
/// when it was committed (a run's terminal commit starts its retention).
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
struct Record {
    v: V,
    run_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    step: Option<String>,
    status: Status,
    #[serde(with = "crate::format::base64")]
    result: Vec<u8>,
    committed_at: u64,
}

impl Record {
    fn outcome(&self) -> Outcome {
        Outcome {
            status: self.status,
            result: self.result.clone(),
        }
    }
}

/// Commit the terminal outcome of `(run_id, step)`.
pub fn commit(
    tx: &mut impl Txn,
    run_id: &str,
    step: Option<&str>,
    fence: u64,
    outcome: &Outcome,
) -> Result<Outcome, Error> {
    validate(run_id, step)?;
    input::number("fence", fence)?;
    input::payload("result", &outcome.result)?;
    // One read for everything the decision rests on: the snapshot (its
    // fence), the run's terminal outcome and this outcome.
    let key = key(run_id, step);
    let run_key = keys::outcome(run_id, None);
    let mut found = read_many(
        tx,
        &[
            (Table::Snapshots, run_id),
            (Table::Outcomes, run_key.as_str()),
            (Table::Outcomes, key.as_str()),
        ],
    )?;
    let (snapshot, run_outcome, this) = (found[0].take(), found[1].take(), found[2].take());
    // A zombie owner (lower takeover generation than the snapshot's writer)
    // must not decide the run's fate.
    let persisted = snapshot
        .map(|v| checkpoint::stored_fence(&v))
        .transpose()?
        .flatten();
    if persisted.is_some_and(|persisted| fence < persisted) {
        return Err(Error::FenceStale);
    }
    if step.is_some() && run_outcome.is_some() {
        return Err(Error::Terminal);
    }
    if let Some(first) = this
        .map(|v| decode::<Record>(Table::Outcomes, &v))
        .transpose()?
    {
        return if first.outcome() == *outcome {
            Ok(first.outcome())
        } else {
            Err(Error::AlreadyCommitted)
        };
    }
    let now = tx.now()?;
    let record = Record {
        v: V,
        run_id: run_id.to_owned(),
        step: step.map(str::to_owned),
        status: outcome.status,
        result: outcome.result.clone(),
        committed_at: now,
    };
    store(tx, Table::Outcomes, &key, &record)?;
    if step.is_none() {
        mark(tx, &keys::retention(now, keys::Finished::Run, run_id))?;
    }
    Ok(record.outcome())
}

/// The recorded outcome, or `not-found`.
pub fn read(tx: &mut impl Txn, run_id: &str, step: Option<&str>) -> Result<Outcome, Error> {
    validate(run_id, step)?;
    load::<Record>(tx, Table::Outcomes, &key(run_id, step))?
        .map(|r| r.outcome())
        .ok_or(Error::NotFound)
}

fn validate(run_id: &str, step: Option<&str>) -> Result<(), Error> {
    input::id("run-id", run_id)?;
    step.map_or(Ok(()), |s| input::id("step", s))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::MemTxn;
    use crate::{Snapshot, Status};

    fn ok(bytes: &[u8]) -> Outcome {
        Outcome {
            status: Status::Succeeded,
            result: bytes.to_vec(),
        }
    }

    #[test]
    fn first_outcome_wins() {
        let mut tx = MemTxn::default();
        assert_eq!(commit(&mut tx, "r", Some("s"), 0, &ok(b"1")), Ok(ok(b"1")));
        assert_eq!(commit(&mut tx, "r", Some("s"), 0, &ok(b"1")), Ok(ok(b"1")));
        assert_eq!(
            commit(&mut tx, "r", Some("s"), 0, &ok(b"2")),
            Err(Error::AlreadyCommitted)
        );
        assert_eq!(read(&mut tx, "r", Some("s")), Ok(ok(b"1")));
        assert_eq!(read(&mut tx, "r", None), Err(Error::NotFound));
    }

    #[test]
    fn run_commit_makes_the_run_terminal() {
        let mut tx = MemTxn::default();
        commit(&mut tx, "r", None, 0, &ok(b"")).unwrap();
        assert_eq!(
            commit(&mut tx, "r", Some("s"), 0, &ok(b"")),
            Err(Error::Terminal)
        );
        let snap = Snapshot {
            run_id: "r".into(),
            seq: 1,
            fence: None,
            status: "x".into(),
            done: vec![],
            fields: vec![],
        };
        assert_eq!(
            checkpoint::save_if_newer(&mut tx, &snap),
            Err(Error::Terminal)
        );
    }

    #[test]
    fn zombie_owner_is_fenced_out() {
        let mut tx = MemTxn::default();
        let snap = Snapshot {
            run_id: "r".into(),
            seq: 1,
            fence: Some(3),
            status: "x".into(),
            done: vec![],
            fields: vec![],
        };
        checkpoint::save_if_newer(&mut tx, &snap).unwrap();
        assert_eq!(
            commit(&mut tx, "r", None, 2, &ok(b"")),
            Err(Error::FenceStale)
        );
        assert_eq!(commit(&mut tx, "r", None, 3, &ok(b"")), Ok(ok(b"")));
    }
}
