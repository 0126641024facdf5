//! `strata l0-space`: the space an L0 table (`docs/format/l0-tier.md`) takes against an
//! SSTable holding the same entries, as the L0 tier's measurement (NVM seed: 10M random
//! 256-byte keys with empty values).
//!
//! N random keys are sorted and written once, as internal keys of kind `Value` with distinct
//! sequence numbers (as a flush writes a memtable), into each table: an L0 table with the
//! engine's default options (its learned index included), and SSTables with the engine's
//! default table options (filter included) without compression and with lz4, plus one
//! without compression or filter (the L0 table has no filter). Values are random bytes stored
//! inline in the L0 table (no value log).
//!
//! Memory: keys are not kept. Key `i` is regenerated from the seed and `i`, so sorting keeps
//! only each key's first 16 bytes and its index (32 bytes per key with alignment, 320 MB for
//! 10M keys) and compares whole keys only on a tie of those bytes.

use anyhow::{bail, Context, Result};
use clap::Args;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::path::{Path, PathBuf};
use strata_engine::key::{make_internal_key, ValueKind};
use strata_engine::l0tier::{L0TableWriter, L0Value};
use strata_engine::sst::{TableBuilder, TableOptions};
use strata_engine::{Compression, Options};

#[derive(Args, Debug, Clone)]
pub struct L0SpaceArgs {
    /// Number of keys (distinct; duplicates drawn by chance are written once).
    #[arg(long, value_name = "N", default_value_t = 10_000_000)]
    pub keys: u64,
    /// Bytes per key (random).
    #[arg(long, value_name = "BYTES", default_value_t = 256)]
    pub key_size: usize,
    /// Bytes per value (random); 0 for empty values.
    #[arg(long, value_name = "BYTES", default_value_t = 0)]
    pub value_size: usize,
    /// The L0 table's learned-index error bound in entries (the engine option pgm_epsilon)
    /// [default: the engine's].
    #[arg(long, value_name = "N")]
    pub pgm_epsilon: Option<usize>,
    /// Seed of the keys and values.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Directory for the tables [default: a temporary directory, removed at the end].
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Write the figures to FILE as JSON.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

/// One table written.
#[derive(Clone, Debug, serde::Serialize)]
pub struct TableSize {
    /// "l0", "sst-none", "sst-lz4", "sst-none-nofilter".
    pub table: &'static str,
    pub path: PathBuf,
    pub bytes: u64,
    pub bytes_per_key: f64,
    /// `bytes` over the L0 table's bytes.
    pub vs_l0: f64,
}

/// What a run measured.
#[derive(Clone, Debug, serde::Serialize)]
pub struct L0Space {
    /// Distinct keys written.
    pub keys: u64,
    pub key_size: usize,
    pub value_size: usize,
    pub pgm_epsilon: usize,
    pub tables: Vec<TableSize>,
}

/// SplitMix64, seeded per key: key `i` is the same bytes whenever it is regenerated.
struct KeyRng(u64);

impl KeyRng {
    fn for_key(seed: u64, i: u64) -> KeyRng {
        let mut r = KeyRng(seed ^ i.wrapping_mul(0xD6E8_FEB8_6659_FD93));
        r.next();
        r
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn fill(&mut self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(8) {
            let r = self.next().to_le_bytes();
            chunk.copy_from_slice(&r[..chunk.len()]);
        }
    }
}

/// Key `i` and its value, into `key` and `value` (their lengths are the sizes).
fn entry(seed: u64, i: u64, key: &mut [u8], value: &mut [u8]) {
    let mut r = KeyRng::for_key(seed, i);
    r.fill(key);
    r.fill(value);
}

/// The first 16 bytes of key `i`, big-endian (zero-padded), ordered as the keys are.
fn prefix(seed: u64, i: u64, key: &mut [u8]) -> u128 {
    let mut r = KeyRng::for_key(seed, i);
    r.fill(key);
    let mut p = [0u8; 16];
    let n = key.len().min(16);
    p[..n].copy_from_slice(&key[..n]);
    u128::from_be_bytes(p)
}

fn bar(len: u64, what: &str) -> ProgressBar {
    // Drawn on a terminal only (indicatif hides it otherwise).
    let b = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
    if let Ok(s) = ProgressStyle::with_template("{msg:>8} [{bar:40}] {pos}/{len} keys {eta}") {
        b.set_style(s.progress_chars("=> "));
    }
    b.set_message(what.to_string());
    b
}

/// The key indexes in key order, duplicates (equal keys) left out.
fn sorted_indexes(a: &L0SpaceArgs) -> Vec<u64> {
    let mut k = vec![0u8; a.key_size];
    let b = bar(a.keys, "generate");
    let mut order: Vec<(u128, u64)> = (0..a.keys)
        .map(|i| {
            if i % 65536 == 0 {
                b.set_position(i);
            }
            (prefix(a.seed, i, &mut k), i)
        })
        .collect();
    b.finish_and_clear();
    let (mut ka, mut kb) = (vec![0u8; a.key_size], vec![0u8; a.key_size]);
    let mut full = |x: u64, y: u64| {
        entry(a.seed, x, &mut ka, &mut []);
        entry(a.seed, y, &mut kb, &mut []);
        ka.cmp(&kb)
    };
    order.sort_unstable_by(|x, y| x.0.cmp(&y.0).then_with(|| full(x.1, y.1)));
    let mut out: Vec<u64> = Vec::with_capacity(order.len());
    for w in 0..order.len() {
        if w > 0 && order[w].0 == order[w - 1].0 && full(order[w].1, order[w - 1].1).is_eq() {
            continue;
        }
        out.push(order[w].1);
    }
    out
}

/// Writes the tables into `dir` and returns their sizes.
pub fn measure(a: &L0SpaceArgs, dir: &Path) -> Result<L0Space> {
    if a.keys == 0 {
        bail!("--keys must be at least 1");
    }
    if a.key_size == 0 || a.key_size > strata_engine::batch::MAX_KEY_LEN {
        bail!(
            "--key-size must be between 1 and {} bytes",
            strata_engine::batch::MAX_KEY_LEN
        );
    }
    let mut o = Options::default();
    if let Some(e) = a.pgm_epsilon {
        o.pgm_epsilon = e;
    }
    o.validate()
        .map_err(|e| anyhow::anyhow!("--pgm-epsilon: {e}"))?;
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;

    let order = sorted_indexes(a);
    let l0_path = dir.join("000001.l0");
    let mut l0 = L0TableWriter::create(&l0_path, 1, o.l0_table_options())?;
    let base = TableOptions::from_options(&o);
    let ssts = [
        ("sst-none", Compression::None, base.filter),
        ("sst-lz4", Compression::Lz4, base.filter),
        ("sst-none-nofilter", Compression::None, false),
    ];
    let mut builders = Vec::new();
    for (i, (name, compression, filter)) in ssts.iter().enumerate() {
        let path = dir.join(format!("{:06}.{name}.sst", i + 2));
        let file = o.fs.create(&path)?;
        let opts = TableOptions {
            compression: *compression,
            filter: *filter,
            ..base
        };
        builders.push((*name, path, TableBuilder::new(file, opts)));
    }
    let (mut key, mut value) = (vec![0u8; a.key_size], vec![0u8; a.value_size]);
    let b = bar(order.len() as u64, "write");
    for (n, &i) in order.iter().enumerate() {
        if n % 65536 == 0 {
            b.set_position(n as u64);
        }
        entry(a.seed, i, &mut key, &mut value);
        let ikey = make_internal_key(&key, n as u64 + 1, ValueKind::Value);
        l0.add(&ikey, L0Value::Inline(&value))?;
        for (_, _, t) in &mut builders {
            t.add(&ikey, &value)?;
        }
    }
    b.finish_and_clear();
    let l0_meta = l0.finish()?;
    let keys = order.len() as u64;
    let per_key = |bytes: u64| bytes as f64 / keys as f64;
    let l0_bytes = l0_meta.file_size;
    let mut tables = vec![TableSize {
        table: "l0",
        path: l0_path,
        bytes: l0_bytes,
        bytes_per_key: per_key(l0_bytes),
        vs_l0: 1.0,
    }];
    for (name, path, t) in builders {
        let s = t.finish()?;
        tables.push(TableSize {
            table: name,
            path,
            bytes: s.file_size,
            bytes_per_key: per_key(s.file_size),
            vs_l0: s.file_size as f64 / l0_bytes as f64,
        });
    }
    Ok(L0Space {
        keys,
        key_size: a.key_size,
        value_size: a.value_size,
        pgm_epsilon: o.pgm_epsilon,
        tables,
    })
}

/// The figures as a Markdown table.
pub fn table(s: &L0Space) -> String {
    let mut t = format!(
        "{} random keys of {} bytes, values of {} bytes, sorted and written once into each table \
         (L0 table: pgm_epsilon {}; SSTables: the engine's default table options)\n\n\
         | table | bytes | MB | bytes/key | vs L0 table |\n|---|--:|--:|--:|--:|\n",
        s.keys, s.key_size, s.value_size, s.pgm_epsilon
    );
    for r in &s.tables {
        let name = match r.table {
            "l0" => "L0 table",
            "sst-none" => "SSTable, no compression",
            "sst-lz4" => "SSTable, lz4",
            "sst-none-nofilter" => "SSTable, no compression, no filter",
            other => other,
        };
        t.push_str(&format!(
            "| {name} | {} | {:.1} | {:.1} | {:.3}x |\n",
            r.bytes,
            r.bytes as f64 / 1e6,
            r.bytes_per_key,
            r.vs_l0
        ));
    }
    t
}

pub fn run(a: &L0SpaceArgs) -> Result<()> {
    let temp = match &a.dir {
        Some(_) => None,
        None => Some(
            tempfile::Builder::new()
                .prefix("strata-l0-space-")
                .tempdir()
                .context("cannot create a temporary directory")?,
        ),
    };
    let dir = a
        .dir
        .clone()
        .unwrap_or_else(|| temp.as_ref().expect("temporary directory").path().into());
    let s = measure(a, &dir)?;
    print!("{}", table(&s));
    if let Some(path) = &a.json {
        let text = serde_json::to_string_pretty(&s).context("cannot encode the results")?;
        std::fs::write(path, text + "\n")
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}

/// Key `i` of a run (for checks).
#[cfg(test)]
fn key_of(seed: u64, i: u64, key_size: usize) -> Vec<u8> {
    let mut k = vec![0u8; key_size];
    entry(seed, i, &mut k, &mut []);
    k
}

#[cfg(test)]
mod tests {
    use super::*;
    use strata_engine::key::MAX_SEQ;
    use strata_engine::l0tier::L0Table;

    fn args(keys: u64, key_size: usize, value_size: usize) -> L0SpaceArgs {
        L0SpaceArgs {
            keys,
            key_size,
            value_size,
            pgm_epsilon: None,
            seed: 7,
            dir: None,
            json: None,
        }
    }

    #[test]
    fn sorting_orders_whole_keys_and_drops_duplicates() {
        // 1-byte keys: at most 256 distinct among 2000 draws; 20-byte keys tie on the
        // 16-byte prefix never, but the order must match the keys'.
        for (n, ks) in [(2000u64, 1usize), (500, 20), (500, 16), (300, 3)] {
            let a = args(n, ks, 0);
            let order = sorted_indexes(&a);
            let keys: Vec<Vec<u8>> = order.iter().map(|&i| key_of(7, i, ks)).collect();
            assert!(keys.windows(2).all(|w| w[0] < w[1]), "key size {ks}");
            let mut all: Vec<Vec<u8>> = (0..n).map(|i| key_of(7, i, ks)).collect();
            all.sort();
            all.dedup();
            assert_eq!(keys, all, "key size {ks}");
        }
    }

    #[test]
    fn writes_both_tables_and_the_l0_table_finds_its_keys() {
        let tmp = tempfile::tempdir().unwrap();
        for value_size in [0usize, 100] {
            let dir = tmp.path().join(format!("v{value_size}"));
            let a = args(3000, 256, value_size);
            let s = measure(&a, &dir).unwrap();
            assert_eq!(s.keys, 3000);
            let names: Vec<_> = s.tables.iter().map(|t| t.table).collect();
            assert_eq!(names, ["l0", "sst-none", "sst-lz4", "sst-none-nofilter"]);
            for t in &s.tables {
                let len = std::fs::metadata(&t.path).unwrap().len();
                assert_eq!(len, t.bytes, "{}", t.table);
                // Every table holds at least the keys and values.
                assert!(len > 3000 * (256 + value_size) as u64, "{}: {len}", t.table);
                assert!((t.bytes_per_key - len as f64 / 3000.0).abs() < 1e-9);
            }
            let l0 = &s.tables[0];
            let sst = &s.tables[1];
            assert!((sst.vs_l0 - sst.bytes as f64 / l0.bytes as f64).abs() < 1e-12);
            // The filter costs bytes.
            assert!(s.tables[3].bytes < sst.bytes);
            let t = L0Table::open(&l0.path).unwrap();
            assert_eq!(t.entries(), 3000);
            for i in [0u64, 1, 1234, 2999] {
                let mut k = vec![0u8; 256];
                let mut v = vec![0u8; value_size];
                entry(7, i, &mut k, &mut v);
                let e = t.get(&k, MAX_SEQ).unwrap().expect("sampled key found");
                assert_eq!(e.kind, ValueKind::Value);
                assert_eq!(e.value, strata_engine::l0tier::L0ValueRef::Inline(&v));
            }
            let mut missing = key_of(7, 0, 256);
            missing[255] ^= 1;
            assert!(t.get(&missing, MAX_SEQ).unwrap().is_none());
        }
    }

    #[test]
    fn table_prints_every_table_and_ratio() {
        let tmp = tempfile::tempdir().unwrap();
        let s = measure(&args(500, 32, 0), tmp.path()).unwrap();
        let text = table(&s);
        assert!(text.starts_with("500 random keys of 32 bytes, values of 0 bytes"));
        assert!(text.contains("| L0 table | "), "{text}");
        assert!(text.contains("| SSTable, lz4 | "), "{text}");
        assert!(text.contains(" | 1.000x |"), "{text}");
        assert_eq!(text.lines().filter(|l| l.starts_with("| ")).count(), 5);
    }

    #[test]
    fn bad_arguments_are_refused() {
        let tmp = tempfile::tempdir().unwrap();
        assert!(measure(&args(0, 16, 0), tmp.path()).is_err());
        assert!(measure(&args(10, 0, 0), tmp.path()).is_err());
        let mut a = args(10, 16, 0);
        a.pgm_epsilon = Some(0);
        let e = measure(&a, tmp.path()).unwrap_err().to_string();
        assert!(e.contains("--pgm-epsilon"), "{e}");
    }
}
