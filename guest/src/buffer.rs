//! The store's 0.3 shape: a call reads in batches and hands over its whole
//! write set once, when it decides `ok` (WIT `store.read` / `store.write`).
//!
//! The rules are written against [`Txn`] (one read or write at a time, in
//! whatever order a rule finds natural). [`Buffered`] turns that into the
//! few crossings the store import costs: writes stay in an [`Overlay`]
//! that later reads see, the clock and the call's entropy come with the
//! first read, and [`Buffered::finish`] hands the write set over in one
//! [`Store::write`]. The component runs every exported call through it;
//! `gak bench`'s native path does too, so `kernel / native` still measures
//! only the WebAssembly boundary.
use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::ops::Bound;

use crate::{StoreFault, Table, Txn};

/// The store crossing's records (WIT `store.range`, `reads`, `answers`,
/// `change`), generated from the WIT.
pub use crate::contract::store::{Answers, Change, Probe, Range, Reads};

/// What the store import offers one call.
pub trait Store {
    /// Everything in `reads`, in one crossing.
    fn read(&mut self, reads: Reads) -> Result<Answers, StoreFault>;
    /// The call's write set (every key once), in one crossing.
    fn write(&mut self, changes: Vec<Change>) -> Result<(), StoreFault>;
    /// Point reads that pass over keys an overlapping transaction holds
    /// (WIT `store.try-read`), in one crossing. By default every key is
    /// read as [`Store::read`] reads it: a store whose transactions exclude
    /// each other never holds one.
    fn try_read(&mut self, keys: Vec<(Table, String)>) -> Result<Vec<Probe>, StoreFault> {
        let answers = self.read(Reads {
            keys,
            ..Reads::default()
        })?;
        Ok(answers.values.into_iter().map(Probe::Found).collect())
    }
}

impl<S: Store + ?Sized> Store for &mut S {
    fn read(&mut self, reads: Reads) -> Result<Answers, StoreFault> {
        (**self).read(reads)
    }
    fn write(&mut self, changes: Vec<Change>) -> Result<(), StoreFault> {
        (**self).write(changes)
    }
    fn try_read(&mut self, keys: Vec<(Table, String)>) -> Result<Vec<Probe>, StoreFault> {
        (**self).try_read(keys)
    }
}

/// Pending writes of a transaction, by table and key (`None`: deleted).
/// Sorted, so a write set comes out in one stable order (which is also the
/// order PostgreSQL takes its locks in): a map per table, keyed by
/// [`Key`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Overlay<T: Ord + Copy = Table> {
    entries: BTreeMap<T, BTreeMap<Key, Option<String>>>,
}

/// A key that sorts by its UTF-8 bytes, as `String` does, comparing eight
/// bytes at a time. In the component `memcmp` is a loop over single bytes,
/// and the keys of one write set share long prefixes (`ts/claimed/job-…`):
/// measured, it was a fifth of a batch drain's time in WebAssembly.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Key(String);

impl Ord for Key {
    fn cmp(&self, other: &Self) -> Ordering {
        bytewise(self.0.as_bytes(), other.0.as_bytes())
    }
}

impl PartialOrd for Key {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// `a.cmp(b)` for byte strings, a word at a time: two words compare as
/// big-endian integers exactly as their bytes compare in order.
fn bytewise(a: &[u8], b: &[u8]) -> Ordering {
    let (mut a, mut b) = (a, b);
    while let (Some((x, rest_a)), Some((y, rest_b))) =
        (a.split_first_chunk::<8>(), b.split_first_chunk::<8>())
    {
        if x != y {
            return u64::from_be_bytes(*x).cmp(&u64::from_be_bytes(*y));
        }
        (a, b) = (rest_a, rest_b);
    }
    for (x, y) in a.iter().zip(b) {
        if x != y {
            return x.cmp(y);
        }
    }
    a.len().cmp(&b.len())
}

impl<T: Ord + Copy> Default for Overlay<T> {
    fn default() -> Self {
        Overlay {
            entries: BTreeMap::new(),
        }
    }
}

impl<T: Ord + Copy> Overlay<T> {
    /// Nothing pending?
    pub fn is_empty(&self) -> bool {
        self.entries.values().all(BTreeMap::is_empty)
    }

    /// Record a put (`Some`) or a delete (`None`); the last write of a key wins.
    pub fn set(&mut self, table: T, key: &str, value: Option<&str>) {
        self.entries
            .entry(table)
            .or_default()
            .insert(Key(key.to_owned()), value.map(str::to_owned));
    }

    /// `Some(pending)` when the key was written (`Some(None)`: deleted).
    pub fn get(&self, table: T, key: &str) -> Option<Option<&str>> {
        self.entries
            .get(&table)?
            .get(&Key(key.to_owned()))
            .map(Option::as_deref)
    }

