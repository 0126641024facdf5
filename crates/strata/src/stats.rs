//! Batch-size statistics of opportunistic batching, per shard and summed.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

/// Counters one worker updates (relaxed atomics; read at any time).
pub(crate) struct ShardCounters {
    /// `write_sizes[n]`: engine writes that merged `n` requests.
    write_sizes: Vec<AtomicU64>,
    /// `read_sizes[n]`: batched reads that merged `n` requests.
    read_sizes: Vec<AtomicU64>,
    read_keys: AtomicU64,
    cross_parts: AtomicU64,
    cross_part_writes: AtomicU64,
    scans: AtomicU64,
    direct_writes: AtomicU64,
}

impl ShardCounters {
    pub(crate) fn new(max_batch: usize) -> Self {
        let v = || (0..=max_batch).map(|_| AtomicU64::new(0)).collect();
        ShardCounters {
            write_sizes: v(),
            read_sizes: v(),
            read_keys: AtomicU64::new(0),
            cross_parts: AtomicU64::new(0),
            cross_part_writes: AtomicU64::new(0),
            scans: AtomicU64::new(0),
            direct_writes: AtomicU64::new(0),
        }
    }
    pub(crate) fn record_write(&self, requests: usize) {
        let i = requests.min(self.write_sizes.len() - 1);
        self.write_sizes[i].fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn record_read(&self, requests: usize, keys: usize) {
        let i = requests.min(self.read_sizes.len() - 1);
        self.read_sizes[i].fetch_add(1, Ordering::Relaxed);
        self.read_keys.fetch_add(keys as u64, Ordering::Relaxed);
    }
    /// One engine write that applied `parts` parts of cross-shard batches.
    pub(crate) fn record_cross_parts(&self, parts: usize) {
        self.cross_part_writes.fetch_add(1, Ordering::Relaxed);
        self.cross_parts.fetch_add(parts as u64, Ordering::Relaxed);
    }
    /// One write applied in its caller's thread (`Options::direct_writes`).
    pub(crate) fn record_direct_write(&self) {
        self.direct_writes.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn record_scan(&self) {
        self.scans.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn snapshot(&self) -> BatchStats {
        let load = |v: &Vec<AtomicU64>| v.iter().map(|a| a.load(Ordering::Relaxed)).collect();
        BatchStats {
            write_sizes: load(&self.write_sizes),
            read_sizes: load(&self.read_sizes),
            read_keys: self.read_keys.load(Ordering::Relaxed),
            cross_shard_parts: self.cross_parts.load(Ordering::Relaxed),
            cross_shard_part_writes: self.cross_part_writes.load(Ordering::Relaxed),
            scans: self.scans.load(Ordering::Relaxed),
            direct_writes: self.direct_writes.load(Ordering::Relaxed),
        }
    }
}

/// What opportunistic batching did (see [`crate::ShardedDb::batch_stats`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BatchStats {
    /// `write_sizes[n]`: engine writes that merged `n` queued write requests (index 0 unused).
    pub write_sizes: Vec<u64>,
    /// `read_sizes[n]`: engine reads that merged `n` queued read requests.
    pub read_sizes: Vec<u64>,
    /// Keys looked up by those reads.
    pub read_keys: u64,
    /// Parts of cross-shard batches applied.
    pub cross_shard_parts: u64,
    /// Engine writes that applied them (consecutive queued parts share one).
    pub cross_shard_part_writes: u64,
    /// Range and parallel-scan jobs run on workers.
    pub scans: u64,
    /// Writes applied in their callers' threads, not through a worker
    /// (`Options::direct_writes`; not in `write_sizes`).
    pub direct_writes: u64,
}

fn totals(sizes: &[u64]) -> (u64, u64) {
    let batches = sizes.iter().sum();
    let reqs = sizes.iter().enumerate().map(|(n, c)| n as u64 * c).sum();
    (batches, reqs)
}

impl BatchStats {
    /// Engine writes issued.
    pub fn write_batches(&self) -> u64 {
        totals(&self.write_sizes).0
    }
    /// Write requests served by them.
    pub fn write_requests(&self) -> u64 {
        totals(&self.write_sizes).1
    }
    /// Batched engine reads issued.
    pub fn read_batches(&self) -> u64 {
        totals(&self.read_sizes).0
    }
    /// Read requests served by them.
    pub fn read_requests(&self) -> u64 {
        totals(&self.read_sizes).1
    }
    /// Mean write requests per engine write (1.0 without batching).
    pub fn mean_write_batch(&self) -> f64 {
        let (b, r) = totals(&self.write_sizes);
        if b == 0 {
            0.0
        } else {
            r as f64 / b as f64
        }
    }
    /// Mean read requests per engine read.
    pub fn mean_read_batch(&self) -> f64 {
        let (b, r) = totals(&self.read_sizes);
        if b == 0 {
            0.0
        } else {
            r as f64 / b as f64
        }
    }
    /// Adds `other` (another shard) into `self`.
    pub fn add(&mut self, other: &BatchStats) {
        let grow = |a: &mut Vec<u64>, b: &Vec<u64>| {
            if a.len() < b.len() {
                a.resize(b.len(), 0);
            }
            for (x, y) in a.iter_mut().zip(b) {
                *x += y;
            }
        };
        grow(&mut self.write_sizes, &other.write_sizes);
        grow(&mut self.read_sizes, &other.read_sizes);
        self.read_keys += other.read_keys;
        self.cross_shard_parts += other.cross_shard_parts;
        self.cross_shard_part_writes += other.cross_shard_part_writes;
        self.scans += other.scans;
        self.direct_writes += other.direct_writes;
    }
}

impl fmt::Display for BatchStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "writes: {} requests in {} engine writes (mean batch {:.2}), {} direct",
            self.write_requests(),
            self.write_batches(),
            self.mean_write_batch(),
            self.direct_writes
        )?;
        writeln!(
            f,
            "reads:  {} requests ({} keys) in {} engine reads (mean batch {:.2})",
            self.read_requests(),
            self.read_keys,
            self.read_batches(),
            self.mean_read_batch()
        )?;
        write!(
            f,
            "cross-shard parts: {} in {} writes, range/scan jobs: {}",
            self.cross_shard_parts, self.cross_shard_part_writes, self.scans
        )
    }
}
