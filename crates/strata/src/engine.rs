//! The [`Engine`] trait: what the sharded front needs from one key-value store instance, so
//! the same front parallelizes Strata's engine ([`StrataEngine`]) or RocksDB
//! (`crate::rocks::RocksEngine`, cargo feature `rocksdb`), as p2KVS did for RocksDB, LevelDB
//! and WiredTiger. The front treats the instance as a black box: open, write a batch
//! atomically, point and batched reads, snapshots, ordered iterators, close.

use std::path::Path;
use std::sync::Arc;
use strata_engine::compaction::{CompactionFilter, Decision, FilterContext, FilterValue};
use strata_engine::io::Fs;
use strata_engine::{ReadOptions, Result, WriteOptions};

/// A batch of writes in the engine's own representation, applied atomically by
/// [`Engine::write`].
pub trait EngineBatch: Default + Send {
    /// An empty batch with room for about `bytes` of records (a hint: the default ignores
    /// it).
    fn with_capacity(bytes: usize) -> Self {
        let _ = bytes;
        Self::default()
    }
    fn put(&mut self, key: &[u8], value: &[u8]);
    fn delete(&mut self, key: &[u8]);
    /// Records in the batch.
    fn len(&self) -> usize;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// An ordered cursor: over one instance (RocksDB's `Iterator`, Strata's `DbIterator`), over
/// the whole sharded database ([`crate::DbIter`]), and over every store `strata bench`
/// measures. The one iterator trait of the workspace, so that a store's cursor is adapted once.
pub trait EngineIter {
    fn valid(&self) -> bool;
    fn seek_to_first(&mut self);
    fn seek_to_last(&mut self);
    /// First key >= `key`.
    fn seek(&mut self, key: &[u8]);
    /// Last key <= `key`.
    fn seek_for_prev(&mut self, key: &[u8]);
    fn next(&mut self);
    fn prev(&mut self);
    /// Current key; only when `valid()`.
    fn key(&self) -> &[u8];
    /// Current value; only when `valid()`.
    fn value(&self) -> &[u8];
    /// The error that stopped the iteration, if any.
    fn status(&self) -> Result<()>;
}

/// One key-value store instance. Shared by its shard's worker (queued writes and batched
/// reads) and by user threads (direct writes and reads, iterators, snapshot reads), hence
/// `Sync`; `write` may be called from several threads at once.
pub trait Engine: Send + Sync + Sized + 'static {
    /// Options for opening one instance (applied to each shard).
    type Config: Clone + Send + Sync + 'static;
    type Batch: EngineBatch;
    /// A consistent view of the instance; owned, so it can travel to a worker.
    type Snapshot: Clone + Send + Sync + 'static;
    /// Sent to the shard's worker for `range` and parallel `scan`.
    type Iter: EngineIter + Send + 'static;

    /// Persisted in the `SHARDS` file: a database is always reopened with the same engine.
    const NAME: &'static str;

