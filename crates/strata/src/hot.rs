//! The hot tier: a shard's recently and frequently used records in RAM (Redis on Flash's
//! lesson, seed `004`: the working set at memory speed, the SSD for the rest).
//!
//! A record cache in front of one shard's engine, bounded in bytes, **filled by reads**: a
//! read that misses it reads the engine and *promotes* the value. Admission and eviction are
//! `quick_cache`'s (a CLOCK-Pro variant close to S3-FIFO: scan-resistant, so one pass over
//! cold keys does not flush the hot ones). The engine always holds every record; evicting one
//! only drops its RAM copy, so the tier never affects durability.
//!
//! **Writes do not fill it.** A write updates only the records the tier already holds: once
//! the engine has applied it, each of those is replaced by the written value (or removed, for
//! a delete); a record the tier does not hold stays out. Inserting every written record cost
//! a pipelined SET a tenth of its CPU (`docs/benchmarks.md`), mostly for keys never read
//! again; a key that is read comes in on its first miss.
//!
//! **Coherence.** A cached record is never older than the engine's for a completed write. A
//! read that misses reads the engine and then promotes the value, and that is the one race: a
//! write may land between the engine read and the promotion, and promoting the older value
//! would leave it cached for good. So writes count themselves in `started` before touching
//! the engine and in `finished` (under `promote`) after updating the cache; a read promotes
//! only if no write was in flight when it began (`started == finished`) and none has started
//! since (`started` unchanged when it promotes, checked under `promote`, which the writer's
//! cache update also holds). Reads that lose the race simply do not promote.
//!
//! A write looks up which of its records the tier holds when it begins, under `promote`
//! after counting itself in `started`: from then until it finishes no read promotes (every
//! read either began before it, and finds `started` changed, or sees it in flight), and no
//! write inserts, so a record absent then is still absent when the write ends, and only the
//! records found need updating. It copies the new values of those alone (none, for a key
//! nobody reads), before the engine takes the batch.
//!
//! Writes to one shard may also overlap each other: the front lets callers write a shard on
//! their own threads (`Options::direct_writes`), and two writes of one key can reach the
//! engine in one order and the tier in the other. So a write replaces records only if it ran
//! alone: every earlier write had finished when it began (`finished` equal to its place in
//! `started`) and none began after it (`started` one past its place when it ends, checked
//! under `promote`). A write that overlapped another removes the records it found instead;
//! the next read promotes the engine's value. The tier's capacity is changed only while no
//! write is in flight (the front holds each shard's latch), so every overlapping write sees
//! the tier in the same state.

use parking_lot::Mutex;
use quick_cache::sync::Cache;
use quick_cache::{Lifecycle, Weighter};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Bytes an entry costs beyond its record's allocation: the cache's slab entry (key hash,
/// record pointer, links, state), its share of the ghost entries the admission policy keeps
/// for recently evicted keys, and the hash table's slot. Measured: with 128-byte values, the
/// process's RSS grows by the tier's counted bytes within a few percent (`docs/design.md`
/// §13, the memory bound).
pub const ENTRY_OVERHEAD: u64 = 72;

/// Records larger than this share of the tier are not cached (one huge value would evict
/// hundreds of small hot ones).
const MAX_ITEM_SHARE: u64 = 16;

/// Bytes of the record's header: the key's length.
const KEY_LEN_BYTES: usize = 4;

/// The bytes a cached record of `record_len` bytes costs: one allocation holding the
/// reference counts (16 bytes) and the record, as the allocator rounds it (counting
/// requested bytes undercounts small records by a third), plus the entry.
fn record_weight(record_len: usize) -> u64 {
    strata_engine::memtable::heap_bytes(16 + record_len) as u64 + ENTRY_OVERHEAD
}

/// What a record of `key` and `value` would cost ([`record_weight`]).
fn record_cost(key: &[u8], value: &[u8]) -> u64 {
    record_weight(KEY_LEN_BYTES + key.len() + value.len())
}

/// A cached record: `[key length u32 LE][key][value]` in one shared allocation. The cache is
/// keyed by the key's 64-bit hash, so an entry needs no second allocation for its key; the
/// stored key is compared on every lookup, so two keys with the same hash never answer for
/// each other (they only evict each other, which a cache may do).
type Record = Arc<[u8]>;

fn make_record(key: &[u8], value: &[u8]) -> Record {
    let mut r = Vec::with_capacity(KEY_LEN_BYTES + key.len() + value.len());
    r.extend_from_slice(&(key.len() as u32).to_le_bytes());
    r.extend_from_slice(key);
    r.extend_from_slice(value);
    Arc::from(r)
}

/// The value of `record` if it is `key`'s.
fn record_value<'r>(record: &'r [u8], key: &[u8]) -> Option<&'r [u8]> {
    let (len, rest) = record.split_at(KEY_LEN_BYTES);
    let len = u32::from_le_bytes(len.try_into().expect("4 bytes")) as usize;
    (rest[..len] == *key).then(|| &rest[len..])
}

