//! The table cache: open [`Table`] readers (file handle, index and filter in memory), bounded
//! by `max_open_files`.

use crate::cache::BlockCache;
use crate::error::Result;
use crate::filename;
use crate::io::Fs;
use crate::iter::InternalIterator;
use crate::l0tier::{L0Table, TierDir};
use crate::sst::{ReadParams, Table};
use crate::version::FileMeta;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

pub struct TableCache {
    dir: PathBuf,
    fs: Arc<dyn Fs>,
    tables: quick_cache::sync::Cache<u64, Arc<Table>>,
    block_cache: Option<Arc<BlockCache>>,
    /// Open table files with `O_DIRECT` (`Options::direct_io`).
    direct_io: bool,
    /// The L0 tier's directory and its mapped tables, when the tier is on.
    tier: Option<Arc<TierDir>>,
    /// Open tables with a learned index (`Options::sst_learned_index`).
    learned_index: bool,
    hits: AtomicU64,
    misses: AtomicU64,
}

impl TableCache {
    pub fn new(
        dir: PathBuf,
        fs: Arc<dyn Fs>,
        max_open_files: usize,
        block_cache: Option<Arc<BlockCache>>,
    ) -> Self {
        TableCache {
            dir,
            fs,
            tables: quick_cache::sync::Cache::new(max_open_files),
            block_cache,
            direct_io: false,
            tier: None,
            learned_index: false,
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    /// Opens table files for direct reads (`O_DIRECT`) from now on when `on`.
    pub fn with_direct_io(mut self, on: bool) -> Self {
        self.direct_io = on;
        self
    }

    /// Reads L0 tier tables from `tier`.
    pub fn with_tier(mut self, tier: Option<Arc<TierDir>>) -> Self {
        self.tier = tier;
        self
    }

    pub fn tier(&self) -> Option<&Arc<TierDir>> {
        self.tier.as_ref()
    }

    /// The mapped L0 tier table `number`.
    pub fn tier_table(&self, number: u64) -> Result<Arc<L0Table>> {
        match &self.tier {
            Some(t) => t.table(number),
            None => Err(crate::Error::InvalidArgument(format!(
                "L0 tier table {number} without an l0_tier_dir"
            ))),
        }
    }

    /// An iterator over table `f`, an SSTable or an L0 tier table.
    pub fn iter(&self, f: &FileMeta, params: ReadParams) -> Result<Box<dyn InternalIterator>> {
        Ok(if f.tier {
            Box::new(self.tier_table(f.number)?.iter())
        } else {
            Box::new(self.get(f.number)?.iter(params))
        })
    }

    /// Opens tables with a learned index (built lazily; `sst/learned.rs`) when `on`.
    pub fn with_learned_index(mut self, on: bool) -> Self {
        self.learned_index = on;
        self
    }

    /// Whether table files are opened for direct reads.
    pub fn direct_io(&self) -> bool {
        self.direct_io
    }

    /// The open reader of table `number`, opening it if needed.
    pub fn get(&self, number: u64) -> Result<Arc<Table>> {
        if let Some(t) = self.tables.get(&number) {
            self.hits.fetch_add(1, Ordering::Relaxed);
            return Ok(t);
        }
        self.misses.fetch_add(1, Ordering::Relaxed);
        let path = filename::table(&self.dir, number);
        let file = if self.direct_io {
            self.fs.open_direct(&path)?
        } else {
            self.fs.open(&path)?
        };
        let t = Table::open_with(file, number, self.block_cache.clone(), self.learned_index)?;
        self.tables.insert(number, t.clone());
        Ok(t)
    }

    /// The open reader of table `f`: the one its version recorded while the cache still
    /// holds it (no hashing, no lock), else through the cache, recorded for next time.
    #[inline]
    pub fn get_for(&self, f: &FileMeta) -> Result<Arc<Table>> {
        if let Some(t) = f.reader.get() {
            self.hits.fetch_add(1, Ordering::Relaxed);
            return Ok(t);
        }
        let t = self.get(f.number)?;
        f.reader.set(&t);
        Ok(t)
    }

    /// Forgets table `number` (it was deleted).
    pub fn evict(&self, number: u64) {
        self.tables.remove(&number);
    }

    /// Bytes the open tables keep in memory (indexes and filters; the L0 tier's indexes).
    pub fn reader_bytes(&self) -> u64 {
        let tier = self.tier.as_ref().map_or(0, |t| t.index_bytes());
        tier + self
            .tables
            .iter()
            .map(|(_, t)| t.memory_bytes() as u64)
            .sum::<u64>()
    }

    pub fn block_cache(&self) -> Option<&Arc<BlockCache>> {
        self.block_cache.as_ref()
    }

    pub fn hits(&self) -> u64 {
        self.hits.load(Ordering::Relaxed)
    }

    pub fn misses(&self) -> u64 {
        self.misses.load(Ordering::Relaxed)
    }
}
