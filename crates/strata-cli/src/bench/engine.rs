//! The benchmarks drive a store through [`Engine`], so that several stores are measured by
//! the same code: Strata (here), fjall ([`super::fjall_engine`]) and, with the `rocksdb`
//! cargo feature, RocksDB ([`super::rocks_engine`]).

use crate::opts::build_options;
use crate::text::human_bytes;
use anyhow::{Context, Result};
use std::path::Path;
use strata::EngineIter;
use strata_engine::{Db, DbIterator, Options, ReadOptions, WriteOptions};

/// Block compression requested for every engine (`--compression`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Compression {
    #[default]
    None,
    Lz4,
}

impl Compression {
    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Lz4 => "lz4",
        }
    }
}

/// How the benchmark wants the store opened and written. The same settings go to every
/// engine of a run, so that they are compared on equal terms; `opts` are the engine's own.
#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// `--opt NAME=VALUE` meant for this engine, in order; each engine interprets them.
    pub opts: Vec<(String, String)>,
    /// fsync every write.
    pub sync: bool,
    /// Skip the write-ahead log.
    pub disable_wal: bool,
    /// Create the store if the directory holds none.
    pub create_if_missing: bool,
    /// Block cache capacity.
    pub cache_bytes: u64,
    /// Filter bits per key; 0 = no filter.
    pub bloom_bits: u32,
    pub compression: Compression,
    /// Read table files with O_DIRECT (bypassing the page cache).
    pub direct_io: bool,
    /// The sharded engines (`sharded`, `sharded-rocksdb`): shard count (`None`: cores).
    pub shards: Option<usize>,
    /// The sharded engines: requests merged per engine write or read (1: no batching).
    pub max_batch: usize,
    /// The sharded engines: reads skip the worker when the shard has no pending write.
    pub direct_reads: bool,
    /// The sharded engines: writes skip the worker when the shard has no queued write.
    pub direct_writes: bool,
}

impl EngineConfig {
    /// The L0 tier directory `--opt l0_tier_dir=DIR` gives Strata's engines (the last one
    /// given wins, as in `Options::set`; "", "none" and "off" mean none). The benchmark treats
    /// it as part of its database: it must be new or empty, is emptied whenever the database
    /// directory is, and goes with a temporary database.
    pub fn l0_tier_dir(&self) -> Option<std::path::PathBuf> {
        let (_, v) = self.opts.iter().rev().find(|(n, _)| n == "l0_tier_dir")?;
        match v.as_str() {
            "" | "none" | "off" => None,
            v => Some(v.into()),
        }
    }

    /// Empties the L0 tier directory, if any (with the database directory: the tables in it
    /// belong to the database that was there).
    pub fn empty_l0_tier(&self) -> Result<()> {
        if let Some(d) = self.l0_tier_dir() {
            if d.exists() {
                std::fs::remove_dir_all(&d)
                    .with_context(|| format!("cannot empty L0 tier directory {}", d.display()))?;
            }
            std::fs::create_dir_all(&d)
                .with_context(|| format!("cannot create L0 tier directory {}", d.display()))?;
        }
        Ok(())
    }
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            opts: Vec::new(),
            sync: false,
            disable_wal: false,
            create_if_missing: true,
            cache_bytes: 8 << 20,
            bloom_bits: 10,
            compression: Compression::None,
            direct_io: false,
            shards: None,
            max_batch: 32,
            direct_reads: true,
            direct_writes: true,
        }
    }
}

/// A key-value store under benchmark. Shared by the benchmark threads, hence `Sync`.
pub trait Engine: Sized + Sync {
    /// A cursor over the store: the `strata` crate's iterator trait, which the sharded
    /// front's shard engines implement too.
    type Iter<'a>: EngineIter
    where
        Self: 'a;

    /// Short name, as `--engine` spells it ("strata").
    const NAME: &'static str;

    /// The options `cfg` stands for, one line, for the header. Fails on bad `--opt`s, which
    /// lets the benchmark refuse them before doing anything.
    fn describe(cfg: &EngineConfig) -> Result<String>;
    /// Settings of `cfg` this engine cannot honour, one sentence each, printed as notes.
    fn notes(_cfg: &EngineConfig) -> Vec<String> {
        Vec::new()
    }
    fn open(dir: &Path, cfg: &EngineConfig) -> Result<Self>;
    fn put(&self, key: &[u8], value: &[u8]) -> Result<()>;
    fn delete(&self, key: &[u8]) -> Result<()>;
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>>;
    fn multi_get(&self, keys: &[&[u8]]) -> Result<Vec<Option<Vec<u8>>>>;
    /// Many batches in one call with at most `max_reads_in_flight` reads outstanding across
    /// them; engines without a pipelined MultiGet run one batch after another.
    fn multi_get_batches(
        &self,
        batches: &[&[&[u8]]],
        _max_reads_in_flight: usize,
    ) -> Result<Vec<Vec<Option<Vec<u8>>>>> {
        batches.iter().map(|b| self.multi_get(b)).collect()
    }
    fn iter(&self) -> Result<Self::Iter<'_>>;
    /// Writes the memtable out and waits for it.
    fn flush(&self) -> Result<()>;
    /// Compacts the whole key range and waits.
    fn compact(&self) -> Result<()>;
    /// Waits until no background work is pending.
    fn wait_idle(&self) -> Result<()>;
    /// Microseconds writers have been stalled or slowed by the engine since it was opened,
    /// when the engine counts them.
    fn stall_micros(&self) -> Option<u64> {
        None
    }
    /// Whether [`Engine::put_async`] is really asynchronous (`--async`).
    fn has_async(&self) -> bool {
        false
    }
    /// Queues a put and returns; `done` runs (on any thread) once it is applied. Default: a
    /// synchronous put, then `done`.
    fn put_async(&self, key: &[u8], value: &[u8], done: Box<dyn FnOnce(Result<()>) + Send>) {
        done(self.put(key, value))
    }
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
    type Iter<'a> = DbIterator;
    const NAME: &'static str = "strata";