fn key_hash(key: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(key)
}

#[derive(Clone)]
struct ByBytes;

impl Weighter<u64, Record> for ByBytes {
    fn weight(&self, _hash: &u64, record: &Record) -> u64 {
        record_weight(record.len())
    }
}

/// Counts evictions (the cache's own counters cover hits and misses).
#[derive(Clone, Default)]
struct CountEvictions(Arc<AtomicU64>);

impl Lifecycle<u64, Record> for CountEvictions {
    type RequestState = ();

    fn begin_request(&self) -> Self::RequestState {}

    fn on_evict(&self, _state: &mut (), _hash: u64, _record: Record) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

type Records = Cache<u64, Record, ByBytes, quick_cache::DefaultHashBuilder, CountEvictions>;

/// One shard's hot tier.
pub struct HotTier {
    cache: Records,
    /// The capacity last set (0: off), readable without touching the cache.
    capacity: AtomicU64,
    evictions: Arc<AtomicU64>,
    hits: AtomicU64,
    misses: AtomicU64,
    started: AtomicU64,
    finished: AtomicU64,
    promote: Mutex<()>,
}

/// The hot tier's counters (INFO).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HotStats {
    /// Bytes held: each record's allocation as the allocator rounds it, plus
    /// [`ENTRY_OVERHEAD`].
    pub used_bytes: u64,
    pub capacity_bytes: u64,
    pub records: u64,
    pub hits: u64,
    pub misses: u64,
    pub evictions: u64,
}

impl HotStats {
    /// Adds `o`'s counters to these (the totals over shards).
    pub fn add(&mut self, o: &HotStats) {
        self.used_bytes += o.used_bytes;
        self.capacity_bytes += o.capacity_bytes;
        self.records += o.records;
        self.hits += o.hits;
        self.misses += o.misses;
        self.evictions += o.evictions;
    }
}

/// A ticket from [`HotTier::begin_read`]: whether the read may promote what it finds.
pub struct ReadTicket(Option<u64>);

/// A ticket from [`HotTier::begin_write`]: the write's place among the tier's writes,
/// whether every write before it had finished when it began, and the records of the write
/// that the tier held then, by key hash, with their new contents (`None`: deleted, or too
/// large to cache: removed).
#[must_use = "pass it to HotTier::end_write"]
pub struct WriteTicket {
    place: u64,
    after_all: bool,
    cached: Vec<(u64, Option<Record>)>,
}

impl HotTier {
    /// A tier of `capacity` bytes.
    pub fn new(capacity: u64) -> HotTier {
        let evictions = CountEvictions::default();
        let counter = evictions.0.clone();
        // The cache sizes its table for this many entries up front: a typical record of a
        // small key and a 128-byte value.
        let items = (capacity / 256).clamp(16, 1 << 24) as usize;
        HotTier {
            cache: Cache::with(
                items,
                capacity.max(1),
                ByBytes,
                Default::default(),
                evictions,
            ),
            capacity: AtomicU64::new(capacity),
            evictions: counter,
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            started: AtomicU64::new(0),
            finished: AtomicU64::new(0),
            promote: Mutex::new(()),
        }
    }

    /// Changes the capacity (evicting at once if it shrank).
    pub fn set_capacity(&self, capacity: u64) {
        self.capacity.store(capacity, Ordering::Relaxed);
        self.cache.set_capacity(capacity.max(1));
        if capacity == 0 {
            self.cache.clear();
        }
    }

    /// Whether the tier has a capacity (0: switched off, reads and writes bypass it).
    pub fn enabled(&self) -> bool {
        self.capacity.load(Ordering::Relaxed) > 0
    }

