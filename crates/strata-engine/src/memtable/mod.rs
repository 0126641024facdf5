//! The memtable: a concurrent skiplist of internal keys (`skiplist.rs`).
//!
//! Writers insert concurrently, each its own batch (the commit pipeline publishes them in
//! sequence order afterwards, `commit/`); readers look up concurrently without locks and
//! see an entry only once its sequence number is published. A memtable is frozen (made immutable) when it reaches
//! `write_buffer_bytes` and flushed to an L0 table by a background thread (`docs/design.md`
//! §4.4, §6.1). Entries' bytes live in the memtable's arena (`entry.rs`).

mod entry;
mod skiplist;

use crate::iter::InternalIterator;
use crate::key::{self, SeqNo, ValueKind};
use entry::{Arena, MemKey};
use skiplist::{ListOwner, Node, Resume, SkipList, WalkFrom};
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering as AtomicOrdering};
use std::sync::Arc;

/// Bytes an entry was counted for beside its key and value when its skiplist node was a
/// `malloc` allocation of its own (crossbeam-skiplist's: the [`MemKey`], a reference count
/// and height, two level pointers on average, as the allocator rounds it). Kept as the
/// count: `write_buffer_bytes` was tuned against it. The arena's node is smaller (the key
/// and 1.33 level pointers on average).
const NODE_BYTES: usize = 80;

/// The heap bytes an allocation of `n` bytes really takes: the allocator's 8-byte header,
/// rounded up to its 16-byte granule, at least 32 (glibc's malloc; others round similarly).
/// The memtable counts what it really holds, so that `write_buffer_bytes` bounds memory,
/// not the logical size of the data (with small values that undercounted by a third); the
/// sharded front's hot tier weighs its records with it too.
pub fn heap_bytes(n: usize) -> usize {
    (n + 8).next_multiple_of(16).max(32)
}

/// A Bloom filter over the user keys of one memtable (RocksDB's
/// `memtable_whole_key_filtering`): a point lookup of a key the memtable does not hold skips
/// the skiplist search, which on a memtable of a few hundred thousand entries is some twenty
/// scattered key comparisons (profiled: the largest cost of a server GET). Written by the
/// inserting thread before the entry is inserted, so any reader that can see the entry (it
/// is published later) sees its bits.
struct MemBloom {
    words: Box<[AtomicU64]>,
    /// Number of bits - 1 (a power of two).
    mask: u64,
}

/// Bits per expected entry, and probes per key: about 1% false positives when full.
const BLOOM_BITS_PER_ENTRY: usize = 10;
const BLOOM_PROBES: u64 = 4;
/// Smallest entry the sizing assumes (key, value and overhead).
const BLOOM_MIN_ENTRY_BYTES: usize = 96;

impl MemBloom {
    /// A filter for a memtable of `buffer_bytes`.
    fn for_buffer(buffer_bytes: usize) -> MemBloom {
        let entries = (buffer_bytes / BLOOM_MIN_ENTRY_BYTES).max(64);
        let bits = (entries * BLOOM_BITS_PER_ENTRY)
            .next_power_of_two()
            .min(1 << 28);
        MemBloom {
            words: (0..bits / 64).map(|_| AtomicU64::new(0)).collect(),
            mask: bits as u64 - 1,
        }
    }

    fn probes(&self, user_key: &[u8]) -> impl Iterator<Item = u64> + '_ {
        let h = xxhash_rust::xxh3::xxh3_64(user_key);
        let (h1, h2) = (h, (h >> 32) | 1);
        (0..BLOOM_PROBES).map(move |i| h1.wrapping_add(i.wrapping_mul(h2)) & self.mask)
    }

    fn add(&self, user_key: &[u8]) {
        for b in self.probes(user_key) {
            self.words[(b >> 6) as usize].fetch_or(1 << (b & 63), AtomicOrdering::Release);
        }
    }

    fn may_contain(&self, user_key: &[u8]) -> bool {
        self.probes(user_key).all(|b| {
            self.words[(b >> 6) as usize].load(AtomicOrdering::Acquire) & (1 << (b & 63)) != 0
        })
    }
}

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
    /// Declared before `arena`, so dropped before it: its nodes live in the arena.
    map: SkipList,
    arena: Arena,
    bloom: MemBloom,
    approx_bytes: AtomicUsize,
    /// Number of the WAL file whose records this memtable holds (0: none).
    wal_number: u64,
    /// With the value log as the WAL: where this memtable's first record went.
    vlog_start: Option<(u64, u64)>,
    /// Bytes of separated entries per value-log file that this memtable points at.
    vlog_refs: parking_lot::Mutex<std::collections::BTreeMap<u64, u64>>,
    /// Holds writes made with `WriteOptions::disable_wal`: no log replays them, so they are
    /// durable only once this memtable is flushed.
    unlogged: std::sync::atomic::AtomicBool,
}

