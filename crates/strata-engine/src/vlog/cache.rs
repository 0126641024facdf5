//! Verified values for point reads: a value-log entry checked once is kept, as a private
//! copy, so reading it again costs neither its checksum nor a look at the log's pages.
//!
//! Why: with the L0 tier on, a value of 32 bytes or more stays in the value log and every
//! `get` of it re-verified the whole log entry (crc32c over key and value) in the file's
//! mapping: half of a tier read (`docs/benchmarks.md`, "The L0 tier pointing into the log").
//! The block cache answers the same question for SSTables by keeping blocks it verified;
//! this is its counterpart for log entries (RocksDB's blob cache), kept apart from the block
//! cache so values never push out the blocks lookups need (tried: it did).
//!
//! **What is trusted.** A cached value is a copy taken from bytes that had just passed every
//! check of a pointer read (checksum, length, kind, key) and lives in the process's own
//! memory, so it cannot change under the reader: a page of the log the kernel drops and
//! reads from the device again, or bytes damaged on disk after the first read, are never
//! returned through the cache. A hit still requires the reader's key and the pointer's
//! length to match what was verified. The location `(file, offset)` names the entry for
//! the whole life of the process: log files are append-only, never rewritten, and their
//! numbers are never reused.
//!
//! **Admission.** A value is copied into the cache only on its second miss within the
//! recent past (a direct-mapped table of location tags): a uniform or scanning workload
//! pays one tag store per read instead of an allocation and a copy, and the hot set earns
//! its place. Capacity: `Options::vlog_value_cache_bytes`.

use super::ValuePointer;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Bytes charged per cached value on top of its key and value (the `Arc`, the boxes and
/// the cache's slot).
const PER_VALUE_OVERHEAD: u64 = 96;

/// A verified log entry's key and value.
struct Verified {
    len: u32,
    key: Box<[u8]>,
    value: Box<[u8]>,
}

#[derive(Clone, Copy, Default)]
struct Weigh;

impl quick_cache::Weighter<(u64, u64), Arc<Verified>> for Weigh {
    fn weight(&self, _: &(u64, u64), v: &Arc<Verified>) -> u64 {
        (v.key.len() + v.value.len()) as u64 + PER_VALUE_OVERHEAD
    }
}

/// A byte-bounded cache of verified log values, by location.
pub(crate) struct ValueCache {
    inner: quick_cache::sync::Cache<(u64, u64), Arc<Verified>, Weigh>,
    /// Admission: the tag of the last location that missed in each slot.
    seen: Box<[AtomicU64]>,
    hits: AtomicU64,
    misses: AtomicU64,
}

impl ValueCache {
    /// A cache of up to `capacity_bytes`; `None` for 0 (no cache).
    pub(crate) fn new(capacity_bytes: usize) -> Option<ValueCache> {
        if capacity_bytes == 0 {
            return None;
        }
        // Items estimate: 4 KiB values. Admission slots: 8 per item (8 bytes each, 1/512 of
        // the capacity), so a location read twice while a working set several times the
        // cache's size was read is still likely to find its tag.
        let items = (capacity_bytes / 4096).max(64);
        Some(ValueCache {
            inner: quick_cache::sync::Cache::with_weighter(items, capacity_bytes as u64, Weigh),
            seen: (0..(8 * items).max(4096).next_power_of_two())
                .map(|_| AtomicU64::new(0))
                .collect(),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        })
    }

    /// The verified value `ptr` names, if cached for this `key`.
    pub(crate) fn get(&self, ptr: &ValuePointer, key: &[u8]) -> Option<Vec<u8>> {
        let hit = self
            .inner
            .get(&(ptr.file, ptr.offset))
            .filter(|v| v.len == ptr.len && *v.key == *key);
        let counter = if hit.is_some() {
            &self.hits
        } else {
            &self.misses
        };
        counter.fetch_add(1, Ordering::Relaxed);
        hit.map(|v| v.value.to_vec())
    }

    /// Offers a value a read has just verified at `ptr` for `key`: cached if its location
    /// missed recently too.
    pub(crate) fn offer(&self, ptr: &ValuePointer, key: &[u8], value: &[u8]) {
        let h = mix(ptr.file, ptr.offset);
        let slot = &self.seen[(h as usize) & (self.seen.len() - 1)];
        let tag = h | 1;
        if slot.swap(tag, Ordering::Relaxed) != tag {
            return;
        }
        let v = Verified {
            len: ptr.len,
            key: key.into(),
            value: value.into(),
        };
        self.inner.insert((ptr.file, ptr.offset), Arc::new(v));
    }

    /// Reads answered from the cache.
    pub(crate) fn hits(&self) -> u64 {
        self.hits.load(Ordering::Relaxed)
    }

    /// Reads that were not.
    pub(crate) fn misses(&self) -> u64 {
        self.misses.load(Ordering::Relaxed)
    }

    /// Bytes held (as charged).
    pub(crate) fn bytes(&self) -> u64 {
        self.inner.weight()
    }
}

/// A location's hash (SplitMix64's finaliser over both words).
fn mix(file: u64, offset: u64) -> u64 {
    let mut z = file.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ offset;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ptr(offset: u64) -> ValuePointer {
        ValuePointer {
            file: 3,
            offset,
            len: 40,
        }
    }

    #[test]
    fn admits_on_the_second_miss_and_checks_key_and_length() {
        let c = ValueCache::new(1 << 20).unwrap();
        assert!(ValueCache::new(0).is_none());
        assert_eq!(c.get(&ptr(10), b"k"), None);
        c.offer(&ptr(10), b"k", b"value");
        assert_eq!(c.get(&ptr(10), b"k"), None, "one miss does not admit");
        c.offer(&ptr(10), b"k", b"value");
        assert_eq!(c.get(&ptr(10), b"k").as_deref(), Some(&b"value"[..]));
        assert_eq!(c.get(&ptr(10), b"other"), None, "another key never hits");
        let longer = ValuePointer { len: 41, ..ptr(10) };
        assert_eq!(c.get(&longer, b"k"), None, "another length never hits");
        let other_file = ValuePointer { file: 4, ..ptr(10) };
        assert_eq!(c.get(&other_file, b"k"), None);
        assert_eq!((c.hits(), c.misses()), (1, 5));
        assert!(c.bytes() > 0);
    }

    #[test]
    fn stays_within_its_capacity() {
        let c = ValueCache::new(64 << 10).unwrap();
        let v = vec![7u8; 1000];
        for _ in 0..2 {
            for i in 0..1000 {
                c.offer(&ptr(i * 2000), b"key", &v);
            }
        }
        assert!(c.bytes() <= 64 << 10, "{}", c.bytes());
        assert!(c.bytes() > 0);
    }
}