    /// The file system the front uses for its own files (`SHARDS`, `TXLOG`, the lock), so that
    /// crash tests over an in-memory file system cover them too.
    fn fs(cfg: &Self::Config) -> Arc<dyn Fs>;
    /// Opens (creating if needed) the instance in `dir`.
    fn open(dir: &Path, cfg: &Self::Config) -> Result<Self>;
    /// Applies `batch` atomically; durable before returning when `sync`.
    fn write(&self, batch: Self::Batch, sync: bool) -> Result<()>;
    fn get(&self, snap: Option<&Self::Snapshot>, key: &[u8]) -> Result<Option<Vec<u8>>>;
    /// Looks up many keys; results in request order. Default: a loop of `get`.
    fn multi_get(
        &self,
        snap: Option<&Self::Snapshot>,
        keys: &[&[u8]],
    ) -> Vec<Result<Option<Vec<u8>>>> {
        keys.iter().map(|k| self.get(snap, k)).collect()
    }
    fn snapshot(&self) -> Self::Snapshot;
    /// An iterator over `[lower, upper)` (each bound optional) as of `snap` (or now).
    fn iter(
        &self,
        snap: Option<&Self::Snapshot>,
        lower: Option<&[u8]>,
        upper: Option<&[u8]>,
    ) -> Result<Self::Iter>;
    /// Writes the memtable out and waits.
    fn flush(&self) -> Result<()>;
    /// Compacts the whole key range and waits.
    fn compact(&self) -> Result<()>;
    /// Waits until no background work is pending.
    fn wait_idle(&self) -> Result<()>;
    /// Human-readable statistics of the instance.
    fn stats(&self) -> String;
    /// Writes a copy of the instance as of one moment into the new directory `dir`, which
    /// then opens as an instance of its own. The sharded front calls it while no shard
    /// applies a write (`docs/design.md` §12.5).
    fn checkpoint(&self, dir: &Path) -> Result<()>;
    /// Makes the instance durable and releases it.
    fn close(self) -> Result<()>;
    /// Sets the capacity in bytes of the instance's hot tier (`hot.rs`; 0: off). Engines
    /// without one ignore it.
    fn set_hot_bytes(&self, _bytes: u64) {}
    /// The hot tier's counters, if the engine has one switched on.
    fn hot_stats(&self) -> Option<crate::hot::HotStats> {
        None
    }
    /// Bytes the instance holds in memory, by part (INFO). Default: nothing known.
    fn memory(&self) -> EngineMemory {
        EngineMemory::default()
    }
    /// `cfg` for shard `shard`: what must differ between the instances of one database
    /// (each already gets its own directory, `shard-NNN`). Called once per shard at open,
    /// before [`Engine::guard_filter`]. Default: `cfg` unchanged.
    fn shard_config(cfg: &Self::Config, shard: usize) -> Result<Self::Config> {
        let _ = shard;
        Ok(cfg.clone())
    }
    /// `cfg` for the shard whose cross-shard parts in doubt `parts` counts: a compaction
    /// filter in it must not remove anything while a part may still be rolled back (see
    /// [`PartsInDoubt`]). Default: `cfg` unchanged (an engine without a filter hook).
    fn guard_filter(cfg: &Self::Config, parts: Arc<PartsInDoubt>) -> Self::Config {
        let _ = parts;
        cfg.clone()
    }
}

/// Bytes an engine instance holds in memory, by part (see [`Engine::memory`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EngineMemory {
    /// The mutable memtable and the immutable ones waiting for flush.
    pub memtables: u64,
    /// The block cache's use.
    pub block_cache: u64,
    /// Indexes and filters of open tables.
    pub table_readers: u64,
}

impl EngineMemory {
    /// Adds `o`'s bytes to these (the totals over shards).
    pub fn add(&mut self, o: &EngineMemory) {
        self.memtables += o.memtables;
        self.block_cache += o.block_cache;
        self.table_readers += o.table_readers;
    }
}

/// Parts of cross-shard batches applied in one shard and not yet known committed, plus one
/// while the database opens (until recovery has rolled back the uncommitted ones).
///
/// A compaction filter may decide from other records it reads (the Redis server removes a
/// collection's members once its metadata record is gone). A part that is applied but not
/// committed may still be rolled back (`docs/design.md` §12.3): a decision based on its
/// writes could outlive them (members removed because a DEL's part deleted their metadata,
/// and the DEL rolled back). So while the count is above zero the shard's filter keeps
/// everything. The worker raises the count before it applies parts and lowers it once
/// their commit is durable; the filter reads it after the filter's own reads, so a read
/// that saw a part's writes sees the count raised (the engine publishes a write with
/// release ordering after the raise, and a read acquires it).
#[derive(Debug)]
pub struct PartsInDoubt(std::sync::atomic::AtomicUsize);

