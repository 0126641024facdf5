//! fjall (a Rust LSM-tree store) as a benchmark peer.
//!
//! One keyspace ("bench") in a fjall database. fjall has no cursor API: its iterators are
//! Rust iterators over a range, so [`FjallIter`] re-opens a range iterator on each seek and
//! when the direction changes. fjall has no MultiGet (multireadrandom loops over gets), no
//! direct I/O, and always journals its writes.

use super::engine::{Compression, Engine, EngineConfig};
use crate::text::human_bytes;
use anyhow::{anyhow, bail, Context, Result};
use fjall::config::{BlockSizePolicy, BloomConstructionPolicy, CompressionPolicy, FilterPolicy};
use fjall::config::{FilterPolicyEntry, PinningPolicy};
use fjall::{CompressionType, Database, Keyspace, KeyspaceCreateOptions, PersistMode};
use std::path::Path;
use std::time::Duration;
use strata::EngineIter;

/// `--opt fjall.NAME=VALUE` names.
pub const FJALL_OPTS: &str = "max_memtable_size, max_journaling_size, \
worker_threads, cache_size, block_size, expect_point_read_hits, pin_filters";

pub struct Fjall {
    db: Database,
    ks: Keyspace,
    sync: bool,
}

/// fjall's settings for `cfg`, parsed and validated.
#[derive(Debug)]
struct FjallSettings {
    cache_size: u64,
    max_memtable_size: Option<u64>,
    max_journaling_size: Option<u64>,
    worker_threads: Option<usize>,
    block_size: Option<u32>,
    expect_point_read_hits: bool,
    pin_filters: bool,
}

fn settings(cfg: &EngineConfig) -> Result<FjallSettings> {
    let mut s = FjallSettings {
        cache_size: cfg.cache_bytes,
        max_memtable_size: None,
        max_journaling_size: None,
        worker_threads: None,
        block_size: None,
        expect_point_read_hits: false,
        pin_filters: false,
    };
    for (name, value) in &cfg.opts {
        let num = || -> Result<u64> {
            value
                .parse()
                .map_err(|_| anyhow!("bad --opt fjall.{name}={value}: not a number"))
        };
        let boolean = || -> Result<bool> {
            match value.as_str() {
                "true" | "1" => Ok(true),
                "false" | "0" => Ok(false),
                _ => bail!("bad --opt fjall.{name}={value}: expected true or false"),
            }
        };
        match name.as_str() {
            "max_memtable_size" => s.max_memtable_size = Some(num()?),
            "max_journaling_size" => s.max_journaling_size = Some(num()?),
            "worker_threads" => {
                let n = num()?;
                if n == 0 {
                    bail!("bad --opt fjall.worker_threads=0: at least 1");
                }
                s.worker_threads = Some(n as usize)
            }
            "cache_size" => s.cache_size = num()?,
            "block_size" => {
                let n = num()?;
                if !(1024..=1 << 20).contains(&n) {
                    bail!("bad --opt fjall.block_size={n}: between 1 KiB and 1 MiB");
                }
                s.block_size = Some(n as u32)
            }
            "expect_point_read_hits" => s.expect_point_read_hits = boolean()?,
            "pin_filters" => s.pin_filters = boolean()?,
            _ => bail!("bad --opt fjall.{name}={value}: unknown option (known: {FJALL_OPTS})"),
        }
    }
    Ok(s)
}

fn keyspace_options(cfg: &EngineConfig, s: &FjallSettings) -> KeyspaceCreateOptions {
    let mut o = KeyspaceCreateOptions::default()
        .data_block_compression_policy(match cfg.compression {
            Compression::None => CompressionPolicy::disabled(),
            Compression::Lz4 => CompressionPolicy::all(CompressionType::Lz4),
        })
        .filter_policy(if cfg.bloom_bits == 0 {
            FilterPolicy::disabled()
        } else {
            FilterPolicy::all(FilterPolicyEntry::Bloom(
                BloomConstructionPolicy::BitsPerKey(cfg.bloom_bits as f32),
            ))
        })
        .expect_point_read_hits(s.expect_point_read_hits)
        // fjall's journal is written per write either way; this only skips flushing it to
        // the OS after each write.
        .manual_journal_persist(cfg.disable_wal);
    if let Some(n) = s.max_memtable_size {
        o = o.max_memtable_size(n);
    }
    if let Some(n) = s.block_size {
        o = o.data_block_size_policy(BlockSizePolicy::all(n));
    }
    if s.pin_filters {
        o = o.filter_block_pinning_policy(PinningPolicy::all(true));
    }
    o
}

