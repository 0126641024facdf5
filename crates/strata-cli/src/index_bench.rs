//! `strata index-bench`: the PGM learned index (`strata_engine::pgm`) against binary search,
//! looking up keys inside one sorted run of fixed-size keys, as a table's index lookup does.
//! The L0 tier's measurement (NVM seed `003`): ns per lookup for 10^3 … 10^7 keys.
//!
//! With `--sst`: the SSTable read path's block lookup (`Options::sst_learned_index`,
//! `strata_engine::sst::learned`). For 10^4 … `--max-keys` keys it writes a real table to a
//! temporary directory, opens it twice (binary search over the index block; the learned index,
//! built up front) and times `Table::find_block` for present keys, printing a markdown table.

use clap::Args;
use std::hint::black_box;
use std::time::Instant;
use strata_engine::pgm::{key_to_u64, shared_prefix_len, Pgm};

#[derive(Args, Debug)]
pub struct IndexBenchArgs {
    /// Largest number of keys; runs 10^3, 10^4, ... up to it.
    #[arg(long, default_value_t = 10_000_000)]
    pub max_keys: usize,
    /// Error bounds of the PGM index to measure (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "16,32,64")]
    pub epsilon: Vec<usize>,
    /// Bytes per key.
    #[arg(long, default_value_t = 16)]
    pub key_size: usize,
    /// Lookups per measurement.
    #[arg(long, default_value_t = 1_000_000)]
    pub lookups: usize,
    /// Key layout: "random" (uniform random bytes) or "dbbench" (db_bench's: a random
    /// 8-byte big-endian index padded with '0' bytes, over a space 10x the key count).
    #[arg(long, default_value = "random")]
    pub keys: String,
    /// Measurements per figure; the median is reported.
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    /// Measure the block lookup of real SSTables (binary search over the index block against
    /// the learned index) instead of a flat sorted run; starts at 10^4 keys.
    #[arg(long)]
    pub sst: bool,
    /// `--sst`: bytes per value (with 4 KiB blocks, sets how many keys share a block).
    #[arg(long, default_value_t = 100)]
    pub value_size: usize,
    /// `--sst`: the first table's key count (default 10^4).
    #[arg(long, default_value_t = 10_000)]
    pub min_keys: usize,
    /// `--sst`: each table has this many times the keys of the one before (default 10; a
    /// smaller factor finds where the learned index starts to pay).
    #[arg(long, default_value_t = 10.0)]
    pub factor: f64,
}

/// xorshift64*: a fast deterministic generator for keys and query order (the benchmark
/// needs reproducible inputs, not statistical quality).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