impl PartsInDoubt {
    /// Raised once: the open in progress.
    pub(crate) fn opening() -> Arc<PartsInDoubt> {
        Arc::new(PartsInDoubt(std::sync::atomic::AtomicUsize::new(1)))
    }

    pub(crate) fn raise(&self, n: usize) {
        self.0.fetch_add(n, std::sync::atomic::Ordering::SeqCst);
    }

    pub(crate) fn lower(&self, n: usize) {
        self.0.fetch_sub(n, std::sync::atomic::Ordering::SeqCst);
    }

    /// Whether a part may still be rolled back (or the open is not finished).
    pub fn any(&self) -> bool {
        self.0.load(std::sync::atomic::Ordering::SeqCst) > 0
    }
}

/// A shard's compaction filter behind its [`PartsInDoubt`]: keeps everything while a part
/// may be rolled back.
struct GuardedFilter {
    inner: Arc<dyn CompactionFilter>,
    parts: Arc<PartsInDoubt>,
}

impl CompactionFilter for GuardedFilter {
    fn filter(&self, cx: &FilterContext<'_>, key: &[u8], value: &mut FilterValue<'_>) -> Decision {
        if self.parts.any() {
            return Decision::Keep;
        }
        match self.inner.filter(cx, key, value) {
            // Checked again after the filter's reads (see `PartsInDoubt`).
            Decision::Remove if !self.parts.any() => Decision::Remove,
            _ => Decision::Keep,
        }
    }
}

/// Strata's own engine ([`strata_engine::Db`]) as a shard, with its hot tier.
pub struct StrataEngine {
    db: strata_engine::Db,
    /// Created the first time a capacity above 0 is set; never removed (set to 0, it
    /// caches nothing and is bypassed).
    hot: std::sync::OnceLock<crate::hot::HotTier>,
}

impl StrataEngine {
    /// The instance underneath.
    pub fn db(&self) -> &strata_engine::Db {
        &self.db
    }

    /// The hot tier, if switched on (latest reads without a snapshot go through it).
    fn hot(&self, snap: Option<&strata_engine::Snapshot>) -> Option<&crate::hot::HotTier> {
        if snap.is_some() {
            return None;
        }
        self.hot.get().filter(|h| h.enabled())
    }
}

impl EngineBatch for strata_engine::WriteBatch {
    fn with_capacity(bytes: usize) -> Self {
        strata_engine::WriteBatch::with_capacity(bytes)
    }
    fn put(&mut self, key: &[u8], value: &[u8]) {
        strata_engine::WriteBatch::put(self, key, value)
    }
    fn delete(&mut self, key: &[u8]) {
        strata_engine::WriteBatch::delete(self, key)
    }
    fn len(&self) -> usize {
        self.count() as usize
    }
}

impl EngineIter for strata_engine::DbIterator {
    fn valid(&self) -> bool {
        strata_engine::DbIterator::valid(self)
    }
    fn seek_to_first(&mut self) {
        strata_engine::DbIterator::seek_to_first(self)
    }
    fn seek_to_last(&mut self) {
        strata_engine::DbIterator::seek_to_last(self)
    }
    fn seek(&mut self, key: &[u8]) {
        strata_engine::DbIterator::seek(self, key)
    }
    fn seek_for_prev(&mut self, key: &[u8]) {
        strata_engine::DbIterator::seek_for_prev(self, key)
    }
    fn next(&mut self) {
        strata_engine::DbIterator::next(self)
    }
    fn prev(&mut self) {
        strata_engine::DbIterator::prev(self)
    }
    fn key(&self) -> &[u8] {
        strata_engine::DbIterator::key(self)
    }
    fn value(&self) -> &[u8] {
        strata_engine::DbIterator::value(self)
    }
    fn status(&self) -> Result<()> {
        strata_engine::DbIterator::status(self)
    }
}

fn read_opts(snap: Option<&strata_engine::Snapshot>) -> ReadOptions {
    ReadOptions {
        snapshot: snap.cloned(),
        ..ReadOptions::default()
    }
}

