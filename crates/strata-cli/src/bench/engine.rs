//! The benchmarks drive a store through [`Engine`], so that other stores (RocksDB, fjall)
//! can be measured by the same code. Only Strata's adapter exists so far.

use crate::opts::build_options;
use crate::text::human_bytes;
use anyhow::{Context, Result};
use std::path::Path;
use strata_engine::{Db, DbIterator, ReadOptions, WriteOptions};

/// How the benchmark wants the store opened and written.
#[derive(Clone, Debug, Default)]
pub struct EngineConfig {
    /// `--opt NAME=VALUE`, in order; each engine interprets them.
    pub opts: Vec<(String, String)>,
    /// fsync every write.
    pub sync: bool,
    /// Skip the write-ahead log.
    pub disable_wal: bool,
    /// Create the store if the directory holds none.
    pub create_if_missing: bool,
}

/// A cursor over the store, as the benchmarks use it.
pub trait EngineIter {
    fn valid(&self) -> bool;
    fn seek_to_first(&mut self);
    fn seek_to_last(&mut self);
    /// First key >= `key`.
    fn seek(&mut self, key: &[u8]);
    fn next(&mut self);
    fn prev(&mut self);
    fn key(&self) -> &[u8];
    fn value(&self) -> &[u8];
    /// The error that stopped the iteration, if any.
    fn status(&self) -> Result<()>;
}

/// A key-value store under benchmark. Shared by the benchmark threads, hence `Sync`.
pub trait Engine: Sized + Sync {
    type Iter<'a>: EngineIter
    where
        Self: 'a;

    /// Short name for the header ("strata").
    const NAME: &'static str;

    /// The options `cfg` stands for, one line, for the header. Fails on bad `--opt`s, which
    /// lets the benchmark refuse them before doing anything.
    fn describe(cfg: &EngineConfig) -> Result<String>;
    fn open(dir: &Path, cfg: &EngineConfig) -> Result<Self>;
    fn put(&self, key: &[u8], value: &[u8]) -> Result<()>;
    fn delete(&self, key: &[u8]) -> Result<()>;
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>>;
    fn multi_get(&self, keys: &[&[u8]]) -> Result<Vec<Option<Vec<u8>>>>;
    fn iter(&self) -> Result<Self::Iter<'_>>;
    /// Writes the memtable out and waits for it.
    fn flush(&self) -> Result<()>;
    /// Compacts the whole key range and waits.
    fn compact(&self) -> Result<()>;
    /// Waits until no background work is pending.
    fn wait_idle(&self) -> Result<()>;
    /// The engine's statistics, printed after the benchmarks.
    fn stats(&self) -> String;
    fn close(self) -> Result<()>;
}

/// Strata's engine.
pub struct Strata {
    db: Db,
    wo: WriteOptions,
}

impl Engine for Strata {
    type Iter<'a> = StrataIter;
    const NAME: &'static str = "strata";

    fn describe(cfg: &EngineConfig) -> Result<String> {
        let o = build_options(&cfg.opts)?;
        Ok(format!(
            "write_buffer_bytes={} block_cache_bytes={} block_size_bytes={} compression={:?} \
             filter={} l0_compaction_trigger={} max_bytes_for_level_base={} \
             target_file_size_bytes={} background_threads={}",
            human_bytes(o.write_buffer_bytes as u64),
            human_bytes(o.block_cache_bytes as u64),
            o.block_size_bytes,
            o.compression,
            o.filter,
            o.l0_compaction_trigger,
            human_bytes(o.max_bytes_for_level_base),
            human_bytes(o.target_file_size_bytes),
            o.background_threads,
        ))
    }

    fn open(dir: &Path, cfg: &EngineConfig) -> Result<Self> {
        let mut o = build_options(&cfg.opts)?;
        o.create_if_missing = cfg.create_if_missing;
        let db = Db::open(dir, o)
            .with_context(|| format!("cannot open database at {}", dir.display()))?;
        Ok(Strata {
            db,
            wo: WriteOptions {
                sync: cfg.sync,
                disable_wal: cfg.disable_wal,
            },
        })
    }

    fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        Ok(self.db.put_opt(&self.wo, key, value)?)
    }

    fn delete(&self, key: &[u8]) -> Result<()> {
        Ok(self.db.delete_opt(&self.wo, key)?)
    }

    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.db.get(key)?)
    }

    fn multi_get(&self, keys: &[&[u8]]) -> Result<Vec<Option<Vec<u8>>>> {
        let ro = ReadOptions::default();
        self.db
            .multi_get(&ro, keys)
            .into_iter()
            .map(|r| r.map_err(anyhow::Error::from))
            .collect()
    }

    fn iter(&self) -> Result<StrataIter> {
        Ok(StrataIter(self.db.iter(&ReadOptions::default())?))
    }

    fn flush(&self) -> Result<()> {
        Ok(self.db.flush()?)
    }

    fn compact(&self) -> Result<()> {
        Ok(self.db.compact_range(None, None)?)
    }

    fn wait_idle(&self) -> Result<()> {
        Ok(self.db.wait_idle()?)
    }

    fn stats(&self) -> String {
        self.db.stats().to_string()
    }

    fn close(self) -> Result<()> {
        Ok(self.db.close()?)
    }
}

pub struct StrataIter(DbIterator);

impl EngineIter for StrataIter {
    fn valid(&self) -> bool {
        self.0.valid()
    }
    fn seek_to_first(&mut self) {
        self.0.seek_to_first()
    }
    fn seek_to_last(&mut self) {
        self.0.seek_to_last()
    }
    fn seek(&mut self, key: &[u8]) {
        self.0.seek(key)
    }
    fn next(&mut self) {
        self.0.next()
    }
    fn prev(&mut self) {
        self.0.prev()
    }
    fn key(&self) -> &[u8] {
        self.0.key()
    }
    fn value(&self) -> &[u8] {
        self.0.value()
    }
    fn status(&self) -> Result<()> {
        Ok(self.0.status()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn describe_reflects_opts_and_rejects_bad_ones() {
        let cfg = EngineConfig {
            opts: vec![("write_buffer_bytes".into(), "8388608".into())],
            ..EngineConfig::default()
        };
        let d = Strata::describe(&cfg).unwrap();
        assert!(d.contains("write_buffer_bytes=8.0 MiB"), "{d}");
        assert!(d.contains("compression=None"), "{d}");
        let bad = EngineConfig {
            opts: vec![("bogus".into(), "1".into())],
            ..EngineConfig::default()
        };
        assert!(Strata::describe(&bad).is_err());
    }
}
