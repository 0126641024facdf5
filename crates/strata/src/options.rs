//! Options of a sharded database ([`Options`]). Only the shard count (with the routing hash and
//! the engine's name) is persisted, in the `SHARDS` file; everything else may change between
//! opens.

use crate::routing::Routing;
use strata_engine::{Error, Result};

/// How a [`crate::ShardedDb`] is opened. `C` is the engine's own options, applied to every
/// shard (so memory budgets such as write buffers and caches are per shard).
#[derive(Clone)]
pub struct Options<C> {
    /// Number of shards (engine instances, each with one worker thread). `None` (default):
    /// the persisted count when the database exists, else the number of cores. Persisted;
    /// reopening with a different count fails with [`Error::InvalidArgument`] (keys would be
    /// routed to the wrong shard). More shards remove contention on one WAL and memtable and
    /// let writes use more cores; each shard costs a thread, a WAL, memtables and background
    /// threads.
    pub shards: Option<usize>,
    /// How keys map to shards (`routing.rs`). `None` (default): the persisted routing when the
    /// database exists, else [`Routing::Hash`]. Persisted with the shard count; reopening with
    /// a different routing fails with [`Error::InvalidArgument`].
    pub routing: Option<Routing>,
    /// Opportunistic batching: a worker merges up to this many consecutive queued requests of
    /// the same type (writes into one engine write batch, reads into one `multi_get`).
    /// Default: 32 (p2KVS). 1 turns batching off. Larger batches amortize more per-request
    /// work but make the requests at the end of a batch wait for the whole batch.
    pub max_batch: usize,
    /// Requests each shard's queue holds before callers block (backpressure). Default: 1024.
    pub queue_depth: usize,
    /// Pin worker `i` to core `i mod cores`. Default: false. Pinning avoids migrations (p2KVS
    /// measured 10–15%) on a dedicated machine; on a shared or oversubscribed one it can leave
    /// a worker stuck behind another busy thread.
    pub pin_workers: bool,
    /// Let `get` and `multi_get` read a shard in the calling thread when no write is queued
    /// or being applied in that shard (otherwise they go through the worker, which keeps
    /// per-key order with the caller's earlier asynchronous writes). Default: true. Off, every
    /// read goes through the worker and is batched, as in p2KVS; but the hand-off costs two
    /// thread switches per read, and with more client threads than cores that dominates:
    /// on 2 cores, 8 threads, readrandom ran 125k reads/s through the workers against 644k
    /// direct, and YCSB A 103k against 143k ops/s (`docs/benchmarks.md`, the sharded-front benchmarks). Reads
    /// issued while the shard is writing still go through the worker and are batched.
    pub direct_reads: bool,
    /// Let `put`, `delete` and `write` of a batch within one shard write the shard's engine
    /// in the calling thread when no write is queued in that shard (otherwise they are
    /// queued behind it, which keeps per-key order with the caller's earlier asynchronous
    /// writes). Default: true. The engine's commit pipeline already lets many threads write
    /// one instance at once, and a synced write still shares its fsync with the others in
    /// flight; the hand-off to the worker cost two thread switches per write and made the
    /// front slower than the engine it wraps (`docs/benchmarks.md`, the sharded front).
    /// Such writes wait while the shard's worker applies a cross-shard part (until it
    /// commits) or runs executions, so they never interleave with either. Off, every write
    /// goes through the worker and is batched, as in p2KVS. The asynchronous forms are
    /// always queued.
    pub direct_writes: bool,
    /// Bytes of RAM for the hot tier (`hot.rs`), split evenly over the shards: recently and
    /// frequently read records (filled by reads that miss; writes update only what it
    /// holds), served without reading the engine. Default: 0
    /// (off; the engine's own block cache still applies). Engines without a hot tier ignore
    /// it. Changed live with [`crate::ShardedDb::set_hot_bytes`].
    pub hot_bytes: u64,
    /// Options of each engine instance.
    pub engine: C,
}

impl<C: Default> Default for Options<C> {
    fn default() -> Self {
        Options {
            shards: None,
            routing: None,
            max_batch: 32,
            queue_depth: 1024,
            pin_workers: false,
            direct_reads: true,
            direct_writes: true,
            hot_bytes: 0,
            engine: C::default(),
        }
    }
}

impl<C> Options<C> {
    /// Options with `engine` and the front's defaults.
    pub fn with_engine(engine: C) -> Self {
        Options {
            shards: None,
            routing: None,
            max_batch: 32,
            queue_depth: 1024,
            pin_workers: false,
            direct_reads: true,
            direct_writes: true,
            hot_bytes: 0,
            engine,
        }
    }

    /// Returns a clear error for impossible values.
    pub fn validate(&self) -> Result<()> {
        if let Some(n) = self.shards {
            if !(1..=crate::meta::MAX_SHARDS).contains(&n) {
                return Err(Error::InvalidArgument(format!(
                    "shards must be between 1 and {}, got {n}",
                    crate::meta::MAX_SHARDS
                )));
            }
        }
        if self.max_batch == 0 {
            return Err(Error::InvalidArgument(
                "max_batch must be at least 1 (1 turns batching off)".to_string(),
            ));
        }
        if self.queue_depth == 0 {
            return Err(Error::InvalidArgument(
                "queue_depth must be at least 1".to_string(),
            ));
        }
        Ok(())
    }
}

/// The number of cores, the default shard count of a new database.
pub fn default_shards() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2)
        .min(crate::meta::MAX_SHARDS)
}

/// Options of one write.
#[derive(Clone, Copy, Debug, Default)]
pub struct WriteOptions {
    /// Durable (WAL fsynced) before the call returns. Default: false. Requests merged into one
    /// engine batch share one fsync. Cross-shard batches are always synced (their atomicity
    /// relies on it).
    pub sync: bool,
}

/// Bounds of an iterator.
#[derive(Clone, Debug, Default)]
pub struct IterOptions {
    /// Skip keys below this one (inclusive bound).
    pub lower_bound: Option<Vec<u8>>,
    /// Stop before this key (exclusive bound).
    pub upper_bound: Option<Vec<u8>>,
}

/// The two ways of running `scan(start, count)` across shards (p2KVS §Range Query).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScanMode {
    /// A global iterator merging the shards' iterators, read serially: reads only what it
    /// returns.
    Merged,
    /// Every shard scans `count` keys from `start` in parallel (on its worker); the results are
    /// merged and cut to `count`: up to `shards` times more reads, but in parallel.
    Parallel,
}