impl MemTable {
    /// A memtable for up to about `buffer_bytes` (`Options::write_buffer_bytes`; sizes its
    /// Bloom filter).
    pub fn new(wal_number: u64, buffer_bytes: usize) -> Self {
        Self::with_vlog_start(wal_number, None, buffer_bytes)
    }

    /// A memtable whose records start at `vlog_start` of the value log.
    pub fn with_vlog_start(
        wal_number: u64,
        vlog_start: Option<(u64, u64)>,
        buffer_bytes: usize,
    ) -> Self {
        let arena = Arena::for_buffer(buffer_bytes);
        MemTable {
            map: SkipList::new(&arena),
            arena,
            bloom: MemBloom::for_buffer(buffer_bytes),
            approx_bytes: AtomicUsize::new(0),
            wal_number,
            vlog_start,
            vlog_refs: Default::default(),
            unlogged: Default::default(),
        }
    }

    /// Notes that this memtable holds a write no log replays.
    pub fn mark_unlogged(&self) {
        self.unlogged.store(true, AtomicOrdering::Release);
    }

    /// Whether this memtable holds a write no log replays (`WriteOptions::disable_wal`).
    pub fn has_unlogged(&self) -> bool {
        self.unlogged.load(AtomicOrdering::Acquire)
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
        self.count(user_key, value);
        let trailer = key::pack_trailer(seq, kind);
        self.map.insert(&self.arena, user_key, trailer, value);
    }

    /// Inserts a batch's entries, searched for side by side (`SkipList::insert_nodes`):
    /// [`MemInserts::add`] each, and they are in the memtable when the `MemInserts` drops.
    pub fn inserts(&self) -> MemInserts<'_> {
        MemInserts {
            mem: self,
            nodes: Vec::new(),
        }
    }

    /// The Bloom filter and size counter's share of an insert, done before the entry is
    /// linked (a reader that can see the entry sees its filter bits).
    fn count(&self, user_key: &[u8], value: &[u8]) {
        self.bloom.add(user_key);
        // Counted as if each entry were its own allocation (what `write_buffer_bytes` was
        // tuned against); the arena holds the same bytes without the headers and rounding.
        self.approx_bytes.fetch_add(
            NODE_BYTES + heap_bytes(user_key.len() + key::TRAILER_LEN + value.len()),
            AtomicOrdering::Relaxed,
        );
    }

    /// Approximate memory used.
    pub fn approximate_bytes(&self) -> usize {
        self.approx_bytes.load(AtomicOrdering::Relaxed)
    }

    pub fn is_empty(&self) -> bool {
        self.map.len() == 0
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// The newest version of `user_key` visible at `seq`.
    pub fn get(&self, user_key: &[u8], seq: SeqNo) -> MemLookup {
        if !self.bloom.may_contain(user_key) {
            return MemLookup::Absent;
        }
        let found = MemKey::scoped(&key::seek_key_inline(user_key, seq), |seek| {
            self.map.seek(seek, true)
        });
        match found {
            Some(e) => match key::parse_internal_key(e.key().ikey()) {
                Some(p) if p.user_key == user_key => match p.kind {
                    ValueKind::Value => MemLookup::Found(e.key().value().to_vec()),
                    ValueKind::Pointer => MemLookup::Pointer(e.key().value().to_vec()),
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
            arena: Vec::new(),
            entries: Vec::new(),
            pos: 0,
            valid: false,
            chunk: 1,
            resume: None,
        }
    }
}

impl ListOwner for MemTable {
    fn list(&self) -> &SkipList {
        &self.map
    }
}

/// Entries on their way into a memtable ([`MemTable::inserts`]): each is copied into the
/// arena as it is added and linked when this drops, all together.
pub struct MemInserts<'m> {
    mem: &'m MemTable,
    nodes: Vec<(&'m Node, usize)>,
}

impl MemInserts<'_> {
    /// Adds one entry (as [`MemTable::add`], linked later).
    pub fn add(&mut self, seq: SeqNo, kind: ValueKind, user_key: &[u8], value: &[u8]) {
        self.mem.count(user_key, value);
        let trailer = key::pack_trailer(seq, kind);
        self.nodes.push(SkipList::new_node(
            &self.mem.arena,
            user_key,
            trailer,
            value,
        ));
    }
}

impl Drop for MemInserts<'_> {
    fn drop(&mut self) {
        self.mem.map.insert_nodes(&self.nodes);
    }
}

