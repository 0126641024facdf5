//! RocksDB as a shard engine (cargo feature `rocksdb`): the same p2KVS front over RocksDB, as
//! the paper built it. Links Debian's librocksdb (`ROCKSDB_LIB_DIR=/usr/lib/x86_64-linux-gnu`).
//!
//! The workspace's one RocksDB adapter: `strata bench --engine rocksdb` measures a single
//! [`RocksEngine`] through it too (with [`RocksEngine::put`], [`RocksEngine::open_exact`] and
//! [`RocksEngine::stall_micros`] for what db_bench does that the front does not).
//!
//! The front needs owned snapshots and iterators (they travel to workers and outlive the call
//! that made them), while the `rocksdb` crate's borrow the database. `self_cell` pairs each
//! with an `Arc` of the database it borrows, without unsafe code here.

use crate::engine::{Engine, EngineBatch, EngineIter};
use rocksdb::{
    BlockBasedOptions, Cache, DBCompressionType, DBRawIteratorWithThreadMode, ReadOptions,
    SnapshotWithThreadMode, DB, DEFAULT_COLUMN_FAMILY_NAME,
};
use std::path::Path;
use std::sync::Arc;
use strata_engine::io::{Fs, RealFs};
use strata_engine::{Error, Result};

/// Options of each RocksDB shard: a full `rocksdb::Options` (cloned for every shard, so a
/// block cache set in its table factory is shared by all shards) and the WAL setting.
#[derive(Clone)]
pub struct RocksConfig {
    pub options: rocksdb::Options,
    /// Skip RocksDB's WAL.
    pub disable_wal: bool,
}

impl Default for RocksConfig {
    /// RocksDB's defaults with the benchmark's usual settings: no compression, 10-bit bloom
    /// filters, an 8 MiB block cache shared by the shards.
    fn default() -> Self {
        let mut o = rocksdb::Options::default();
        o.set_compression_type(DBCompressionType::None);
        let mut t = BlockBasedOptions::default();
        t.set_bloom_filter(10.0, false);
        if let Ok(cache) = Cache::new_lru_cache(8 << 20) {
            t.set_block_cache(&cache);
        }
        o.set_block_based_table_factory(&t);
        RocksConfig {
            options: o,
            disable_wal: false,
        }
    }
}

impl RocksConfig {
    /// Shards opened with `options` (`create_if_missing` is turned on for each shard).
    pub fn from_options(options: rocksdb::Options) -> Self {
        RocksConfig {
            options,
            disable_wal: false,
        }
    }
}

fn rocks_err(e: rocksdb::Error) -> Error {
    Error::io("rocksdb", "", std::io::Error::other(e.into_string()))
}

type Snap<'a> = SnapshotWithThreadMode<'a, DB>;
type RawIter<'a> = DBRawIteratorWithThreadMode<'a, DB>;

self_cell::self_cell!(
    struct SnapCell {
        owner: Arc<DB>,
        #[covariant]
        dependent: Snap,
    }
);

/// An owned RocksDB snapshot.
#[derive(Clone)]
pub struct RocksSnapshot(Arc<SnapCell>);

/// What an iterator keeps alive: the database and the snapshot it reads at.
pub struct IterOwner {
    db: Arc<DB>,
    snap: Option<RocksSnapshot>,
    lower: Option<Vec<u8>>,
    upper: Option<Vec<u8>>,
}

self_cell::self_cell!(
    /// An owned RocksDB iterator.
    pub struct RocksIter {
        owner: IterOwner,
        #[covariant]
        dependent: RawIter,
    }
);

fn read_options(snap: Option<&RocksSnapshot>) -> ReadOptions {
    let mut ro = ReadOptions::default();
    if let Some(s) = snap {
        s.0.with_dependent(|_, snap| ro.set_snapshot(snap));
    }
    ro
}