    /// The pending writes inside a range, in key order.
    pub fn range<'a>(
        &'a self,
        table: T,
        prefix: &'a str,
        after: Option<&'a str>,
    ) -> impl Iterator<Item = (&'a str, Option<&'a str>)> + 'a {
        let start = match after {
            Some(a) if a >= prefix => Bound::Excluded(Key(a.to_owned())),
            _ => Bound::Included(Key(prefix.to_owned())),
        };
        self.entries
            .get(&table)
            .into_iter()
            .flat_map(move |keys| keys.range((start.clone(), Bound::Unbounded)))
            .take_while(move |(k, _)| k.0.starts_with(prefix))
            .map(|(k, v)| (k.0.as_str(), v.as_deref()))
    }

    /// How many deletes are pending inside a range: how many more entries
    /// a range read of the committed data needs so that `limit` survive.
    pub fn deletes_in(&self, table: T, prefix: &str, after: Option<&str>) -> usize {
        self.range(table, prefix, after)
            .filter(|(_, v)| v.is_none())
            .count()
    }

    /// A page of the committed data (read with `limit` plus
    /// [`Overlay::deletes_in`] entries) merged with the pending writes,
    /// which win: the first `limit` entries the transaction sees.
    pub fn merge(
        &self,
        table: T,
        prefix: &str,
        after: Option<&str>,
        committed: Vec<(String, String)>,
        limit: u32,
    ) -> Vec<(String, String)> {
        let mut pending = self.range(table, prefix, after).peekable();
        if pending.peek().is_none() && committed.windows(2).all(|w| w[0].0 < w[1].0) {
            // Nothing written in the range (and the page in key order, as
            // every store answers): the committed page as it is.
            let mut committed = committed;
            committed.truncate(limit as usize);
            return committed;
        }
        let mut merged: BTreeMap<String, Option<String>> =
            committed.into_iter().map(|(k, v)| (k, Some(v))).collect();
        for (k, v) in pending {
            merged.insert(k.to_owned(), v.map(str::to_owned));
        }
        merged
            .into_iter()
            .filter_map(|(k, v)| v.map(|v| (k, v)))
            .take(limit as usize)
            .collect()
    }

    /// Every pending write, in (table, key) order.
    pub fn drain(self) -> impl Iterator<Item = (T, String, Option<String>)> {
        self.entries
            .into_iter()
            .flat_map(|(t, keys)| keys.into_iter().map(move |(k, v)| (t, k.0, v)))
    }
}

/// A [`Txn`] over a [`Store`]: the rules' one-at-a-time reads and writes as
/// few crossings.
///
/// - Writes go to an overlay; reads by key are answered from it when the
///   key was written, range reads merge it.
/// - The first read asks for the clock (the rules read before they judge
///   time, so it costs nothing extra) and for the entropy the call was
///   told to expect ([`Buffered::minting`]).
/// - [`Buffered::finish`] hands the write set over once, when the call
///   decided `ok`.
pub struct Buffered<S> {
    store: S,
    writes: Overlay,
    now: Option<u64>,
    /// Entropy the next read asks for.
    want_entropy: u8,
    /// Entropy received and not used yet.
    entropy: Vec<u8>,
    /// Crossings made (reads and the write), for tests and tools.
    crossings: u32,
    /// The count record the call adds its task changes to
    /// ([`Buffered::counting`]), read with the first crossing.
    count: Option<CountRecord>,
}

/// The count record a call was given, and its value once read.
struct CountRecord {
    shard: u64,
    key: String,
    value: Option<Option<String>>,
}

thread_local! {
    /// Where the next call's count record is drawn from: stepped by every
    /// draw, and stirred by every answer's clock and entropy, so callers
    /// in different processes spread over the records instead of walking
    /// them in step.
    static SHARD_STATE: std::cell::Cell<u64> = const { std::cell::Cell::new(0x9e37_79b9_7f4a_7c15) };
}

/// SplitMix64's step: a well-spread 64-bit value from a counter.
fn splitmix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn next_shard() -> u64 {
    SHARD_STATE.with(|s| {
        let x = splitmix(s.get());
        s.set(x);
        x % crate::keys::COUNT_SHARDS
    })
}

fn stir(answers: &Answers) {
    SHARD_STATE.with(|s| {
        let mut x = s.get() ^ answers.now.unwrap_or(0);
        for chunk in answers.entropy.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            x = splitmix(x ^ u64::from_le_bytes(word));
        }
        s.set(x);
    });
}