/// Most entries [`MemTableIter`] copies per chunk.
const CHUNK: usize = 64;

/// Most entries a forward chunk copies. Going on from the last node costs no search, so a
/// forward chunk need not be large to amortise one; a small one bounds what a scan copies
/// past where it stops (each node copied is a cache miss: with chunks doubling to 64, a
/// seek + 100 nexts over a 500k load copied about twice the ~30 memtable entries it used).
const FORWARD_CHUNK: usize = 8;

/// Iterator over a memtable. It copies consecutive entries into a local arena, so each step
/// is a copy-free index move; moving forward, a chunk goes on from the list node where the
/// last one ended ([`skiplist::Resume`]), so the skiplist is searched once per seek.
/// The chunk starts at one entry after a seek (copying touches scattered skiplist nodes: a
/// point seek must not pay for 64 cache misses) and doubles with every reload up to
/// [`CHUNK`] backward and [`FORWARD_CHUNK`] forward. A chunk can miss entries inserted after it was copied; those
/// carry sequence numbers above any snapshot the iterator reads at, so they are invisible
/// to it anyway.
pub struct MemTableIter {
    mem: Arc<MemTable>,
    /// Keys and values of the chunk, back to back.
    arena: Vec<u8>,
    /// Per entry of the chunk, in internal-key order: (key start, key len, value len); the
    /// value follows the key in the arena.
    entries: Vec<(usize, usize, usize)>,
    pos: usize,
    valid: bool,
    /// Entries to copy at the next reload.
    chunk: usize,
    /// Where the chunk's last entry is in the list, when the chunk was loaded forward: the
    /// next forward reload goes on from there without a search.
    resume: Option<Resume<MemTable>>,
}

impl MemTableIter {
    fn clear(&mut self) {
        self.arena.clear();
        self.entries.clear();
        self.pos = 0;
        self.valid = false;
    }

    fn push(&mut self, e: &Node) {
        Self::push_into(&mut self.arena, &mut self.entries, e);
    }

    fn push_into(arena: &mut Vec<u8>, entries: &mut Vec<(usize, usize, usize)>, e: &Node) {
        let start = arena.len();
        let entry = e.key();
        arena.extend_from_slice(entry.bytes());
        entries.push((start, entry.ikey().len(), entry.value().len()));
    }

    /// Loads the chunk of entries following `from` (ascending); positions at its first.
    fn load_forward(&mut self, from: Bound<&MemKey>) {
        let from = match from {
            Bound::Unbounded => WalkFrom::First,
            Bound::Included(k) => WalkFrom::Seek(k, true),
            Bound::Excluded(k) => WalkFrom::Seek(k, false),
        };
        self.load_forward_from(from);
    }

    /// [`MemTableIter::load_forward`] from where a walk starts.
    fn load_forward_from(&mut self, from: WalkFrom<'_, MemTable>) {
        self.clear();
        let mem = self.mem.clone();
        let (arena, entries) = (&mut self.arena, &mut self.entries);
        self.resume = skiplist::walk(&mem, from, self.chunk.min(FORWARD_CHUNK), |e| {
            Self::push_into(arena, entries, e)
        });
        self.chunk = (self.chunk * 2).min(CHUNK);
        self.valid = !self.entries.is_empty();
    }

    /// Loads the chunk of entries preceding `before` (`None`: the last ones), kept
    /// ascending; positions at its last.
    fn load_backward(&mut self, before: Option<&MemKey>) {
        self.clear();
        self.resume = None;
        let mem = self.mem.clone();
        // The list links forward only: each step back is a search for the entry before
        // (LevelDB's `Prev`); backward scans are rare.
        let mut node = mem.map.seek_before(before);
        for _ in 0..self.chunk {
            let Some(e) = node else { break };
            self.push(e);
            node = mem.map.seek_before(Some(e.key()));
        }
        self.chunk = (self.chunk * 2).min(CHUNK);
        self.entries.reverse();
        self.valid = !self.entries.is_empty();
        self.pos = self.entries.len().saturating_sub(1);
    }

