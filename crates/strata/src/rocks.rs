//! RocksDB as a shard engine (cargo feature `rocksdb`): the same p2KVS front over RocksDB, as
//! the paper built it. Links Debian's librocksdb (`ROCKSDB_LIB_DIR=/usr/lib/x86_64-linux-gnu`).
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
    disable_wal: bool,
}

impl RocksEngine {
    /// The database underneath.
    pub fn db(&self) -> &DB {
        &self.db
    }
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
        let mut o = cfg.options.clone();
        o.create_if_missing(true);
        // Naming the default column family lets cf_handle() find it for the batched MultiGet.
        let db = DB::open_cf(&o, dir, [DEFAULT_COLUMN_FAMILY_NAME]).map_err(rocks_err)?;
        Ok(RocksEngine {
            db: Arc::new(db),
            disable_wal: cfg.disable_wal,
        })
    }

    fn write(&self, batch: RocksBatch, sync: bool) -> Result<()> {
        let mut wo = rocksdb::WriteOptions::default();
        wo.set_sync(sync);
        wo.disable_wal(self.disable_wal);
        self.db.write_opt(batch.0, &wo).map_err(rocks_err)
    }

    fn get(&self, snap: Option<&RocksSnapshot>, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.db.get_opt(key, &read_options(snap)).map_err(rocks_err)
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
        loop {
            let pending = self
                .db
                .property_int_value("rocksdb.compaction-pending")
                .map_err(rocks_err)?
                .unwrap_or(0);
            let running = self
                .db
                .property_int_value("rocksdb.num-running-compactions")
                .map_err(rocks_err)?
                .unwrap_or(0);
            let flushes = self
                .db
                .property_int_value("rocksdb.num-running-flushes")
                .map_err(rocks_err)?
                .unwrap_or(0);
            if pending == 0 && running == 0 && flushes == 0 {
                return Ok(());
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    fn stats(&self) -> String {
        self.db
            .property_value("rocksdb.stats")
            .ok()
            .flatten()
            .unwrap_or_default()
    }

    fn close(self) -> Result<()> {
        self.db.flush_wal(true).map_err(rocks_err)?;
        Ok(())
    }
}
