//! The memtable: a concurrent skiplist (crossbeam-skiplist) of internal keys.
//!
//! Writers insert under the group-commit leader (one thread at a time); readers look up
//! concurrently without locks. A memtable is frozen (made immutable) when it reaches
//! `write_buffer_bytes` and flushed to an L0 table by a background thread.

use crate::iter::InternalIterator;
use crate::key::{self, compare_internal, SeqNo, ValueKind};
use crossbeam_skiplist::SkipMap;
use std::cmp::Ordering;
use std::ops::Bound;
use std::sync::atomic::{AtomicUsize, Ordering as AtomicOrdering};
use std::sync::Arc;

/// An internal key owned by the skiplist, ordered by [`compare_internal`].
#[derive(Clone, PartialEq, Eq)]
struct MemKey(Box<[u8]>);

impl Ord for MemKey {
    fn cmp(&self, other: &Self) -> Ordering {
        compare_internal(&self.0, &other.0)
    }
}

impl PartialOrd for MemKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// Bytes of bookkeeping counted per entry on top of key and value (skiplist node, boxes).
const ENTRY_OVERHEAD: usize = 64;

/// What a point lookup found in one memtable.
#[derive(Debug, PartialEq, Eq)]
pub enum MemLookup {
    Found(Vec<u8>),
    /// An encoded value pointer (`crate::vlog::ValuePointer`).
    Pointer(Vec<u8>),
    Deleted,
    Absent,
}

/// One memtable and the WAL file that holds its writes.
pub struct MemTable {
    map: SkipMap<MemKey, Box<[u8]>>,
    approx_bytes: AtomicUsize,
    /// Number of the WAL file whose records this memtable holds (0: none).
    wal_number: u64,
    /// With the value log as the WAL: where this memtable's first record went.
    vlog_start: Option<(u64, u64)>,
    /// Bytes of separated entries per value-log file that this memtable points at.
    vlog_refs: parking_lot::Mutex<std::collections::BTreeMap<u64, u64>>,
}

impl MemTable {
    pub fn new(wal_number: u64) -> Self {
        Self::with_vlog_start(wal_number, None)
    }

    /// A memtable whose records start at `vlog_start` of the value log.
    pub fn with_vlog_start(wal_number: u64, vlog_start: Option<(u64, u64)>) -> Self {
        MemTable {
            map: SkipMap::new(),
            approx_bytes: AtomicUsize::new(0),
            wal_number,
            vlog_start,
            vlog_refs: Default::default(),
        }
    }

    pub fn wal_number(&self) -> u64 {
        self.wal_number
    }

    pub fn vlog_start(&self) -> Option<(u64, u64)> {
        self.vlog_start
    }

    /// Notes that this memtable points at `bytes` more bytes of value-log file `file`.
    pub fn add_vlog_refs(&self, file: u64, bytes: u64) {
        *self.vlog_refs.lock().entry(file).or_insert(0) += bytes;
    }

    /// `(file, bytes)` this memtable points at.
    pub fn vlog_refs(&self) -> Vec<(u64, u64)> {
        self.vlog_refs
            .lock()
            .iter()
            .map(|(f, n)| (*f, *n))
            .collect()
    }

    /// Inserts one entry. Sequence numbers are unique, so keys never collide.
    pub fn add(&self, seq: SeqNo, kind: ValueKind, user_key: &[u8], value: &[u8]) {
        let ikey = key::make_internal_key(user_key, seq, kind);
        self.approx_bytes.fetch_add(
            ikey.len() + value.len() + ENTRY_OVERHEAD,
            AtomicOrdering::Relaxed,
        );
        self.map.insert(
            MemKey(ikey.into_boxed_slice()),
            value.to_vec().into_boxed_slice(),
        );
    }

