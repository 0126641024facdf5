//! The block cache: uncompressed blocks shared by every table of an instance, bounded in
//! bytes.
//!
//! Keyed by `(file number, block offset)`; values are `Arc<Block>`, so a hit hands out the
//! cached block without copying it. Built on `quick_cache`'s sharded CLOCK-Pro cache with a
//! weighter that charges each block its byte size. A capacity of 0 disables the cache: `get`
//! always misses (without counting) and `insert` does nothing.

use crate::sst::Block;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Fixed bytes charged per cached block on top of its data (the `Block` struct, the `Arc`
/// header and the cache's own slot), so that many tiny blocks cannot exceed the budget.
const PER_BLOCK_OVERHEAD: u64 = 128;

#[derive(Clone, Copy, Default)]
struct BlockWeighter;

impl quick_cache::Weighter<(u64, u64), Arc<Block>> for BlockWeighter {
    fn weight(&self, _key: &(u64, u64), block: &Arc<Block>) -> u64 {
        block.size() as u64 + PER_BLOCK_OVERHEAD
    }
}

type Inner = quick_cache::sync::Cache<(u64, u64), Arc<Block>, BlockWeighter>;

/// A byte-bounded cache of uncompressed blocks.
pub struct BlockCache {
    inner: Option<Inner>,
    capacity: u64,
    hits: AtomicU64,
    misses: AtomicU64,
}

impl BlockCache {
    /// A cache holding up to `capacity_bytes` of blocks (0 = disabled).
    pub fn new(capacity_bytes: usize) -> Self {
        let capacity = capacity_bytes as u64;
        let inner = (capacity > 0).then(|| {
            // Items estimate for the hash tables: 4 KiB blocks.
            let items = (capacity_bytes / 4096).max(16);
            Inner::with_weighter(items, capacity, BlockWeighter)
        });
        BlockCache {
            inner,
            capacity,
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    /// The block at `offset` of table `file_number`, if cached.
    #[inline]
    pub fn get(&self, file_number: u64, offset: u64) -> Option<Arc<Block>> {
        let inner = self.inner.as_ref()?;
        let r = inner.get(&(file_number, offset));
        let counter = if r.is_some() {
            &self.hits
        } else {
            &self.misses
        };
        counter.fetch_add(1, Ordering::Relaxed);
        r
    }

    /// Caches `block` as the block at `offset` of table `file_number`.
    pub fn insert(&self, file_number: u64, offset: u64, block: Arc<Block>) {
        if let Some(inner) = &self.inner {
            inner.insert((file_number, offset), block);
        }
    }

    /// Lookups that found their block.
    pub fn hits(&self) -> u64 {
        self.hits.load(Ordering::Relaxed)
    }

    /// Lookups that did not.
    pub fn misses(&self) -> u64 {
        self.misses.load(Ordering::Relaxed)
    }

    /// Bytes charged for the blocks cached now.
    pub fn usage_bytes(&self) -> u64 {
        self.inner.as_ref().map_or(0, |c| c.weight())
    }

    /// The configured capacity in bytes.
    pub fn capacity_bytes(&self) -> u64 {
        self.capacity
    }

    /// Number of cached blocks.
    pub fn len(&self) -> usize {
        self.inner.as_ref().map_or(0, |c| c.len())
    }

    /// Whether no block is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl std::fmt::Debug for BlockCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlockCache")
            .field("capacity", &self.capacity)
            .field("usage", &self.usage_bytes())
            .field("hits", &self.hits())
            .field("misses", &self.misses())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn block(n: usize) -> Arc<Block> {
        let mut data = vec![0u8; n];
        data.extend_from_slice(&0u32.to_le_bytes());
        data.extend_from_slice(&1u32.to_le_bytes());
        Arc::new(Block::new(data, Arc::from(Path::new("t")), 0, false).unwrap())
    }

    #[test]
    fn counts_hits_and_misses() {
        let c = BlockCache::new(1 << 20);
        assert!(c.get(1, 0).is_none());
        c.insert(1, 0, block(100));
        let b = c.get(1, 0).unwrap();
        assert_eq!(b.size(), 108);
        assert!(c.get(2, 0).is_none());
        assert_eq!((c.hits(), c.misses()), (1, 2));
        assert_eq!(c.usage_bytes(), 108 + PER_BLOCK_OVERHEAD);
    }

    #[test]
    fn bounded_in_bytes() {
        let c = BlockCache::new(64 << 10);
        for i in 0..1000 {
            c.insert(7, i * 4096, block(4000));
        }
        assert!(c.usage_bytes() <= 64 << 10, "{}", c.usage_bytes());
        assert!(c.len() >= 8, "{}", c.len());
    }

    #[test]
    fn zero_capacity_disables() {
        let c = BlockCache::new(0);
        c.insert(1, 0, block(10));
        assert!(c.get(1, 0).is_none());
        assert_eq!((c.hits(), c.misses(), c.usage_bytes()), (0, 0, 0));
    }
}
