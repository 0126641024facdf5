//! `strata index-bench`: the PGM learned index (`strata_engine::pgm`) against binary search,
//! looking up keys inside one sorted run of fixed-size keys, as a table's index lookup does.
//! The L0 tier's measurement (NVM seed `003`): ns per lookup for 10^3 … 10^7 keys.

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