impl<S: Store> Buffered<S> {
    /// A call over `store`.
    pub fn new(store: S) -> Self {
        Buffered {
            store,
            writes: Overlay::default(),
            now: None,
            want_entropy: 0,
            entropy: Vec::new(),
            crossings: 0,
            count: None,
        }
    }

    /// The call may change tasks: the count record it will add its changes
    /// to (one of [`crate::keys::COUNT_SHARDS`], drawn at random per call)
    /// is read with its first crossing, so the counts cost no crossing.
    pub fn counting(mut self) -> Self {
        let shard = next_shard();
        self.count = Some(CountRecord {
            shard,
            key: crate::keys::count_shard(shard),
            value: None,
        });
        self
    }

    /// What this call already knows of a key without crossing: its own
    /// write, or the count record read with the first crossing.
    fn known(&self, table: Table, key: &str) -> Option<Option<String>> {
        if let Some(own) = self.writes.get(table, key) {
            return Some(own.map(str::to_owned));
        }
        match &self.count {
            Some(c) if table == Table::Meta && c.key == key => c.value.clone(),
            _ => None,
        }
    }

    /// The call mints `tokens` capabilities (claim, acquire,
    /// begin-reconcile mint one): their entropy comes with the first read.
    pub fn minting(mut self, tokens: u8) -> Self {
        self.want_entropy = tokens.saturating_mul(16).min(64);
        self
    }

    /// Run one call's rules and end it: the write set goes to the store
    /// only when they decided `ok`; a store failure handing it over fails
    /// the call.
    pub fn decide<T>(
        mut self,
        rules: impl FnOnce(&mut Self) -> Result<T, crate::Error>,
    ) -> Result<T, crate::Error> {
        let out = rules(&mut self);
        let finished = self.finish(out.is_ok());
        match (out, finished) {
            (Ok(value), Ok(_)) => Ok(value),
            (Ok(_), Err(fault)) => Err(fault.into()),
            (Err(refusal), _) => Err(refusal),
        }
    }

    /// Store crossings so far (reads, and the write once finished).
    pub fn crossings(&self) -> u32 {
        self.crossings
    }

    /// End the call: hand over the write set when the call decided `ok`
    /// (`decided_ok`) and wrote something. Answers the crossings made.
    pub fn finish(mut self, decided_ok: bool) -> Result<u32, StoreFault> {
        if decided_ok && !self.writes.is_empty() {
            let changes = std::mem::take(&mut self.writes)
                .drain()
                .map(|(table, key, value)| Change { table, key, value })
                .collect();
            self.crossings += 1;
            self.store.write(changes)?;
        }
        Ok(self.crossings)
    }

    /// One crossing: `reads`, plus the clock if not read yet and the
    /// entropy still expected.
    fn cross(&mut self, mut reads: Reads) -> Result<Answers, StoreFault> {
        reads.clock = self.now.is_none();
        reads.entropy = std::mem::take(&mut self.want_entropy);
        let count = match &self.count {
            Some(c) if c.value.is_none() => {
                reads.keys.push((Table::Meta, c.key.clone()));
                true
            }
            _ => false,
        };
        let wanted = (reads.keys.len(), reads.ranges.len(), reads.entropy);
        self.crossings += 1;
        let mut answers = self.store.read(reads)?;
        if answers.values.len() != wanted.0
            || answers.pages.len() != wanted.1
            || answers.entropy.len() != wanted.2 as usize
        {
            return Err(StoreFault::Failure(
                "the store answered a different number of reads than asked".into(),
            ));
        }
        if self.now.is_none() {
            self.now = Some(answers.now.ok_or_else(|| {
                StoreFault::Failure("the store answered no clock reading".into())
            })?);
        }
        self.entropy.extend_from_slice(&answers.entropy);
        stir(&answers);
        if count {
            let value = answers.values.pop().flatten();
            if let Some(c) = &mut self.count {
                c.value = Some(value);
            }
        }
        Ok(answers)
    }
}

impl<S: Store> Txn for Buffered<S> {
    fn get(&mut self, table: Table, key: &str) -> Result<Option<String>, StoreFault> {
        Ok(self.get_many(&[(table, key)])?.pop().flatten())
    }

    fn get_many(&mut self, keys: &[(Table, &str)]) -> Result<Vec<Option<String>>, StoreFault> {
        Ok(Txn::read(self, keys, &[])?.0)
    }

    fn put(&mut self, table: Table, key: &str, value: &str) -> Result<(), StoreFault> {
        self.writes.set(table, key, Some(value));
        Ok(())
    }

    fn delete(&mut self, table: Table, key: &str) -> Result<(), StoreFault> {
        self.writes.set(table, key, None);
        Ok(())
    }