impl Engine for Fjall {
    type Iter<'a> = FjallIter<'a>;
    const NAME: &'static str = "fjall";

    fn describe(cfg: &EngineConfig) -> Result<String> {
        let s = settings(cfg)?;
        let mut d = format!(
            "cache_size={} compression={} bloom_bits_per_key={} max_memtable_size={} \
             block_size={}",
            human_bytes(s.cache_size),
            cfg.compression.name(),
            cfg.bloom_bits,
            s.max_memtable_size
                .map_or("default (64 MiB)".to_string(), human_bytes),
            s.block_size
                .map_or("default (4 KiB)".to_string(), |b| b.to_string()),
        );
        if let Some(n) = s.worker_threads {
            d.push_str(&format!(" worker_threads={n}"));
        }
        if let Some(n) = s.max_journaling_size {
            d.push_str(&format!(" max_journaling_size={}", human_bytes(n)));
        }
        if s.expect_point_read_hits {
            d.push_str(" expect_point_read_hits=true");
        }
        if s.pin_filters {
            d.push_str(" pin_filters=true");
        }
        Ok(d)
    }

    fn notes(cfg: &EngineConfig) -> Vec<String> {
        let mut n = Vec::new();
        if cfg.direct_io {
            n.push("fjall has no direct I/O; --direct-io ignored".to_string());
        }
        if cfg.disable_wal {
            n.push(
                "fjall always writes its journal; --disable-wal only stops flushing it to \
                 the OS after each write"
                    .to_string(),
            );
        }
        n
    }

    fn open(dir: &Path, cfg: &EngineConfig) -> Result<Self> {
        let s = settings(cfg)?;
        let mut b = Database::builder(dir)
            .cache_size(s.cache_size)
            .manual_journal_persist(cfg.disable_wal);
        if let Some(n) = s.worker_threads {
            b = b.worker_threads(n);
        }
        if let Some(n) = s.max_journaling_size {
            b = b.max_journaling_size(n);
        }
        let db = b
            .open()
            .with_context(|| format!("cannot open fjall database at {}", dir.display()))?;
        let ks = db
            .keyspace("bench", || keyspace_options(cfg, &s))
            .context("cannot open fjall keyspace")?;
        Ok(Fjall {
            db,
            ks,
            sync: cfg.sync,
        })
    }

    fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.ks.insert(key, value)?;
        if self.sync {
            self.db.persist(PersistMode::SyncData)?;
        }
        Ok(())
    }

    fn delete(&self, key: &[u8]) -> Result<()> {
        self.ks.remove(key)?;
        if self.sync {
            self.db.persist(PersistMode::SyncData)?;
        }
        Ok(())
    }

    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.ks.get(key)?.map(|v| v.to_vec()))
    }

    fn multi_get(&self, keys: &[&[u8]]) -> Result<Vec<Option<Vec<u8>>>> {
        keys.iter().map(|k| self.get(k)).collect()
    }

    fn iter(&self) -> Result<FjallIter<'_>> {
        Ok(FjallIter {
            ks: &self.ks,
            inner: None,
            current: None,
            error: None,
        })
    }

    fn flush(&self) -> Result<()> {
        Ok(self.ks.rotate_memtable_and_wait()?)
    }

    fn compact(&self) -> Result<()> {
        Ok(self.ks.major_compact()?)
    }

    fn wait_idle(&self) -> Result<()> {
        while self.db.outstanding_flushes() > 0 || self.db.active_compactions() > 0 {
            std::thread::sleep(Duration::from_millis(5));
        }
        Ok(())
    }

    fn stats(&self) -> String {
        let disk = self.db.disk_space().map_or("?".to_string(), human_bytes);
        format!(
            "disk space: {disk}\ntables: {} (L0: {})\njournals: {}\n\
             compactions completed: {} ({:.1} s compacting)\ncache: {} of {}",
            self.ks.table_count(),
            self.ks.l0_table_count(),
            self.db.journal_count(),
            self.db.compactions_completed(),
            self.db.time_compacting().as_secs_f64(),
            human_bytes(self.db.cache_size()),
            human_bytes(self.db.cache_capacity()),
        )
    }

    fn close(self) -> Result<()> {
        self.db
            .persist(PersistMode::SyncAll)
            .context("cannot sync fjall's journal")?;
        drop(self.ks);
        drop(self.db);
        Ok(())
    }
}

type RangeIter = Box<dyn DoubleEndedIterator<Item = fjall::Guard>>;