    fn describe(cfg: &EngineConfig) -> Result<String> {
        let o = strata_options(cfg)?;
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

    fn notes(cfg: &EngineConfig) -> Vec<String> {
        let mut notes = Vec::new();
        if cfg.direct_io {
            if let Err(e) = direct_io_option(&mut Options::default()) {
                notes.push(format!(
                    "direct I/O not yet supported by strata engine; ignored \
                     (Options::set(\"direct_io\", \"true\"): {e})"
                ));
            }
        }
        if cfg.bloom_bits > 0 {
            notes.push(format!(
                "strata's table filter is a binary fuse filter of about 9 bits per key \
                 (0.4% false positives); --bloom-bits {} only turns it on",
                cfg.bloom_bits
            ));
        }
        notes
    }

    fn open(dir: &Path, cfg: &EngineConfig) -> Result<Self> {
        let mut o = strata_options(cfg)?;
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

    fn multi_get_batches(
        &self,
        batches: &[&[&[u8]]],
        max_reads_in_flight: usize,
    ) -> Result<Vec<Vec<Option<Vec<u8>>>>> {
        let ro = ReadOptions::default();
        self.db
            .multi_get_batches(&ro, batches, max_reads_in_flight)
            .into_iter()
            .map(|b| {
                b.into_iter()
                    .map(|r| r.map_err(anyhow::Error::from))
                    .collect()
            })
            .collect()
    }

    fn iter(&self) -> Result<DbIterator> {
        Ok(self.db.iter(&ReadOptions::default())?)
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

    fn stall_micros(&self) -> Option<u64> {
        Some(self.db.stats().stall_micros)
    }

    fn stats(&self) -> String {
        self.db.stats().to_string()
    }

    fn close(self) -> Result<()> {
        Ok(self.db.close()?)
    }
}

/// Strata's options for `cfg`: the run-wide settings first (cache, filter, compression,
/// direct I/O when the engine has it), then the `--opt`s, which may override them.
pub fn strata_options(cfg: &EngineConfig) -> Result<Options> {
    let mut pairs = vec![
        ("block_cache_bytes".to_string(), cfg.cache_bytes.to_string()),
        ("filter".to_string(), (cfg.bloom_bits > 0).to_string()),
        (
            "compression".to_string(),
            cfg.compression.name().to_string(),
        ),
    ];
    pairs.extend(cfg.opts.iter().cloned());
    let mut o = build_options(&pairs)?;
    if cfg.direct_io {
        // notes() reports it if an engine build lacks the option.
        let _ = direct_io_option(&mut o);
    }
    Ok(o)
}

/// Turns on the engine's direct I/O option, if it has one.
fn direct_io_option(o: &mut Options) -> strata_engine::Result<()> {
    o.set("direct_io", "true")
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
        assert!(d.contains("block_cache_bytes=8.0 MiB"), "{d}");
        let lz4 = EngineConfig {
            compression: Compression::Lz4,
            bloom_bits: 0,
            cache_bytes: 1 << 20,
            opts: vec![("block_cache_bytes".into(), "2097152".into())],
            ..EngineConfig::default()
        };
        let d = Strata::describe(&lz4).unwrap();
        assert!(d.contains("compression=Lz4"), "{d}");
        assert!(d.contains("filter=false"), "{d}");
        // --opt overrides the run-wide setting.
        assert!(d.contains("block_cache_bytes=2.0 MiB"), "{d}");
        let bad = EngineConfig {
            opts: vec![("bogus".into(), "1".into())],
            ..EngineConfig::default()
        };
        assert!(Strata::describe(&bad).is_err());
    }

    /// The tier options reach the engine's options, for the plain engine and for each shard
    /// of the sharded one (its own subdirectory, see `strata::Engine::shard_config`).
    #[test]
    fn l0_tier_options_reach_the_engines() {
        use strata::Engine as _;
        let tmp = tempfile::tempdir().unwrap();
        let tier = tmp.path().join("tier");
        let cfg = EngineConfig {
            opts: vec![
                ("l0_tier_dir".into(), tier.display().to_string()),
                ("l0_tier_bytes".into(), (512u64 << 20).to_string()),
                ("pgm_epsilon".into(), "64".into()),
            ],
            ..EngineConfig::default()
        };
        let o = strata_options(&cfg).unwrap();
        assert_eq!(o.l0_tier_dir.as_deref(), Some(tier.as_path()));
        assert_eq!((o.l0_tier_bytes, o.pgm_epsilon), (512 << 20, 64));
        let (shard_opts, _) =
            <strata::StrataEngine as super::super::sharded_engine::Front>::config(&cfg, 2).unwrap();
        let s1 = strata::StrataEngine::shard_config(&shard_opts, 1).unwrap();
        assert_eq!(s1.l0_tier_dir, Some(tier.join("shard-001")));
        assert_eq!(s1.pgm_epsilon, 64);
    }

    #[test]
    fn direct_io_is_reported_when_the_engine_lacks_it() {
        let cfg = EngineConfig {
            direct_io: true,
            ..EngineConfig::default()
        };
        let notes = Strata::notes(&cfg);
        let has_option = direct_io_option(&mut Options::default()).is_ok();
        assert_eq!(
            notes
                .iter()
                .any(|n| n.starts_with("direct I/O not yet supported")),
            !has_option,
            "{notes:?}"
        );
    }
}