    fn scan(
        &mut self,
        table: Table,
        prefix: &str,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Vec<(String, String)>, StoreFault> {
        let scan = crate::txn::Scan {
            table,
            prefix,
            after,
            limit,
        };
        Ok(Txn::read(self, &[], &[scan])?.1.pop().unwrap_or_default())
    }

    fn scan_many(
        &mut self,
        scans: &[crate::txn::Scan<'_>],
    ) -> Result<Vec<Vec<(String, String)>>, StoreFault> {
        Ok(Txn::read(self, &[], scans)?.1)
    }

    fn try_get_many(
        &mut self,
        keys: &[(Table, &str)],
    ) -> Result<Vec<Option<Option<String>>>, StoreFault> {
        if self.now.is_none() || self.want_entropy > 0 {
            // The clock and the entropy come with a call's first read, which
            // a probe does not bring: read (and wait) instead.
            return Ok(Txn::read(self, keys, &[])?
                .0
                .into_iter()
                .map(Some)
                .collect());
        }
        // Keys this call wrote are its own; the others are probed.
        let mut found: Vec<Option<Option<String>>> = keys
            .iter()
            .map(|(t, k)| self.writes.get(*t, k).map(|v| Some(v.map(str::to_owned))))
            .map(|own| own.unwrap_or(None))
            .collect();
        let probed: Vec<usize> = keys
            .iter()
            .enumerate()
            .filter(|(_, (t, k))| self.writes.get(*t, k).is_none())
            .map(|(i, _)| i)
            .collect();
        if probed.is_empty() {
            return Ok(found);
        }
        let wanted: Vec<(Table, String)> = probed
            .iter()
            .map(|&i| (keys[i].0, keys[i].1.to_owned()))
            .collect();
        self.crossings += 1;
        let probes = self.store.try_read(wanted)?;
        if probes.len() != probed.len() {
            return Err(StoreFault::Failure(
                "the store answered a different number of probes than asked".into(),
            ));
        }
        for (i, probe) in probed.into_iter().zip(probes) {
            found[i] = match probe {
                Probe::Held => None,
                Probe::Found(value) => Some(value),
            };
        }
        Ok(found)
    }

    fn read(
        &mut self,
        keys: &[(Table, &str)],
        scans: &[crate::txn::Scan<'_>],
    ) -> Result<crate::txn::Pages, StoreFault> {
        let mut found: Vec<Option<Option<String>>> =
            keys.iter().map(|(t, k)| self.known(*t, k)).collect();
        let missing: Vec<(Table, String)> = keys
            .iter()
            .zip(&found)
            .filter(|(_, f)| f.is_none())
            .map(|((t, k), _)| (*t, (*k).to_owned()))
            .collect();
        if missing.is_empty() && scans.is_empty() {
            // Every key was written by this call: no crossing.
            return Ok((found.into_iter().map(Option::flatten).collect(), Vec::new()));
        }
        let ranges = scans
            .iter()
            .map(|s| {
                let deleted = self.writes.deletes_in(s.table, s.prefix, s.after);
                Range {
                    table: s.table,
                    prefix: s.prefix.to_owned(),
                    after: s.after.map(str::to_owned),
                    limit: s
                        .limit
                        .saturating_add(u32::try_from(deleted).unwrap_or(u32::MAX)),
                }
            })
            .collect();
        let answers = self.cross(Reads {
            keys: missing,
            ranges,
            ..Reads::default()
        })?;
        let mut values = answers.values.into_iter();
        for slot in found.iter_mut().filter(|f| f.is_none()) {
            *slot = values.next();
        }
        let pages = answers
            .pages
            .into_iter()
            .zip(scans)
            .map(|(page, s)| self.writes.merge(s.table, s.prefix, s.after, page, s.limit))
            .collect();
        Ok((found.into_iter().map(Option::flatten).collect(), pages))
    }

    fn now(&mut self) -> Result<u64, StoreFault> {
        if self.now.is_none() {
            // Nothing read yet: the clock alone costs a crossing.
            self.cross(Reads::default())?;
        }
        self.now
            .ok_or_else(|| StoreFault::Failure("the store answered no clock reading".into()))
    }

    fn count_shard(&self) -> Option<u64> {
        self.count.as_ref().map(|c| c.shard)
    }

    fn random128(&mut self) -> Result<u128, StoreFault> {
        if self.entropy.len() < 16 {
            // Not announced with the first read: one crossing more.
            self.want_entropy = 16;
            self.cross(Reads::default())?;
        }
        let mut bytes = [0u8; 16];
        bytes.copy_from_slice(&self.entropy[..16]);
        self.entropy.drain(..16);
        Ok(u128::from_le_bytes(bytes))
    }
}

#[cfg(test)]
mod tests;