impl Engine for StrataEngine {
    type Config = strata_engine::Options;
    type Batch = strata_engine::WriteBatch;
    type Snapshot = strata_engine::Snapshot;
    type Iter = strata_engine::DbIterator;
    const NAME: &'static str = "strata";

    fn fs(cfg: &Self::Config) -> Arc<dyn Fs> {
        cfg.fs.clone()
    }

    /// Each instance locks its L0 tier directory, so the shards cannot share the one the
    /// options name: shard `i` uses its subdirectory `shard-NNN` (named as its data directory
    /// under the root), created here if missing. The tier writes through `std::fs`, not the
    /// options' `Fs` (its tables are memory-mapped), so the directory is made the same way.
    fn shard_config(cfg: &Self::Config, shard: usize) -> Result<Self::Config> {
        let mut cfg = cfg.clone();
        if let Some(tier) = &cfg.l0_tier_dir {
            let dir = crate::meta::shard_dir(tier, shard);
            std::fs::create_dir_all(&dir)
                .map_err(|e| strata_engine::Error::io("create L0 tier directory", &dir, e))?;
            cfg.l0_tier_dir = Some(dir);
        }
        Ok(cfg)
    }

    fn guard_filter(cfg: &Self::Config, parts: Arc<PartsInDoubt>) -> Self::Config {
        let mut cfg = cfg.clone();
        cfg.compaction_filter = cfg
            .compaction_filter
            .take()
            .map(|inner| Arc::new(GuardedFilter { inner, parts }) as Arc<dyn CompactionFilter>);
        cfg
    }

    fn open(dir: &Path, cfg: &Self::Config) -> Result<Self> {
        let mut cfg = cfg.clone();
        cfg.create_if_missing = true;
        cfg.error_if_exists = false;
        Ok(StrataEngine {
            db: strata_engine::Db::open(dir, cfg)?,
            hot: std::sync::OnceLock::new(),
        })
    }

    fn write(&self, batch: Self::Batch, sync: bool) -> Result<()> {
        let wo = WriteOptions {
            sync,
            ..WriteOptions::default()
        };
        let Some(hot) = self.hot(None) else {
            return self.db.write(&wo, batch);
        };
        // The tier updates the records it holds once the engine has the write; it inserts
        // none (reads fill it).
        let ticket = hot.begin_write(batch.iter().map_while(|r| r.ok()).map(|r| (r.key, r.value)));
        let r = self.db.write(&wo, batch);
        hot.end_write(ticket, r.is_ok());
        r
    }

    fn get(&self, snap: Option<&Self::Snapshot>, key: &[u8]) -> Result<Option<Vec<u8>>> {
        if let Some(hot) = self.hot(snap) {
            if let Some(v) = hot.get(key) {
                return Ok(Some(v));
            }
            let ticket = hot.begin_read();
            let v = self.db.get(key)?;
            if let Some(v) = &v {
                hot.promote(&ticket, key, v);
            }
            return Ok(v);
        }
        match snap {
            None => self.db.get(key),
            Some(_) => self.db.get_opt(&read_opts(snap), key),
        }
    }

    fn multi_get(
        &self,
        snap: Option<&Self::Snapshot>,
        keys: &[&[u8]],
    ) -> Vec<Result<Option<Vec<u8>>>> {
        let Some(hot) = self.hot(snap) else {
            return self.db.multi_get(&read_opts(snap), keys);
        };
        let mut out: Vec<Option<Result<Option<Vec<u8>>>>> = keys
            .iter()
            .map(|k| hot.get(k).map(|v| Ok(Some(v))))
            .collect();
        let missing: Vec<&[u8]> = keys
            .iter()
            .zip(&out)
            .filter(|(_, o)| o.is_none())
            .map(|(k, _)| *k)
            .collect();
        if !missing.is_empty() {
            let ticket = hot.begin_read();
            let mut read = self.db.multi_get(&read_opts(None), &missing).into_iter();
            for (k, o) in keys.iter().zip(out.iter_mut()) {
                if o.is_none() {
                    let r = read.next().unwrap_or(Ok(None));
                    if let Ok(Some(v)) = &r {
                        hot.promote(&ticket, k, v);
                    }
                    *o = Some(r);
                }
            }
        }
        out.into_iter().map(|o| o.unwrap_or(Ok(None))).collect()
    }