impl EngineIter for RocksIter {
    fn valid(&self) -> bool {
        self.borrow_dependent().valid()
    }
    fn seek_to_first(&mut self) {
        self.with_dependent_mut(|_, it| it.seek_to_first())
    }
    fn seek_to_last(&mut self) {
        self.with_dependent_mut(|_, it| it.seek_to_last())
    }
    fn seek(&mut self, key: &[u8]) {
        self.with_dependent_mut(|_, it| it.seek(key))
    }
    fn seek_for_prev(&mut self, key: &[u8]) {
        self.with_dependent_mut(|_, it| it.seek_for_prev(key))
    }
    fn next(&mut self) {
        self.with_dependent_mut(|_, it| it.next())
    }
    fn prev(&mut self) {
        self.with_dependent_mut(|_, it| it.prev())
    }
    fn key(&self) -> &[u8] {
        self.borrow_dependent()
            .key()
            .expect("key() on an invalid iterator")
    }
    fn value(&self) -> &[u8] {
        self.borrow_dependent()
            .value()
            .expect("value() on an invalid iterator")
    }
    fn status(&self) -> Result<()> {
        self.borrow_dependent().status().map_err(rocks_err)
    }
}

/// A `rocksdb::WriteBatch` as an engine batch.
#[derive(Default)]
pub struct RocksBatch(rocksdb::WriteBatch);

impl EngineBatch for RocksBatch {
    fn put(&mut self, key: &[u8], value: &[u8]) {
        self.0.put(key, value)
    }
    fn delete(&mut self, key: &[u8]) {
        self.0.delete(key)
    }
    fn len(&self) -> usize {
        self.0.len()
    }
}

/// One RocksDB instance as a shard.
pub struct RocksEngine {
    db: Arc<DB>,
    /// Write options without and with sync, made once: each is a C object.
    write_options: [rocksdb::WriteOptions; 2],
}

impl RocksEngine {
    /// The database underneath.
    pub fn db(&self) -> &DB {
        &self.db
    }

    /// Opens the instance in `dir` with `cfg.options` as they are, so that the caller decides
    /// `create_if_missing` ([`Engine::open`] turns it on).
    pub fn open_exact(dir: &Path, cfg: &RocksConfig) -> Result<Self> {
        // Naming the default column family lets cf_handle() find it for the batched MultiGet.
        let db = DB::open_cf(&cfg.options, dir, [DEFAULT_COLUMN_FAMILY_NAME]).map_err(rocks_err)?;
        let write_options = [false, true].map(|sync| {
            let mut wo = rocksdb::WriteOptions::default();
            wo.set_sync(sync);
            wo.disable_wal(cfg.disable_wal);
            wo
        });
        Ok(RocksEngine {
            db: Arc::new(db),
            write_options,
        })
    }

    fn write_options(&self, sync: bool) -> &rocksdb::WriteOptions {
        &self.write_options[usize::from(sync)]
    }

    /// Puts one key without building a batch (db_bench's write path); durable before
    /// returning when `sync`.
    pub fn put(&self, key: &[u8], value: &[u8], sync: bool) -> Result<()> {
        self.db
            .put_opt(key, value, self.write_options(sync))
            .map_err(rocks_err)
    }

    /// Deletes one key without building a batch; durable before returning when `sync`.
    pub fn delete(&self, key: &[u8], sync: bool) -> Result<()> {
        self.db
            .delete_opt(key, self.write_options(sync))
            .map_err(rocks_err)
    }

    /// Microseconds writers have been stalled or slowed since the database was opened (the
    /// "Cumulative stall" of `rocksdb.dbstats`), when RocksDB reports it.
    pub fn stall_micros(&self) -> Option<u64> {
        let s = self.db.property_value("rocksdb.dbstats").ok()??;
        parse_cumulative_stall(&s)
    }
}

/// Microseconds of "Cumulative stall: 00:00:1.234 H:M:S, 0.5 percent" in `rocksdb.dbstats`.
pub fn parse_cumulative_stall(dbstats: &str) -> Option<u64> {
    let line = dbstats
        .lines()
        .find_map(|l| l.trim().strip_prefix("Cumulative stall:"))?;
    let hms = line.split_whitespace().next()?;
    let mut parts = hms.split(':');
    let h: f64 = parts.next()?.parse().ok()?;
    let m: f64 = parts.next()?.parse().ok()?;
    let s: f64 = parts.next()?.parse().ok()?;
    Some(((h * 3600.0 + m * 60.0 + s) * 1e6).round() as u64)
}

impl Engine for RocksEngine {
    type Config = RocksConfig;
    type Batch = RocksBatch;
    type Snapshot = RocksSnapshot;
    type Iter = RocksIter;
    const NAME: &'static str = "rocksdb";

    fn fs(_: &RocksConfig) -> Arc<dyn Fs> {
        Arc::new(RealFs::new())
    }

