//! The sharded database (crate `strata`, the p2KVS front) as a benchmark engine:
//! `--engine sharded` runs it over Strata's engine, `--engine sharded-rocksdb` over RocksDB
//! (cargo feature `rocksdb`), so the same front is measured against both plain engines.
//! `--shards`, `--max-batch` and `--direct-reads` set the front's options; `--async` makes
//! the write benchmarks use its asynchronous put.
//!
//! Memory: engine options apply to each shard. For Strata's engine the block cache
//! (`--cache-bytes`) is divided among the shards so that the total matches the plain engines;
//! RocksDB's shards share one cache. Write buffers are per shard (as in p2KVS).

use super::engine::{strata_options, Engine, EngineConfig};
use crate::text::human_bytes;
use anyhow::{Context, Result};
use std::path::Path;
use strata::{DbIter, Options, ShardedDb, WriteOptions};

/// How one engine kind is put under the front.
pub trait Front: strata::Engine {
    /// `--engine` name.
    const BENCH_NAME: &'static str;
    /// Each shard's engine options for `cfg` with `shards` shards, and their description.
    fn config(cfg: &EngineConfig, shards: usize) -> Result<(Self::Config, String)>;
}

impl Front for strata::StrataEngine {
    const BENCH_NAME: &'static str = "sharded";

    fn config(cfg: &EngineConfig, shards: usize) -> Result<(strata_engine::Options, String)> {
        let mut o = strata_options(cfg)?;
        o.create_if_missing = cfg.create_if_missing;
        let given = cfg.opts.iter().any(|(n, _)| n == "block_cache_bytes");
        if !given {
            o.block_cache_bytes = (cfg.cache_bytes as usize / shards).max(1 << 20);
        }
        let d = format!(
            "per shard: write_buffer_bytes={} block_cache_bytes={} compression={:?} filter={} \
             background_threads={}",
            human_bytes(o.write_buffer_bytes as u64),
            human_bytes(o.block_cache_bytes as u64),
            o.compression,
            o.filter,
            o.background_threads
        );
        Ok((o, d))
    }
}

#[cfg(feature = "rocksdb")]
impl Front for strata::rocks::RocksEngine {
    const BENCH_NAME: &'static str = "sharded-rocksdb";

    fn config(cfg: &EngineConfig, _shards: usize) -> Result<(strata::rocks::RocksConfig, String)> {
        let s = super::rocks_engine::options(cfg)?;
        if !s.later.is_empty() {
            anyhow::bail!(
                "sharded-rocksdb takes only the RocksDB options set before opening, not {:?}",
                s.later
            );
        }
        let mut c = strata::rocks::RocksConfig::from_options(s.options);
        c.disable_wal = cfg.disable_wal;
        Ok((c, format!("per shard, one shared cache: {}", s.describe)))
    }
}

/// The front over engine `E`.
pub struct Sharded<E: Front> {
    db: ShardedDb<E>,
    wo: WriteOptions,
}

fn shards(cfg: &EngineConfig) -> usize {
    cfg.shards.unwrap_or_else(strata::default_shards)
}

impl<E: Front> Engine for Sharded<E> {
    type Iter<'a> = DbIter<'a, E::Iter>;
    const NAME: &'static str = E::BENCH_NAME;

    fn describe(cfg: &EngineConfig) -> Result<String> {
        let n = shards(cfg);
        let (_, d) = E::config(cfg, n)?;
        // An existing database keeps its persisted count (see `open`).
        let count = match cfg.shards {
            None if !cfg.create_if_missing => "as persisted".to_string(),
            _ => n.to_string(),
        };
        Ok(format!(
            "shards={count} max_batch={} direct_reads={} direct_writes={}; {d}",
            cfg.max_batch, cfg.direct_reads, cfg.direct_writes
        ))
    }

    fn notes(cfg: &EngineConfig) -> Vec<String> {
        let mut notes = Vec::new();
        if cfg.disable_wal && E::NAME == "strata" {
            notes.push("sharded: --disable-wal is not supported by the front; ignored".into());
        }
        notes
    }

    fn open(dir: &Path, cfg: &EngineConfig) -> Result<Self> {
        let n = shards(cfg);
        let (engine, _) = E::config(cfg, n)?;
        let opts = Options {
            // An existing database keeps its persisted count unless --shards names one
            // (which must then match).
            shards: if cfg.create_if_missing {
                Some(n)
            } else {
                cfg.shards
            },
            max_batch: cfg.max_batch,
            direct_reads: cfg.direct_reads,
            direct_writes: cfg.direct_writes,
            ..Options::with_engine(engine)
        };
        let db = ShardedDb::<E>::open(dir, opts)
            .with_context(|| format!("cannot open sharded database at {}", dir.display()))?;
        Ok(Sharded {
            db,
            wo: WriteOptions { sync: cfg.sync },
        })
    }

    fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        Ok(self.db.put_opt(&self.wo, key, value)?)
    }

    fn has_async(&self) -> bool {
        true
    }

    fn put_async(&self, key: &[u8], value: &[u8], done: Box<dyn FnOnce(Result<()>) + Send>) {
        self.db.put_async_opt(&self.wo, key, value, move |r| {
            done(r.map_err(anyhow::Error::from))
        });
    }

    fn delete(&self, key: &[u8]) -> Result<()> {
        Ok(self.db.delete_opt(&self.wo, key)?)
    }

    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.db.get(key)?)
    }

    fn multi_get(&self, keys: &[&[u8]]) -> Result<Vec<Option<Vec<u8>>>> {
        self.db
            .multi_get(keys)
            .into_iter()
            .map(|r| r.map_err(anyhow::Error::from))
            .collect()
    }

    fn iter(&self) -> Result<DbIter<'_, E::Iter>> {
        Ok(self.db.iter()?)
    }

    fn flush(&self) -> Result<()> {
        Ok(self.db.flush()?)
    }

    fn compact(&self) -> Result<()> {
        Ok(self.db.compact()?)
    }

    fn wait_idle(&self) -> Result<()> {
        Ok(self.db.wait_idle()?)
    }

    fn stats(&self) -> String {
        let mut s = format!(
            "{} shards; opportunistic batching:\n{}\n",
            self.db.shard_count(),
            self.db.batch_stats()
        );
        for (i, e) in self.db.engine_stats().iter().enumerate() {
            s.push_str(&format!("-- shard {i} --\n{e}\n"));
        }
        s
    }

    fn close(self) -> Result<()> {
        Ok(self.db.close()?)
    }
}