    fn snapshot(&self) -> Self::Snapshot {
        self.db.snapshot()
    }

    fn iter(
        &self,
        snap: Option<&Self::Snapshot>,
        lower: Option<&[u8]>,
        upper: Option<&[u8]>,
    ) -> Result<Self::Iter> {
        let ro = ReadOptions {
            snapshot: snap.cloned(),
            lower_bound: lower.map(<[u8]>::to_vec),
            upper_bound: upper.map(<[u8]>::to_vec),
            ..ReadOptions::default()
        };
        self.db.iter(&ro)
    }

    fn flush(&self) -> Result<()> {
        self.db.flush()
    }

    fn compact(&self) -> Result<()> {
        self.db.compact_range(None, None)
    }

    fn checkpoint(&self, dir: &Path) -> Result<()> {
        self.db.checkpoint(dir)
    }

    fn wait_idle(&self) -> Result<()> {
        self.db.wait_idle()
    }

    fn stats(&self) -> String {
        self.db.stats().to_string()
    }

    fn memory(&self) -> EngineMemory {
        let s = self.db.stats();
        EngineMemory {
            memtables: s.memtable_bytes + s.immutable_memtable_bytes,
            block_cache: s.block_cache_usage_bytes,
            table_readers: s.table_reader_bytes,
        }
    }

    fn close(self) -> Result<()> {
        self.db.close()
    }

    fn set_hot_bytes(&self, bytes: u64) {
        match self.hot.get() {
            Some(h) => h.set_capacity(bytes),
            None if bytes > 0 => {
                let _ = self.hot.set(crate::hot::HotTier::new(bytes));
            }
            None => {}
        }
    }

    fn hot_stats(&self) -> Option<crate::hot::HotStats> {
        self.hot.get().map(|h| h.stats())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_shard_gets_its_own_l0_tier_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let tier = tmp.path().join("tier");
        let mut o = strata_engine::Options::default();
        // Without a tier the options pass through unchanged.
        let same = StrataEngine::shard_config(&o, 3).unwrap();
        assert!(same.l0_tier_dir.is_none());
        o.l0_tier_dir = Some(tier.clone());
        let dirs: Vec<_> = (0..3)
            .map(|i| {
                StrataEngine::shard_config(&o, i)
                    .unwrap()
                    .l0_tier_dir
                    .unwrap()
            })
            .collect();
        assert_eq!(dirs[0], tier.join("shard-000"));
        assert_eq!(dirs[2], tier.join("shard-002"));
        for d in &dirs {
            assert!(d.is_dir(), "{} was not created", d.display());
        }
        // The user's options keep the root; calling again finds the directory there.
        assert_eq!(o.l0_tier_dir.as_deref(), Some(tier.as_path()));
        assert_eq!(
            StrataEngine::shard_config(&o, 0).unwrap().l0_tier_dir,
            Some(dirs[0].clone())
        );
        // A tier root that cannot hold directories is an I/O error naming the directory.
        let file = tmp.path().join("file");
        std::fs::write(&file, b"x").unwrap();
        o.l0_tier_dir = Some(file);
        let Err(e) = StrataEngine::shard_config(&o, 0) else {
            panic!("a file as the tier root was accepted");
        };
        let e = e.to_string();
        assert!(e.contains("create L0 tier directory"), "{e}");
        assert!(e.contains("shard-000"), "{e}");
    }
}