    fn open(dir: &Path, cfg: &RocksConfig) -> Result<Self> {
        let mut cfg = cfg.clone();
        cfg.options.create_if_missing(true);
        Self::open_exact(dir, &cfg)
    }

    fn write(&self, batch: RocksBatch, sync: bool) -> Result<()> {
        self.db
            .write_opt(batch.0, self.write_options(sync))
            .map_err(rocks_err)
    }

    fn get(&self, snap: Option<&RocksSnapshot>, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let value = match snap {
            // Without a snapshot, no ReadOptions to make and free for each read.
            None => self.db.get_pinned(key),
            Some(_) => self.db.get_pinned_opt(key, &read_options(snap)),
        };
        value.map(|v| v.map(|v| v.to_vec())).map_err(rocks_err)
    }

    fn multi_get(
        &self,
        snap: Option<&RocksSnapshot>,
        keys: &[&[u8]],
    ) -> Vec<Result<Option<Vec<u8>>>> {
        let ro = read_options(snap);
        match self.db.cf_handle(DEFAULT_COLUMN_FAMILY_NAME) {
            Some(cf) => self
                .db
                .batched_multi_get_cf_opt(cf, keys, false, &ro)
                .into_iter()
                .map(|r| r.map(|v| v.map(|s| s.to_vec())).map_err(rocks_err))
                .collect(),
            None => self
                .db
                .multi_get_opt(keys, &ro)
                .into_iter()
                .map(|r| r.map_err(rocks_err))
                .collect(),
        }
    }

    fn snapshot(&self) -> RocksSnapshot {
        RocksSnapshot(Arc::new(SnapCell::new(self.db.clone(), |db| db.snapshot())))
    }

    fn iter(
        &self,
        snap: Option<&RocksSnapshot>,
        lower: Option<&[u8]>,
        upper: Option<&[u8]>,
    ) -> Result<RocksIter> {
        let owner = IterOwner {
            db: self.db.clone(),
            snap: snap.cloned(),
            lower: lower.map(<[u8]>::to_vec),
            upper: upper.map(<[u8]>::to_vec),
        };
        Ok(RocksIter::new(owner, |o| {
            let mut ro = read_options(o.snap.as_ref());
            if let Some(l) = &o.lower {
                ro.set_iterate_lower_bound(l.clone());
            }
            if let Some(u) = &o.upper {
                ro.set_iterate_upper_bound(u.clone());
            }
            o.db.raw_iterator_opt(ro)
        }))
    }

    fn flush(&self) -> Result<()> {
        self.db.flush().map_err(rocks_err)
    }

    fn compact(&self) -> Result<()> {
        self.db.compact_range::<&[u8], &[u8]>(None, None);
        Ok(())
    }

    fn wait_idle(&self) -> Result<()> {
        let busy = |p: &str| -> Result<bool> {
            Ok(self
                .db
                .property_int_value(p)
                .map_err(rocks_err)?
                .unwrap_or(0)
                > 0)
        };
        while busy("rocksdb.num-running-flushes")?
            || busy("rocksdb.num-running-compactions")?
            || busy("rocksdb.compaction-pending")?
            || busy("rocksdb.mem-table-flush-pending")?
        {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        Ok(())
    }

    fn checkpoint(&self, dir: &Path) -> Result<()> {
        // RocksDB's own checkpoint: links the SST files, copies the rest, flushes first.
        rocksdb::checkpoint::Checkpoint::new(&*self.db)
            .and_then(|c| c.create_checkpoint(dir))
            .map_err(rocks_err)
    }

    fn stats(&self) -> String {
        self.db
            .property_value("rocksdb.stats")
            .ok()
            .flatten()
            .unwrap_or_else(|| "(no statistics)".to_string())
    }

    /// Flushes the memtables, which makes every write durable even with the WAL off.
    fn close(self) -> Result<()> {
        self.db.flush().map_err(rocks_err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_stall_line() {
        let s = "** DB Stats **\nUptime(secs): 1.0 total\n\
                 Cumulative stall: 00:01:2.500 H:M:S, 3.1 percent\n\
                 Interval stall: 00:00:0.000 H:M:S, 0.0 percent\n";
        assert_eq!(parse_cumulative_stall(s), Some(62_500_000));
        assert_eq!(parse_cumulative_stall("nothing"), None);
    }
}
