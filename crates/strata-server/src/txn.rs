//! The front transaction of an EXEC: the writes of a MULTI's queued commands, buffered on
//! the connection's thread until the last command ran, then applied as one `WriteBatch`
//! (atomic across shards). The counterpart of the shard worker's `strata::ShardTxn` for
//! commands that run through the front; a `store::Tx` (`store/tx.rs`) holds either, or
//! neither for the front, so the same `Tx` methods serve a worker's group, an EXEC and a
//! plain front command.
//!
//! Reads of the commands see the writes of the earlier ones: point reads look in the
//! overlay first, range scans merge it over the database's records ([`merge_scan`]).
//!
//! Layer: store and types (above configuration; no services, commands or execution).

use std::collections::BTreeMap;
use std::ops::Bound;
use strata::{EngineIter, WriteBatch};
use strata_engine::Result;

/// Buffered writes of one EXEC.
#[derive(Default)]
pub struct FrontTxn {
    /// The latest buffered write of each record (`None`: deleted), in key order for scans.
    overlay: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
    /// The writes in order, as they will be applied.
    batch: WriteBatch,
    /// Some write asked for a synced write (`appendfsync always`).
    sync: bool,
}

impl FrontTxn {
    pub fn new() -> FrontTxn {
        FrontTxn::default()
    }

    /// What the transaction wrote to `key`: `Some(None)` deleted, `None` not written.
    pub fn get(&self, key: &[u8]) -> Option<Option<Vec<u8>>> {
        self.overlay.get(key).cloned()
    }

    pub fn put(&mut self, key: &[u8], value: &[u8]) {
        self.overlay.insert(key.to_vec(), Some(value.to_vec()));
        self.batch.put(key, value);
    }

    pub fn delete(&mut self, key: &[u8]) {
        self.overlay.insert(key.to_vec(), None);
        self.batch.delete(key);
    }

    pub fn sync(&mut self) {
        self.sync = true;
    }

    /// The transaction's writes in `[lo, hi)`, ascending (a copy: a scan's callback may
    /// call the store, which borrows the transaction again).
    pub fn range(&self, lo: &[u8], hi: &[u8]) -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
        if lo >= hi {
            return Vec::new();
        }
        self.overlay
            .range::<[u8], _>((Bound::Included(lo), Bound::Excluded(hi)))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    /// The batch to apply and whether it must be synced.
    pub fn into_batch(self) -> (WriteBatch, bool) {
        (self.batch, self.sync)
    }
}

/// Visits `it`'s records (positioned at its first record in scan order) with `mine` (the
/// transaction's writes of the same range, ascending) over them: a written key shows its
/// buffered value, a deleted one is skipped. Descending when `reverse`. Stops when `f`
/// returns false.
pub fn merge_scan<I: EngineIter>(
    it: &mut I,
    mine: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    reverse: bool,
    mut f: impl FnMut(&[u8], &[u8]) -> bool,
) -> Result<()> {
    let mut mine = mine;
    if reverse {
        mine.reverse();
    }
    let mut mine = mine.into_iter().peekable();
    let step = |it: &mut I| {
        if reverse {
            it.prev()
        } else {
            it.next()
        }
    };
    loop {
        let take_mine = match (it.valid(), mine.peek()) {
            (false, None) => break,
            (false, Some(_)) => true,
            (true, None) => false,
            (true, Some((m, _))) => {
                let ord = m.as_slice().cmp(it.key());
                if ord.is_eq() {
                    step(it); // the buffered write hides the record
                    true
                } else {
                    ord.is_lt() != reverse
                }
            }
        };
        if take_mine {
            let Some((k, v)) = mine.next() else { break };
            if let Some(v) = v {
                if !f(&k, &v) {
                    break;
                }
            }
        } else {
            if !f(it.key(), it.value()) {
                break;
            }
            step(it);
        }
    }
    it.status()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sorted in-memory iterator standing in for the database's.
    struct VecIter {
        recs: Vec<(Vec<u8>, Vec<u8>)>,
        pos: Option<usize>,
    }

    impl EngineIter for VecIter {
        fn valid(&self) -> bool {
            self.pos.is_some_and(|p| p < self.recs.len())
        }
        fn seek_to_first(&mut self) {
            self.pos = Some(0);
        }
        fn seek_to_last(&mut self) {
            self.pos = self.recs.len().checked_sub(1);
        }
        fn seek(&mut self, _key: &[u8]) {
            unimplemented!()
        }
        fn seek_for_prev(&mut self, _key: &[u8]) {
            unimplemented!()
        }
        fn next(&mut self) {
            self.pos = self.pos.map(|p| p + 1);
        }
        fn prev(&mut self) {
            self.pos = self.pos.and_then(|p| p.checked_sub(1));
        }
        fn key(&self) -> &[u8] {
            &self.recs[self.pos.unwrap_or(0)].0
        }
        fn value(&self) -> &[u8] {
            &self.recs[self.pos.unwrap_or(0)].1
        }
        fn status(&self) -> Result<()> {
            Ok(())
        }
    }

    fn scan(engine: &[(&str, &str)], txn: &FrontTxn, reverse: bool) -> Vec<String> {
        let mut it = VecIter {
            recs: engine
                .iter()
                .map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec()))
                .collect(),
            pos: None,
        };
        if reverse {
            it.seek_to_last();
        } else {
            it.seek_to_first();
        }
        let mut out = Vec::new();
        merge_scan(&mut it, txn.range(b"a", b"z"), reverse, |k, v| {
            out.push(format!(
                "{}={}",
                String::from_utf8_lossy(k),
                String::from_utf8_lossy(v)
            ));
            true
        })
        .unwrap();
        out
    }

    #[test]
    fn scans_see_buffered_writes_in_both_directions() {
        let engine = [("b", "1"), ("d", "1"), ("f", "1")];
        let mut t = FrontTxn::new();
        t.put(b"a", b"2");
        t.put(b"d", b"2");
        t.delete(b"f");
        t.put(b"g", b"2");
        t.delete(b"c");
        t.put(b"zz", b"out of range");
        let fwd = scan(&engine, &t, false);
        assert_eq!(fwd, ["a=2", "b=1", "d=2", "g=2"]);
        let mut rev = scan(&engine, &t, true);
        rev.reverse();
        assert_eq!(rev, fwd);
        assert_eq!(t.get(b"f"), Some(None));
        assert_eq!(t.get(b"b"), None);
        assert!(t.range(b"z", b"a").is_empty());
        let (b, sync) = t.into_batch();
        assert_eq!((b.len(), sync), (6, false));
    }
}
