//! Fenced sinks: the fence compare a downstream write runs behind.
use super::record::SinkRecord;
use crate::format::V;
use crate::txn::{load, store};
use crate::{Error, Table, Txn, input};

/// The fence compare of a fenced sink; the host runs the body in the same
/// transaction. Equal fences pass so one holder can write in batches.
pub fn sink_advance(tx: &mut impl Txn, resource: &str, presented: u64) -> Result<(), Error> {
    input::id("resource", resource)?;
    input::number("fence", presented)?;
    if presented < sink_seen(tx, resource)? {
        return Err(Error::FenceStale);
    }
    let record = SinkRecord {
        v: V,
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