fn make_keys(n: usize, size: usize, layout: &str, rng: &mut Rng) -> anyhow::Result<Vec<u8>> {
    let mut keys: Vec<Vec<u8>> = (0..n)
        .map(|_| match layout {
            "random" => (0..size).map(|_| rng.next() as u8).collect(),
            "dbbench" => {
                let mut k = (rng.next() % (n as u64 * 10)).to_be_bytes().to_vec();
                k.resize(size.max(8), b'0');
                k
            }
            _ => Vec::new(),
        })
        .collect();
    if layout != "random" && layout != "dbbench" {
        anyhow::bail!("--keys must be random or dbbench, not {layout:?}");
    }
    keys.sort_unstable();
    keys.dedup();
    Ok(keys.concat())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

pub fn run(a: &IndexBenchArgs) -> anyhow::Result<()> {
    if a.sst {
        return run_sst(a);
    }
    let ks = a.key_size.max(8);
    println!(
        "keys: {} of {ks} bytes; {} lookups of present keys per measurement, median of {}",
        a.keys, a.lookups, a.rounds
    );
    println!(
        "{:>10} {:>8} {:>10} {:>12} {:>12} {:>14} {:>8}",
        "keys", "epsilon", "segments", "index bytes", "pgm ns", "binary ns", "ratio"
    );
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut n = 1000;
    while n <= a.max_keys {
        let flat = make_keys(n, ks, &a.keys, &mut rng)?;
        let count = flat.len() / ks;
        let key = |i: usize| &flat[i * ks..(i + 1) * ks];
        let prefix = shared_prefix_len(key(0), key(count - 1));
        let mapped: Vec<u64> = (0..count).map(|i| key_to_u64(key(i), prefix)).collect();
        let queries: Vec<usize> = (0..a.lookups)
            .map(|_| (rng.next() % count as u64) as usize)
            .collect();
        let binary = median(
            (0..a.rounds)
                .map(|_| {
                    let t = Instant::now();
                    for &q in &queries {
                        let qk = key(q);
                        let mut lo = 0;
                        let mut hi = count;
                        while lo < hi {
                            let mid = lo + (hi - lo) / 2;
                            if key(mid) < qk {
                                lo = mid + 1;
                            } else {
                                hi = mid;
                            }
                        }
                        assert_eq!(lo, q);
                        black_box(lo);
                    }
                    t.elapsed().as_nanos() as f64 / a.lookups as f64
                })
                .collect(),
        );
        for &eps in &a.epsilon {
            let pgm = Pgm::build(&mapped, eps);
            let learned = median(
                (0..a.rounds)
                    .map(|_| {
                        let t = Instant::now();
                        for &q in &queries {
                            let qk = key(q);
                            let got = pgm.lower_bound_by(key_to_u64(qk, prefix), |i| key(i) < qk);
                            assert_eq!(got, q);
                            black_box(got);
                        }
                        t.elapsed().as_nanos() as f64 / a.lookups as f64
                    })
                    .collect(),
            );
            println!(
                "{:>10} {:>8} {:>10} {:>12} {:>12.1} {:>14.1} {:>8.2}",
                count,
                eps,
                pgm.level_sizes().iter().sum::<usize>(),
                pgm.size_bytes(),
                learned,
                binary,
                binary / learned
            );
        }
        n *= 10;
    }
    Ok(())
}

/// Median ns per call of `find` over `queries`, over `rounds` rounds.
fn time_lookups<T>(rounds: usize, queries: &[Vec<u8>], find: impl Fn(&[u8]) -> T) -> f64 {
    median(
        (0..rounds.max(1))
            .map(|_| {
                let t = Instant::now();
                for q in queries {
                    black_box(find(q));
                }
                t.elapsed().as_nanos() as f64 / queries.len().max(1) as f64
            })
            .collect(),
    )
}

/// `--sst`: block lookups in real tables, binary search against the learned index.
fn run_sst(a: &IndexBenchArgs) -> anyhow::Result<()> {
    use strata_engine::io::{Fs, RealFs};
    use strata_engine::key::{make_internal_key, seek_key, ValueKind, MAX_SEQ};
    use strata_engine::sst::{learned, Table, TableBuilder, TableOptions};

    let ks = a.key_size.max(8);
    let dir = tempfile::tempdir()?;
    let fs = RealFs::new();
    println!(
        "SSTable block lookup (`Table::find_block`): keys {} of {ks} bytes, values of {} bytes, \
         4 KiB blocks, epsilon {}; {} lookups of present keys, median of {}\n",
        a.keys,
        a.value_size,
        learned::EPSILON,
        a.lookups,
        a.rounds
    );
    println!(
        "| keys | blocks | segments | model bytes | binary ns | learned ns | speedup | kept by the automatic build |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---|");
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let value = vec![b'v'; a.value_size];
    anyhow::ensure!(a.factor > 1.0, "--factor must be more than 1");
    let mut n = a.min_keys.max(1);
    while n <= a.max_keys {
        let flat = make_keys(n, ks, &a.keys, &mut rng)?;
        let count = flat.len() / ks;
        let key = |i: usize| &flat[i * ks..(i + 1) * ks];
        let path = dir.path().join(format!("{n}.sst"));
        let mut b = TableBuilder::new(fs.create(&path)?, TableOptions::default());
        for i in 0..count {
            b.add(&make_internal_key(key(i), 1, ValueKind::Value), &value)?;
        }
        b.finish()?;
        let binary = Table::open_with(fs.open(&path)?, 1, None, false)?;
        let learned = Table::open_with(fs.open(&path)?, 2, None, true)?;
        if !learned.build_learned_index() {
            println!(
                "| {count} | {} | (under {} blocks: no model) | | | | | |",
                learned.num_blocks(),
                learned::MIN_BLOCKS
            );
            n = ((n as f64) * a.factor).ceil() as usize;
            continue;
        }
        let queries: Vec<Vec<u8>> = (0..a.lookups)
            .map(|_| seek_key(key((rng.next() % count as u64) as usize), MAX_SEQ))
            .collect();
        for q in &queries {
            anyhow::ensure!(
                binary.find_block(q) == learned.find_block(q),
                "the learned index found another block for {q:?}"
            );
        }
        let b_ns = time_lookups(a.rounds, &queries, |q| binary.find_block(q));
        let l_ns = time_lookups(a.rounds, &queries, |q| learned.find_block(q));
        let model_bytes = learned.memory_bytes().saturating_sub(binary.memory_bytes());
        // What the engine's automatic build decides for this table: it times both searches
        // on the table's separators once it has served enough lookups.
        let auto = Table::open_with(fs.open(&path)?, 3, None, true)?;
        for q in queries
            .iter()
            .cycle()
            .take(learned::BUILD_AFTER_LOOKUPS as usize)
        {
            auto.find_block(q);
        }
        println!(
            "| {count} | {} | {} | {model_bytes} | {b_ns:.1} | {l_ns:.1} | {:.2} | {} |",
            learned.num_blocks(),
            learned.learned_index_levels().iter().sum::<usize>(),
            b_ns / l_ns,
            if auto.has_learned_index() {
                "yes"
            } else {
                "no"
            }
        );
        fs.remove(&path)?;
        n = ((n as f64) * a.factor).ceil() as usize;
    }
    Ok(())
}
