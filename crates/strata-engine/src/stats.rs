//! Counters behind [`crate::Stats`]. Relaxed atomics: figures, not synchronization.

use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Default)]
pub struct Counters {
    pub user_bytes: AtomicU64,
    pub wal_bytes: AtomicU64,
    pub wal_syncs: AtomicU64,
    pub write_groups: AtomicU64,
    pub writes: AtomicU64,
    pub flush_bytes: AtomicU64,
    pub compaction_bytes_written: AtomicU64,
    pub compaction_bytes_read: AtomicU64,
    pub stall_micros: AtomicU64,
    pub slowdowns: AtomicU64,
    pub stops: AtomicU64,
    pub flushes: AtomicU64,
    /// Flushes that wrote an L0 tier table.
    pub l0_tier_flushes: AtomicU64,
    /// Values compaction copied from the log into SSTables (the L0 tier's pointers).
    pub l0_tier_values_copied: AtomicU64,
    pub compactions: AtomicU64,
    pub trivial_moves: AtomicU64,
    pub filter_checks: AtomicU64,
    pub filter_negatives: AtomicU64,
    /// `multi_get` calls and the keys they asked for.
    pub multi_gets: AtomicU64,
    pub multi_get_keys: AtomicU64,
    /// Batched reads submitted by `multi_get` (one per stage with cache misses), by the
    /// backend that ran them, and the reads in them.
    pub read_batches_uring: AtomicU64,
    pub read_batches_threads: AtomicU64,
    pub read_batches_sync: AtomicU64,
    pub batched_reads: AtomicU64,
    /// Bytes appended to the value log (frames, by writers and GC).
    pub vlog_bytes: AtomicU64,
    /// Values written as pointers (separated).
    pub vlog_values: AtomicU64,
    pub gc_runs: AtomicU64,
    pub gc_bytes_read: AtomicU64,
    /// Bytes of live values GC rewrote (keys and values).
    pub gc_bytes_written: AtomicU64,
    pub gc_values_relocated: AtomicU64,
    pub gc_files_collected: AtomicU64,
    /// Records the compaction filter removed (flushes, compactions and GC relocations).
    pub filter_removed: AtomicU64,
    /// Flushes and compactions redone without the filter because a snapshot taken while
    /// they ran could read what it removed.
    pub filter_retries: AtomicU64,
    /// Separated values read from the value log because the filter asked for them.
    pub filter_value_reads: AtomicU64,
}

impl Counters {
    #[inline]
    pub fn add(c: &AtomicU64, n: u64) {
        c.fetch_add(n, Ordering::Relaxed);
    }

    #[inline]
    pub fn get(c: &AtomicU64) -> u64 {
        c.load(Ordering::Relaxed)
    }
}