/// A cursor made of fjall's range iterators.
pub struct FjallIter<'a> {
    ks: &'a Keyspace,
    /// The iterator positioned after `current` in its direction (true = forward).
    inner: Option<(RangeIter, bool)>,
    current: Option<(Vec<u8>, Vec<u8>)>,
    error: Option<String>,
}

impl FjallIter<'_> {
    fn pull(&mut self) {
        let Some((it, forward)) = self.inner.as_mut() else {
            self.current = None;
            return;
        };
        let g = if *forward { it.next() } else { it.next_back() };
        self.current = match g.map(|g| g.into_inner()) {
            None => None,
            Some(Ok((k, v))) => Some((k.to_vec(), v.to_vec())),
            Some(Err(e)) => {
                self.error = Some(e.to_string());
                None
            }
        };
    }

    fn start(&mut self, it: RangeIter, forward: bool) {
        self.inner = Some((it, forward));
        self.pull();
    }
}

impl EngineIter for FjallIter<'_> {
    fn valid(&self) -> bool {
        self.current.is_some()
    }
    fn seek_to_first(&mut self) {
        self.start(Box::new(self.ks.iter()), true);
    }
    fn seek_to_last(&mut self) {
        self.start(Box::new(self.ks.iter()), false);
    }
    fn seek(&mut self, key: &[u8]) {
        self.start(Box::new(self.ks.range(key.to_vec()..)), true);
    }
    fn seek_for_prev(&mut self, key: &[u8]) {
        self.start(Box::new(self.ks.range(..=key.to_vec())), false);
    }
    fn next(&mut self) {
        match &self.inner {
            Some((_, true)) => self.pull(),
            _ => {
                let Some((k, _)) = self.current.take() else {
                    return;
                };
                let it = self.ks.range::<Vec<u8>, _>((
                    std::ops::Bound::Excluded(k),
                    std::ops::Bound::Unbounded,
                ));
                self.start(Box::new(it), true);
            }
        }
    }
    fn prev(&mut self) {
        match &self.inner {
            Some((_, false)) => self.pull(),
            _ => {
                let Some((k, _)) = self.current.take() else {
                    return;
                };
                self.start(Box::new(self.ks.range(..k)), false);
            }
        }
    }
    fn key(&self) -> &[u8] {
        &self.current.as_ref().expect("valid iterator").0
    }
    fn value(&self) -> &[u8] {
        &self.current.as_ref().expect("valid iterator").1
    }
    fn status(&self) -> strata_engine::Result<()> {
        match &self.error {
            None => Ok(()),
            Some(e) => Err(strata_engine::Error::io(
                "fjall iterator",
                "",
                std::io::Error::other(e.clone()),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursor_moves_both_ways() {
        let t = tempfile::tempdir().unwrap();
        let e = Fjall::open(t.path(), &EngineConfig::default()).unwrap();
        for k in [b"a", b"c", b"e", b"g"] {
            e.put(k, b"v").unwrap();
        }
        let mut it = e.iter().unwrap();
        it.seek(b"b");
        assert_eq!(it.key(), b"c");
        it.next();
        assert_eq!(it.key(), b"e");
        it.prev();
        assert_eq!(it.key(), b"c");
        it.prev();
        assert_eq!(it.key(), b"a");
        it.prev();
        assert!(!it.valid());
        it.seek_to_last();
        assert_eq!(it.key(), b"g");
        it.next();
        assert!(!it.valid());
        it.seek_to_first();
        assert_eq!(it.key(), b"a");
        it.status().unwrap();
        drop(it);
        e.close().unwrap();
    }

    #[test]
    fn options_are_checked() {
        let cfg = EngineConfig {
            opts: vec![("max_memtable_size".into(), "8388608".into())],
            ..EngineConfig::default()
        };
        let d = Fjall::describe(&cfg).unwrap();
        assert!(d.contains("max_memtable_size=8.0 MiB"), "{d}");
        for bad in [
            ("nope", "1"),
            ("max_memtable_size", "x"),
            ("block_size", "10"),
        ] {
            let cfg = EngineConfig {
                opts: vec![(bad.0.into(), bad.1.into())],
                ..EngineConfig::default()
            };
            assert!(Fjall::describe(&cfg).is_err(), "{bad:?}");
        }
        let notes = Fjall::notes(&EngineConfig {
            direct_io: true,
            ..EngineConfig::default()
        });
        assert!(notes[0].contains("no direct I/O"), "{notes:?}");
    }
}