    /// The cached value of `key`, counting a hit or a miss.
    pub fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
        let found = self.cache.get(&key_hash(key));
        match found.as_deref().and_then(|r| record_value(r, key)) {
            Some(v) => {
                self.hits.fetch_add(1, Ordering::Relaxed);
                Some(v.to_vec())
            }
            None => {
                self.misses.fetch_add(1, Ordering::Relaxed);
                None
            }
        }
    }

    /// Call before reading the engine for a miss; pass the ticket to [`HotTier::promote`].
    pub fn begin_read(&self) -> ReadTicket {
        let started = self.started.load(Ordering::SeqCst);
        let finished = self.finished.load(Ordering::SeqCst);
        ReadTicket((started == finished).then_some(started))
    }

    /// Caches `value`, read from the engine for `key` after `ticket` was taken, unless a
    /// write may have changed the key meanwhile (see the module comment).
    pub fn promote(&self, ticket: &ReadTicket, key: &[u8], value: &[u8]) {
        let Some(started) = ticket.0 else { return };
        if !self.fits(key, value) {
            return;
        }
        let _g = self.promote.lock();
        if self.started.load(Ordering::SeqCst) == started {
            self.cache.insert(key_hash(key), make_record(key, value));
        }
    }

    /// Call before a write reaches the engine, with its records (`None`: deleted), in the
    /// order the engine applies them.
    pub fn begin_write<'a>(
        &self,
        records: impl Iterator<Item = (&'a [u8], Option<&'a [u8]>)>,
    ) -> WriteTicket {
        let _g = self.promote.lock();
        let place = self.started.fetch_add(1, Ordering::SeqCst);
        let after_all = self.finished.load(Ordering::SeqCst) == place;
        let mut cached: Vec<(u64, Option<Record>)> = Vec::new();
        // Nothing cached (a write-only load, a tier not yet read): no lookup can find a
        // record, and each would cost a cache miss under this lock (5.6% of a pipelined
        // SET's CPU). Entries come in only under `promote`, held here, so it stays empty
        // for as long as the lookups would have taken.
        if self.cache.is_empty() {
            return WriteTicket {
                place,
                after_all,
                cached,
            };
        }
        for (k, v) in records {
            let hash = key_hash(k);
            // Whatever record holds this hash is updated: if it is another key's,
            // replacing or dropping its RAM copy is harmless. A key written twice in one
            // batch is found twice and updated in order, so its last write is what stays.
            if self.cache.contains_key(&hash) {
                let record = v.filter(|v| self.fits(k, v)).map(|v| make_record(k, v));
                cached.push((hash, record));
            }
        }
        WriteTicket {
            place,
            after_all,
            cached,
        }
    }

    /// Call after the write, `applied` if the engine applied it. The records the tier held
    /// when it began are replaced by the written ones; if it failed (a failed write may have
    /// reached the engine in part) or overlapped another write, they are removed (see the
    /// module comment). Nothing is inserted.
    pub fn end_write(&self, ticket: WriteTicket, applied: bool) {
        let _g = self.promote.lock();
        let alone = ticket.after_all && self.started.load(Ordering::SeqCst) == ticket.place + 1;
        for (hash, record) in ticket.cached {
            match record {
                Some(r) if applied && alone => {
                    // Not admitted (the entry was evicted meanwhile): nothing stale is left.
                    if self.cache.replace(hash, r, false).is_err() {
                        self.cache.remove(&hash);
                    }
                }
                _ => {
                    self.cache.remove(&hash);
                }
            }
        }
        self.finished.fetch_add(1, Ordering::SeqCst);
    }

    fn fits(&self, key: &[u8], value: &[u8]) -> bool {
        record_cost(key, value) <= self.cache.capacity() / MAX_ITEM_SHARE
    }

    pub fn stats(&self) -> HotStats {
        HotStats {
            used_bytes: self.cache.weight(),
            capacity_bytes: self.cache.capacity(),
            records: self.cache.len() as u64,
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            evictions: self.evictions.load(Ordering::Relaxed),
        }
    }

    /// Whether `key` is cached now (for tests; not a hit or miss).
    pub fn contains(&self, key: &[u8]) -> bool {
        self.cache
            .peek(&key_hash(key))
            .is_some_and(|r| record_value(&r, key).is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One write of `records`, `applied` or not, begun and ended at once.
    fn write(t: &HotTier, records: &[(&[u8], Option<&[u8]>)], applied: bool) {
        let w = t.begin_write(records.iter().copied());
        t.end_write(w, applied);
    }

    fn promote(t: &HotTier, key: &[u8], value: &[u8]) {
        let tk = t.begin_read();
        t.promote(&tk, key, value);
    }

    #[test]
    fn writes_update_what_is_cached_and_insert_nothing() {
        let t = HotTier::new(64 * 1024);
        // A write of a key the tier does not hold leaves it out.
        write(&t, &[(b"a", Some(b"1"))], true);
        assert!(!t.contains(b"a"));
        assert_eq!(t.stats().records, 0);
        // A read fills it; the next write replaces the cached value, a delete removes it.
        promote(&t, b"a", b"1");
        assert_eq!(t.get(b"a"), Some(b"1".to_vec()));
        write(&t, &[(b"a", Some(b"2")), (b"z", Some(b"9"))], true);
        assert_eq!(t.get(b"a"), Some(b"2".to_vec()));
        assert!(!t.contains(b"z"));
        write(&t, &[(b"a", None)], true);
        assert_eq!(t.get(b"a"), None);
        // A key written twice in one batch ends with its last write, whatever the order.
        promote(&t, b"a", b"1");
        write(&t, &[(b"a", Some(b"2")), (b"a", Some(b"3"))], true);
        assert_eq!(t.get(b"a"), Some(b"3".to_vec()));
        write(&t, &[(b"a", None), (b"a", Some(b"4"))], true);
        let v = t.get(b"a");
        assert!(v.is_none() || v.as_deref() == Some(&b"4"[..]), "{v:?}");
        // A failed write drops what it named.
        promote(&t, b"b", b"2");
        assert_eq!(t.get(b"b"), Some(b"2".to_vec()));
        write(&t, &[(b"b", Some(b"3"))], false);
        assert_eq!(t.get(b"b"), None);
        // A value too large to cache replaces a cached one by removing it.
        promote(&t, b"c", b"small");
        write(&t, &[(b"c", Some(&vec![0u8; 8 * 1024]))], true);
        assert!(!t.contains(b"c"));
        // Bounded: far more than fits.
        for i in 0..10_000u32 {
            promote(&t, &i.to_be_bytes(), &[7u8; 100]);
        }
        let s = t.stats();
        assert!(s.used_bytes <= 64 * 1024, "{s:?}");
        assert!(s.evictions > 0 && s.records > 100, "{s:?}");
        // Oversized records are not cached.
        promote(&t, b"big", &vec![0u8; 8 * 1024]);
        assert!(!t.contains(b"big"));
    }

    #[test]
    fn a_record_answers_only_for_its_own_key() {
        let r = make_record(b"key", b"value");
        assert_eq!(record_value(&r, b"key"), Some(&b"value"[..]));
        // Another key of the same length, a prefix and an extension of it: never a hit,
        // whatever hash they share.
        for other in [&b"kez"[..], b"ke", b"keyv", b""] {
            assert_eq!(record_value(&r, other), None, "{other:?}");
        }
        assert_eq!(record_value(&make_record(b"", b""), b""), Some(&b""[..]));
    }

    #[test]
    fn records_are_weighed_as_the_allocator_holds_them() {
        // 16 bytes of reference counts + 4 of key length + 3 + 1 = 24, plus the 8-byte
        // header, rounded to 32.
        assert_eq!(record_cost(b"abc", b"x"), 32 + ENTRY_OVERHEAD);
        // 16 + 4 + 20 + 128 = 168 + 8 = 176.
        assert_eq!(record_cost(&[0; 20], &[0; 128]), 176 + ENTRY_OVERHEAD);
        let t = HotTier::new(1 << 20);
        let tk = t.begin_read();
        t.promote(&tk, &[1; 20], &[2; 128]);
        assert_eq!(t.stats().used_bytes, 176 + ENTRY_OVERHEAD);
    }

    #[test]
    fn a_read_racing_a_write_does_not_promote_the_old_value() {
        let t = HotTier::new(1 << 20);
        // The write begins after the read began: the read's value may be the old one.
        let tk = t.begin_read();
        write(&t, &[(b"k", Some(b"new"))], true);
        t.promote(&tk, b"k", b"old");
        assert_eq!(t.get(b"k"), None);
        // A write in flight when the read begins: no promotion either.
        let w = t.begin_write([(&b"k"[..], None)].into_iter());
        let tk = t.begin_read();
        t.promote(&tk, b"k", b"old");
        t.end_write(w, true);
        assert_eq!(t.get(b"k"), None);
        // A read promoting while a write of a cached key is in flight: the write, which
        // found the key cached when it began, leaves its own value.
        promote(&t, b"k", b"old");
        let tk = t.begin_read();
        let w = t.begin_write([(&b"k"[..], Some(&b"new"[..]))].into_iter());
        t.promote(&tk, b"k", b"older");
        t.end_write(w, true);
        assert_eq!(t.get(b"k"), Some(b"new".to_vec()));
        write(&t, &[(b"k", None)], true);
        // No write around: promoted.
        let tk = t.begin_read();
        t.promote(&tk, b"k", b"v");
        assert_eq!(t.get(b"k"), Some(b"v".to_vec()));
    }

    #[test]
    fn overlapping_writes_leave_the_key_uncached_in_either_order() {
        for second_ends_first in [false, true] {
            let t = HotTier::new(1 << 20);
            promote(&t, b"k", b"0");
            assert!(t.contains(b"k"));
            // Two writes of k in flight at once: the engine may hold either value last.
            let a = t.begin_write([(&b"k"[..], Some(&b"1"[..]))].into_iter());
            let b = t.begin_write([(&b"k"[..], Some(&b"2"[..]))].into_iter());
            let ends = if second_ends_first { [b, a] } else { [a, b] };
            for w in ends {
                t.end_write(w, true);
            }
            assert!(!t.contains(b"k"), "second ends first: {second_ends_first}");
            // Alone again: a read fills it and the tier follows the writes.
            promote(&t, b"k", b"2");
            write(&t, &[(b"k", Some(b"3"))], true);
            assert_eq!(t.get(b"k"), Some(b"3".to_vec()));
        }
    }
}