    /// Approximate memory used.
    pub fn approximate_bytes(&self) -> usize {
        self.approx_bytes.load(AtomicOrdering::Relaxed)
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// The newest version of `user_key` visible at `seq`.
    pub fn get(&self, user_key: &[u8], seq: SeqNo) -> MemLookup {
        let seek = MemKey(key::seek_key(user_key, seq).into_boxed_slice());
        match self.map.lower_bound(Bound::Included(&seek)) {
            Some(e) => match key::parse_internal_key(&e.key().0) {
                Some(p) if p.user_key == user_key => match p.kind {
                    ValueKind::Value => MemLookup::Found(e.value().to_vec()),
                    ValueKind::Pointer => MemLookup::Pointer(e.value().to_vec()),
                    ValueKind::Delete => MemLookup::Deleted,
                },
                _ => MemLookup::Absent,
            },
            None => MemLookup::Absent,
        }
    }

    /// An iterator over all entries in internal-key order.
    pub fn iter(self: &Arc<Self>) -> MemTableIter {
        MemTableIter {
            mem: self.clone(),
            key: Vec::new(),
            value: Vec::new(),
            valid: false,
        }
    }
}

/// Iterator over a memtable. Holds a copy of the current entry, so it is independent of the
/// skiplist's borrow lifetimes; each step is one O(log n) skiplist search.
pub struct MemTableIter {
    mem: Arc<MemTable>,
    key: Vec<u8>,
    value: Vec<u8>,
    valid: bool,
}

impl MemTableIter {
    fn load(&mut self, e: Option<crossbeam_skiplist::map::Entry<'_, MemKey, Box<[u8]>>>) {
        match e {
            Some(e) => {
                self.key.clear();
                self.key.extend_from_slice(&e.key().0);
                self.value.clear();
                self.value.extend_from_slice(e.value());
                self.valid = true;
            }
            None => self.valid = false,
        }
    }
}

impl InternalIterator for MemTableIter {
    fn valid(&self) -> bool {
        self.valid
    }
    fn seek_to_first(&mut self) {
        let mem = self.mem.clone();
        self.load(mem.map.front());
    }
    fn seek_to_last(&mut self) {
        let mem = self.mem.clone();
        self.load(mem.map.back());
    }
    fn seek(&mut self, target: &[u8]) {
        let mem = self.mem.clone();
        let t = MemKey(target.into());
        self.load(mem.map.lower_bound(Bound::Included(&t)));
    }
    fn next(&mut self) {
        let mem = self.mem.clone();
        let cur = MemKey(std::mem::take(&mut self.key).into_boxed_slice());
        self.load(mem.map.lower_bound(Bound::Excluded(&cur)));
    }
    fn prev(&mut self) {
        let mem = self.mem.clone();
        let cur = MemKey(std::mem::take(&mut self.key).into_boxed_slice());
        self.load(mem.map.upper_bound(Bound::Excluded(&cur)));
    }
    fn key(&self) -> &[u8] {
        &self.key
    }
    fn value(&self) -> &[u8] {
        &self.value
    }
    fn status(&self) -> crate::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn get_sees_newest_visible_version() {
        let m = MemTable::new(1);
        m.add(1, ValueKind::Value, b"k", b"v1");
        m.add(2, ValueKind::Value, b"k", b"v2");
        m.add(3, ValueKind::Delete, b"k", b"");
        assert_eq!(m.get(b"k", 1), MemLookup::Found(b"v1".to_vec()));
        assert_eq!(m.get(b"k", 2), MemLookup::Found(b"v2".to_vec()));
        assert_eq!(m.get(b"k", 3), MemLookup::Deleted);
        assert_eq!(m.get(b"j", 3), MemLookup::Absent);
        assert_eq!(m.get(b"k0", 3), MemLookup::Absent);
    }

    #[test]
    fn iterates_in_internal_order_both_ways() {
        let m = Arc::new(MemTable::new(1));
        m.add(1, ValueKind::Value, b"b", b"1");
        m.add(2, ValueKind::Value, b"a", b"2");
        m.add(3, ValueKind::Value, b"b", b"3");
        let mut it = m.iter();
        it.seek_to_first();
        let mut fwd = vec![];
        while it.valid() {
            fwd.push(it.key().to_vec());
            it.next();
        }
        assert_eq!(fwd.len(), 3);
        assert_eq!(key::user_key(&fwd[0]), b"a");
        assert_eq!(key::parse_internal_key(&fwd[1]).unwrap().seq, 3);
        it.seek_to_last();
        let mut back = vec![];
        while it.valid() {
            back.push(it.key().to_vec());
            it.prev();
        }
        back.reverse();
        assert_eq!(fwd, back);
    }
}