    /// Reloads the chunk after (`forward`) or before the current entry (its key copied out
    /// first: the reload clears `arena`).
    fn reload_past_current(&mut self, forward: bool) {
        let cur = self.key().to_vec();
        MemKey::scoped(&cur, |k| {
            if forward {
                self.load_forward(Bound::Excluded(k))
            } else {
                self.load_backward(Some(k))
            }
        });
    }
}

impl InternalIterator for MemTableIter {
    fn valid(&self) -> bool {
        self.valid
    }
    fn seek_to_first(&mut self) {
        self.chunk = 1;
        self.load_forward(Bound::Unbounded);
    }
    fn seek_to_last(&mut self) {
        self.chunk = 1;
        self.load_backward(None);
    }
    fn seek(&mut self, target: &[u8]) {
        self.chunk = 1;
        MemKey::scoped(target, |t| self.load_forward(Bound::Included(t)));
    }
    fn next(&mut self) {
        if self.pos + 1 < self.entries.len() {
            self.pos += 1;
        } else if let Some(r) = self.resume.take() {
            // At the last entry of a forward chunk: `r` is where it is in the list.
            self.load_forward_from(WalkFrom::After(r));
        } else {
            self.reload_past_current(true);
        }
    }
    fn prev(&mut self) {
        if self.pos > 0 {
            self.pos -= 1;
        } else {
            self.reload_past_current(false);
        }
    }
    fn key(&self) -> &[u8] {
        let (s, k, _) = self.entries[self.pos];
        &self.arena[s..s + k]
    }
    fn value(&self) -> &[u8] {
        let (s, k, v) = self.entries[self.pos];
        &self.arena[s + k..s + k + v]
    }
    fn status(&self) -> crate::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::key::compare_internal;

    #[test]
    fn inline_prefix_orders_exactly_as_internal_keys() {
        // User keys sharing prefixes of every length around the inline size, empty ones,
        // and ones differing only after the inline bytes.
        let mut users: Vec<Vec<u8>> = vec![Vec::new()];
        for len in [1, 2, 15, 16, 17, 30] {
            for fill in [0u8, b'a', 0xff] {
                let mut k = vec![fill; len];
                users.push(k.clone());
                if let Some(last) = k.last_mut() {
                    *last = last.wrapping_add(1);
                }
                users.push(k);
            }
        }
        let keys: Vec<Vec<u8>> = users
            .iter()
            .flat_map(|u| {
                [1u64, 7].into_iter().flat_map(move |seq| {
                    [ValueKind::Value, ValueKind::Delete]
                        .into_iter()
                        .map(move |kind| key::make_internal_key(u, seq, kind))
                })
            })
            .collect();
        let arena = Arena::for_buffer(64 << 10);
        for a in &keys {
            let (user, trailer) = a.split_at(a.len() - key::TRAILER_LEN);
            let trailer = u64::from_le_bytes(trailer.try_into().unwrap());
            let ma = MemKey::in_arena(&arena, user, trailer, b"x");
            assert_eq!((ma.ikey(), ma.value()), (&a[..], &b"x"[..]));
            for b in &keys {
                let got = MemKey::scoped(b, |mb| ma.cmp(mb));
                assert_eq!(got, compare_internal(a, b), "{a:?} vs {b:?}");
            }
        }
    }

    #[test]
    fn bloom_never_hides_a_key_and_skips_most_absent_ones() {
        let m = MemTable::new(1, 1 << 20);
        for i in 0..8000u32 {
            m.add(u64::from(i) + 1, ValueKind::Value, &i.to_be_bytes(), b"v");
        }
        for i in 0..8000u32 {
            assert!(m.bloom.may_contain(&i.to_be_bytes()), "key {i} hidden");
            assert_eq!(
                m.get(&i.to_be_bytes(), u64::MAX >> 8),
                MemLookup::Found(b"v".to_vec())
            );
        }
        let false_positives = (8000..108_000u32)
            .filter(|i| m.bloom.may_contain(&i.to_be_bytes()))
            .count();
        assert!(
            false_positives < 3000,
            "{false_positives} of 100000 absent keys pass"
        );
        assert_eq!(m.get(b"absent", u64::MAX >> 8), MemLookup::Absent);
    }

    use super::*;

    #[test]
    fn get_sees_newest_visible_version() {
        let m = MemTable::new(1, 64 << 10);
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
        let m = Arc::new(MemTable::new(1, 64 << 10));
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

    #[test]
    fn chunked_iteration_crosses_chunks_in_both_directions() {
        let m = Arc::new(MemTable::new(1, 64 << 10));
        let n = CHUNK * 3 + 5;
        for i in 0..n {
            m.add(
                i as u64 + 1,
                ValueKind::Value,
                format!("k{i:05}").as_bytes(),
                b"v",
            );
        }
        let mut it = m.iter();
        it.seek_to_first();
        let mut seen = 0;
        while it.valid() {
            assert_eq!(key::user_key(it.key()), format!("k{seen:05}").as_bytes());
            seen += 1;
            it.next();
        }
        assert_eq!(seen, n);
        // Zig-zag across a chunk boundary.
        it.seek(&key::seek_key(
            format!("k{:05}", CHUNK + 2).as_bytes(),
            u64::MAX >> 8,
        ));
        for _ in 0..5 {
            it.prev();
        }
        assert_eq!(
            key::user_key(it.key()),
            format!("k{:05}", CHUNK - 3).as_bytes()
        );
        for _ in 0..10 {
            it.next();
        }
        assert_eq!(
            key::user_key(it.key()),
            format!("k{:05}", CHUNK + 7).as_bytes()
        );
        assert_eq!(it.value(), b"v");
    }

    /// A random walk (seeks, runs of `next`, some `prev`s) over a memtable, step by step
    /// against the sorted entries, with entries added between steps as a writer would: each
    /// newer than the walk's snapshot, which must see exactly the entries at or below it in
    /// order. Forward runs go on from where the last chunk ended (`skiplist::Resume`), backward
    /// ones search; both must agree with the model.
    #[test]
    fn random_walks_with_concurrent_adds_see_the_model() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(11);
        let m = Arc::new(MemTable::new(1, 4 << 20));
        let seq = std::cell::Cell::new(0u64);
        let mut model: Vec<Vec<u8>> = Vec::new();
        let add = |rng: &mut rand::rngs::StdRng, model: Option<&mut Vec<Vec<u8>>>| {
            let seq = {
                seq.set(seq.get() + 1);
                seq.get()
            };
            let user = format!("k{:05}", rng.gen_range(0..3000));
            let kind = if rng.gen_ratio(1, 6) {
                ValueKind::Delete
            } else {
                ValueKind::Value
            };
            m.add(seq, kind, user.as_bytes(), &seq.to_le_bytes());
            if let Some(model) = model {
                model.push(key::make_internal_key(user.as_bytes(), seq, kind));
            }
        };
        for _ in 0..4000 {
            add(&mut rng, Some(&mut model));
        }
        model.sort_by(|a, b| compare_internal(a, b));
        let snapshot = seq.get();
        let visible = |k: &[u8]| key::parse_internal_key(k).unwrap().seq <= snapshot;
        let mut it = m.iter();
        for _ in 0..300 {
            let target = format!("k{:05}", rng.gen_range(0..3100));
            let t = key::seek_key(target.as_bytes(), snapshot);
            it.seek(&t);
            let mut at = model.partition_point(|k| compare_internal(k, &t).is_lt());
            for _ in 0..rng.gen_range(0..300) {
                // Skip what the snapshot cannot see, as a reader does.
                while it.valid() && !visible(it.key()) {
                    it.next();
                }
                if !it.valid() {
                    assert_eq!(at, model.len(), "ended early");
                    break;
                }
                assert_eq!(it.key(), &model[at][..], "walk differs from the model");
                if rng.gen_ratio(1, 4) {
                    add(&mut rng, None);
                }
                if rng.gen_ratio(1, 30) && at > 0 {
                    it.prev();
                    while it.valid() && !visible(it.key()) {
                        it.prev();
                    }
                    at -= 1;
                    assert!(it.valid());
                    assert_eq!(it.key(), &model[at][..], "prev differs from the model");
                    // Back onto the entry the walk left, forward again.
                    it.next();
                    at += 1;
                } else {
                    it.next();
                    at += 1;
                }
            }
        }
    }
}
