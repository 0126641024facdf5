//! The flags of `strata bench` ([`BenchArgs`]) and what follows from them: validation,
//! each engine's configuration, the benchmarks' labels.

use super::catalog::{
    parse_benchmark, parse_engine, Benchmark, EngineKind, BENCHMARKS_HELP, NO_ROCKSDB,
};
use super::dist::{ReadDist, RequestDist, GAUSSIAN_SIGMA_FRACTION};
use super::engine::{Compression, EngineConfig};
use super::keys::KeyGen;
use crate::opts::{parse_opt, OPT_HELP};
use anyhow::{bail, Result};
use clap::Args;
use std::path::PathBuf;

fn parse_compression(s: &str) -> Result<Compression, String> {
    match s {
        "none" => Ok(Compression::None),
        "lz4" => Ok(Compression::Lz4),
        _ => Err(format!("expected none or lz4, got {s:?}")),
    }
}

fn parse_dist(s: &str) -> Result<RequestDist, String> {
    match s {
        "uniform" => Ok(RequestDist::Uniform),
        "zipfian" => Ok(RequestDist::Zipfian),
        "latest" => Ok(RequestDist::Latest),
        _ => Err(format!("expected uniform, zipfian or latest, got {s:?}")),
    }
}

/// The name given to `--read-distribution`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ReadDistName {
    Uniform,
    Gaussian,
}

const ENGINE_HELP: &str = "Comma-separated engines to run the benchmarks on, in turn: \
strata, fjall, rocksdb (rocksdb needs a binary built with --features rocksdb). With more \
than one, a summary table gives each engine's medians and its ratio to the first engine";

const BENCH_OPT_HELP: &str = "Engine option NAME=VALUE; repeatable. A bare NAME goes to the \
first engine of --engine; ENGINE.NAME (strata.NAME, rocksdb.NAME, fjall.NAME) to that \
engine. Strata: the names of Options::set (see `strata help put`); l0_tier_dir=DIR \
belongs to the benchmark's database (it must be new or empty, is emptied with the database \
and removed with a temporary one; the sharded engine gives each shard DIR/shard-NNN). RocksDB: \
write_buffer_size, max_write_buffer_number, level0_file_num_compaction_trigger, \
level0_slowdown_writes_trigger, level0_stop_writes_trigger, max_bytes_for_level_base, \
max_bytes_for_level_multiplier, target_file_size_base, num_levels, max_background_jobs, \
max_subcompactions, max_open_files, bytes_per_sync, compaction_readahead_size, \
level_compaction_dynamic_level_bytes, use_direct_io_for_flush_and_compaction, block_size, \
cache_index_and_filter_blocks, format_version, optimize_filters_for_hits, and any mutable \
option (passed to DB::set_options). fjall: max_memtable_size, max_journaling_size, worker_threads, cache_size, block_size, expect_point_read_hits, \
pin_filters";

/// Flags of `strata bench` (db_bench's, in kebab-case).
#[derive(Args, Debug, Clone)]
pub struct BenchArgs {
    #[arg(
        long,
        value_name = "LIST",
        value_delimiter = ',',
        default_value = "fillrandom,readrandom",
        value_parser = parse_benchmark,
        help = "Comma-separated benchmarks to run in order",
        long_help = BENCHMARKS_HELP
    )]
    pub benchmarks: Vec<Benchmark>,
    #[arg(
        long = "engine",
        value_name = "LIST",
        value_delimiter = ',',
        default_value = "strata",
        value_parser = parse_engine,
        help = ENGINE_HELP
    )]
    pub engines: Vec<EngineKind>,
    /// Times the whole benchmark list runs on each engine (engines alternate: A B A B ...).
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub rounds: usize,
    /// Size of the key space, and writes per thread for fill*, overwrite and deleterandom
    /// (see --writes).
    #[arg(long, value_name = "N", default_value_t = 200_000)]
    pub num: u64,
    /// Operations per thread of the reading and YCSB benchmarks [default: --num].
    #[arg(long, value_name = "N")]
    pub reads: Option<u64>,
    /// Writes per thread of fillrandom, overwrite and deleterandom [default: --num].
    #[arg(long, value_name = "N")]
    pub writes: Option<u64>,
    /// Run each random benchmark for this many seconds instead of a number of operations
    /// (0: use --num and --reads). fillseq, ycsb-load, readseq and readreverse ignore it.
    #[arg(long, value_name = "SECS", default_value_t = 0)]
    pub duration: u64,
    /// Bytes per key (the first 8 are the big-endian key index).
    #[arg(long, value_name = "BYTES", default_value_t = 16)]
    pub key_size: usize,
    /// Bytes per value (random, incompressible).
    #[arg(long, value_name = "BYTES", default_value_t = 128)]
    pub value_size: usize,
    /// Draw each value's size uniformly from [--value-size, BYTES] (db_bench's
    /// --value_size_distribution_type=uniform with --value_size_min and --value_size_max);
    /// byte figures (MB/s, write and space amplification) then use the mean size.
    #[arg(long, value_name = "BYTES")]
    pub value_size_max: Option<usize>,
    /// Threads running each benchmark concurrently.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub threads: usize,
    /// Database directory [default: a new temporary directory, removed at the end unless
    /// --keep]. Without --use-existing-db it must be new or empty. With several engines,
    /// each uses DIR/ENGINE.
    #[arg(long, value_name = "DIR")]
    pub db: Option<PathBuf>,
    /// Keep the temporary database directory and print where it is.
    #[arg(long)]
    pub keep: bool,
    /// Benchmark the database already in --db DIR (fillseq, fillrandom and ycsb-load are
    /// skipped).
    #[arg(long)]
    pub use_existing_db: bool,
    /// Seed of the key and value generators (each thread and benchmark derives its own).
    #[arg(long, default_value_t = 1000)]
    pub seed: u64,
    /// fsync the write-ahead log on every write.
    #[arg(long)]
    pub sync: bool,
    /// Write without the write-ahead log.
    #[arg(long)]
    pub disable_wal: bool,
    /// Read tables with direct I/O, bypassing the page cache (RocksDB: use_direct_reads).
    #[arg(long)]
    pub direct_io: bool,
    /// Block cache capacity of every engine, in bytes (db_bench's --cache_size default).
    #[arg(long, value_name = "BYTES", default_value_t = 8 << 20)]
    pub cache_bytes: u64,
    /// Filter bits per key of every engine (0: no filter). Strata's filter has a fixed
    /// size of about 9 bits per key: any value above 0 turns it on.
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub bloom_bits: u32,
    /// Block compression of every engine: none or lz4.
    #[arg(long, value_name = "NAME", default_value = "none", value_parser = parse_compression)]
    pub compression: Compression,
    #[arg(long = "opt", value_name = "NAME=VALUE", value_parser = parse_opt, help = BENCH_OPT_HELP, long_help = format!("{BENCH_OPT_HELP}.\n\n{OPT_HELP}"))]
    pub opts: Vec<(String, String)>,
    /// seekrandom: entries read with next() after each seek.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub seek_nexts: u64,
    /// multireadrandom: keys per MultiGet call.
    #[arg(long, value_name = "N", default_value_t = 32)]
    pub batch_size: usize,
    /// multireadrandom: batches handed to one pipelined MultiGet call (each batch its own
    /// snapshot), with at most --batch-size block reads in flight across them, so the next
    /// batch's reads start before the current one's last read completes. 1: one MultiGet
    /// per batch, each waiting for its slowest read. Engines without a pipelined MultiGet
    /// loop over their batches. Latency samples are then per call, not per batch.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub pipeline: usize,
    /// Keys picked by readrandom, readmissing, readwhilewriting's readers, multireadrandom
    /// and seekrandom: uniform over [0, --num), or gaussian (hot keys in the middle of the key
    /// space: a normal draw with mean --num/2 and standard deviation --gaussian-sigma × --num,
    /// clamped to [0, --num)).
    #[arg(long, value_name = "DIST", value_enum, default_value = "uniform")]
    pub read_distribution: ReadDistName,
    /// --read-distribution gaussian: standard deviation as a fraction of --num (0.1: about
    /// 68% of the reads hit the middle 20% of the keys).
    #[arg(long, value_name = "FRACTION", default_value_t = GAUSSIAN_SIGMA_FRACTION)]
    pub gaussian_sigma: f64,
    /// YCSB workloads: override the request distribution (uniform, zipfian or latest).
    #[arg(long, value_name = "DIST", value_parser = parse_dist)]
    pub ycsb_distribution: Option<RequestDist>,
    /// Write every figure of every run, the medians and the environment to FILE as JSON.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Sharded engines (sharded, sharded-rocksdb): number of shards, each an engine
    /// instance with its own worker thread [default: the number of cores].
    #[arg(long, value_name = "N")]
    pub shards: Option<usize>,
    /// Sharded engines: requests a worker merges into one engine write or read
    /// (opportunistic batching); 1 turns batching off.
    #[arg(long, value_name = "N", default_value_t = 32)]
    pub max_batch: usize,
    /// Sharded engines: reads run in the calling thread when the shard has no pending write
    /// (the front's default); false sends every read through the shard's worker (p2KVS).
    #[arg(long, value_name = "BOOL", default_value_t = true, action = clap::ArgAction::Set)]
    pub direct_reads: bool,
    /// Sharded engines: put, delete and single-shard batches write the shard's engine in the
    /// calling thread when the shard has no queued write (the front's default); false sends
    /// every write through the shard's worker, batched (p2KVS).
    #[arg(long, value_name = "BOOL", default_value_t = true, action = clap::ArgAction::Set)]
    pub direct_writes: bool,
    /// Write benchmarks (fill*, overwrite, ycsb-load) use the asynchronous put of the sharded
    /// engines: a thread queues its puts and goes on, each latency is measured until its
    /// completion callback, at most --async-depth puts per thread in flight. Engines without an
    /// asynchronous API write synchronously (the header says so).
    #[arg(long = "async")]
    pub asynchronous: bool,
    /// --async: puts in flight per thread.
    #[arg(long, value_name = "N", default_value_t = 4096)]
    pub async_depth: u64,
    /// Offered load in operations per second over all threads (0: as fast as possible).
    /// Each operation is issued at its scheduled time and its latency counts from then, so
    /// queueing behind a slow store shows (no coordinated omission). With several values
    /// (comma-separated), the benchmarks run once per rate and the summary gives latency
    /// against offered load (p2KVS Fig. 13); --latency-plot draws it.
    #[arg(long, value_name = "OPS", value_delimiter = ',', default_value = "0")]
    pub rate: Vec<u64>,
    /// Draw p50 and p99 latency against offered load (--rate list), a line per engine, into
    /// FILE (PNG).
    #[arg(long, value_name = "FILE")]
    pub latency_plot: Option<PathBuf>,
    /// Draw throughput per second over each benchmark, a line per engine, into FILE (PNG).
    #[arg(long, value_name = "FILE")]
    pub plot: Option<PathBuf>,
}

impl BenchArgs {
    pub(super) fn reads(&self) -> u64 {
        self.reads.unwrap_or(self.num)
    }

    pub(super) fn writes(&self) -> u64 {
        self.writes.unwrap_or(self.num)
    }

    /// The key distribution of the reading benchmarks.
    pub(super) fn read_dist(&self) -> ReadDist {
        match self.read_distribution {
            ReadDistName::Uniform => ReadDist::Uniform,
            ReadDistName::Gaussian => ReadDist::Gaussian {
                sigma_fraction: self.gaussian_sigma,
            },
        }
    }

    /// The smallest and largest value size.
    pub fn value_sizes(&self) -> (usize, usize) {
        (
            self.value_size,
            self.value_size_max.unwrap_or(self.value_size),
        )
    }

    /// The mean value size, for byte figures.
    pub fn mean_value_size(&self) -> usize {
        let (min, max) = self.value_sizes();
        (min + max) / 2
    }

    pub(super) fn validate(&self) -> Result<()> {
        if self.value_size_max.is_some_and(|m| m < self.value_size) {
            bail!("--value-size-max must be at least --value-size");
        }
        if !(self.gaussian_sigma.is_finite() && self.gaussian_sigma > 0.0) {
            bail!("--gaussian-sigma must be a positive fraction of --num");
        }
        if self.num == 0 {
            bail!("--num must be at least 1");
        }
        if self.threads == 0 || self.threads > 1024 {
            bail!("--threads must be between 1 and 1024");
        }
        if self.pipeline == 0 {
            bail!("--pipeline must be at least 1");
        }
        if self.batch_size == 0 {
            bail!("--batch-size must be at least 1");
        }
        if self.rounds == 0 {
            bail!("--rounds must be at least 1");
        }
        if self.max_batch == 0 {
            bail!("--max-batch must be at least 1 (1 turns batching off)");
        }
        if self.shards == Some(0) {
            bail!("--shards must be at least 1");
        }
        if self.async_depth == 0 {
            bail!("--async-depth must be at least 1");
        }
        if self.key_size > strata_engine::batch::MAX_KEY_LEN {
            bail!(
                "--key-size must be at most {} bytes",
                strata_engine::batch::MAX_KEY_LEN
            );
        }
        KeyGen::check(self.key_size, self.num).map_err(anyhow::Error::msg)?;
        let ycsb = self
            .benchmarks
            .iter()
            .any(|b| b.ycsb().is_some() || *b == Benchmark::YcsbLoad);
        if ycsb && self.key_size < 8 {
            bail!("the YCSB benchmarks need --key-size 8 or more (records are hashed into keys)");
        }
        if self.use_existing_db && self.db.is_none() {
            bail!("--use-existing-db needs --db DIR");
        }
        if self.engines.is_empty() {
            bail!("--engine needs at least one engine");
        }
        for (i, e) in self.engines.iter().enumerate() {
            if self.engines[..i].contains(e) {
                bail!("--engine lists {} twice", e.name());
            }
            if !e.available() {
                bail!("--engine {}: {NO_ROCKSDB}", e.name());
            }
        }
        for (name, value) in &self.opts {
            if let Some((prefix, _)) = name.split_once('.') {
                match parse_engine(prefix) {
                    Ok(e) if !self.engines.contains(&e) => bail!(
                        "--opt {name}={value} is for {}, which --engine does not list",
                        e.name()
                    ),
                    Ok(_) => {}
                    Err(_) => bail!(
                        "--opt {name}={value}: {prefix:?} is not an engine \
                         (strata, rocksdb, fjall)"
                    ),
                }
            }
        }
        Ok(())
    }

    /// The `--opt`s meant for `kind`: its prefixed ones, and the bare ones when it is the
    /// first engine.
    pub(super) fn engine_opts(&self, kind: EngineKind) -> Vec<(String, String)> {
        let first = self.engines.first() == Some(&kind);
        self.opts
            .iter()
            .filter_map(|(name, value)| match name.split_once('.') {
                Some((prefix, rest)) => {
                    (prefix == kind.name()).then(|| (rest.to_string(), value.clone()))
                }
                None => first.then(|| (name.clone(), value.clone())),
            })
            .collect()
    }

    pub(super) fn engine_config(&self, kind: EngineKind) -> EngineConfig {
        EngineConfig {
            opts: self.engine_opts(kind),
            sync: self.sync,
            disable_wal: self.disable_wal,
            create_if_missing: !self.use_existing_db,
            cache_bytes: self.cache_bytes,
            bloom_bits: self.bloom_bits,
            compression: self.compression,
            direct_io: self.direct_io,
            shards: self.shards,
            max_batch: self.max_batch,
            direct_reads: self.direct_reads,
            direct_writes: self.direct_writes,
        }
    }

    /// Each benchmark's name in the results: its name, with "#2", "#3"... when the list
    /// holds it more than once.
    pub(super) fn labels(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (i, b) in self.benchmarks.iter().enumerate() {
            let n = self.benchmarks[..i].iter().filter(|x| *x == b).count();
            out.push(if n == 0 {
                b.name().to_string()
            } else {
                format!("{}#{}", b.name(), n + 1)
            });
        }
        out
    }
}

/// `strata bench ARGS` as the command line parses it (for tests).
#[cfg(test)]
pub(super) fn bench_args(args: &[&str]) -> Result<BenchArgs, clap::Error> {
    use clap::Parser;
    let cli = crate::Cli::try_parse_from(["strata", "bench"].iter().chain(args.iter()).copied())?;
    match cli.command {
        crate::Command::Bench(b) => Ok(*b),
        _ => unreachable!(),
    }
}

#[cfg(test)]
mod tests {
    use super::super::catalog::ALL;
    use super::*;
    use std::path::Path;

    #[test]
    fn defaults_are_small_and_db_bench_like() {
        let a = bench_args(&[]).unwrap();
        assert_eq!(
            a.benchmarks,
            vec![Benchmark::FillRandom, Benchmark::ReadRandom]
        );
        assert_eq!(a.num, 200_000);
        assert_eq!(a.reads(), 200_000);
        assert_eq!((a.key_size, a.value_size, a.threads), (16, 128, 1));
        assert_eq!((a.seek_nexts, a.batch_size), (0, 32));
        assert!(a.db.is_none() && !a.keep && !a.use_existing_db && !a.sync && !a.disable_wal);
        assert_eq!(a.engines, vec![EngineKind::Strata]);
        assert_eq!(
            (a.rounds, a.duration, a.cache_bytes, a.bloom_bits),
            (1, 0, 8 << 20, 10)
        );
        assert_eq!(a.compression, Compression::None);
        assert!(!a.direct_io && a.json.is_none() && a.plot.is_none());
        assert!(a.ycsb_distribution.is_none());
        assert_eq!(a.read_dist(), ReadDist::Uniform);
        a.validate().unwrap();
    }

    #[test]
    fn flags_parse() {
        let a = bench_args(&[
            "--benchmarks",
            "fillseq,readseq,compact,stats",
            "--num",
            "1000",
            "--reads",
            "10",
            "--writes",
            "20",
            "--key-size",
            "24",
            "--value-size",
            "1000",
            "--threads",
            "4",
            "--db",
            "/tmp/b",
            "--use-existing-db",
            "--seed",
            "7",
            "--sync",
            "--disable-wal",
            "--opt",
            "filter=false",
            "--seek-nexts",
            "10",
            "--batch-size",
            "8",
            "--keep",
            "--engine",
            "strata,fjall",
            "--rounds",
            "3",
            "--duration",
            "5",
            "--direct-io",
            "--cache-bytes",
            "1048576",
            "--bloom-bits",
            "0",
            "--compression",
            "lz4",
            "--ycsb-distribution",
            "uniform",
            "--json",
            "/tmp/r.json",
            "--plot",
            "/tmp/r.png",
        ])
        .unwrap();
        assert_eq!(
            a.benchmarks,
            vec![
                Benchmark::FillSeq,
                Benchmark::ReadSeq,
                Benchmark::Compact,
                Benchmark::Stats
            ]
        );
        assert_eq!(
            (a.num, a.reads(), a.writes(), a.key_size, a.value_size),
            (1000, 10, 20, 24, 1000)
        );
        assert_eq!(
            (a.threads, a.seed, a.seek_nexts, a.batch_size),
            (4, 7, 10, 8)
        );
        assert!(a.use_existing_db && a.sync && a.disable_wal && a.keep && a.direct_io);
        assert_eq!(a.opts, vec![("filter".to_string(), "false".to_string())]);
        assert_eq!(a.engines, vec![EngineKind::Strata, EngineKind::Fjall]);
        assert_eq!(
            (a.rounds, a.duration, a.cache_bytes, a.bloom_bits),
            (3, 5, 1 << 20, 0)
        );
        assert_eq!(a.compression, Compression::Lz4);
        assert_eq!(a.ycsb_distribution, Some(RequestDist::Uniform));
        assert_eq!(a.json.as_deref(), Some(Path::new("/tmp/r.json")));
        assert_eq!(a.plot.as_deref(), Some(Path::new("/tmp/r.png")));
        a.validate().unwrap();
    }

    #[test]
    fn bad_values_are_usage_errors() {
        for args in [
            &["--engine", "leveldb"][..],
            &["--compression", "zstd"],
            &["--ycsb-distribution", "hotspot"],
            &["--benchmarks", "ycsb-g"],
        ] {
            assert!(bench_args(args).is_err(), "{args:?}");
        }
    }

    #[test]
    fn opts_are_routed_to_engines() {
        let a = bench_args(&[
            "--engine",
            "fjall,strata",
            "--opt",
            "max_memtable_size=1048576",
            "--opt",
            "strata.write_buffer_bytes=1048576",
            "--opt",
            "fjall.cache_size=4096",
        ])
        .unwrap();
        a.validate().unwrap();
        let pair = |n: &str, v: &str| (n.to_string(), v.to_string());
        assert_eq!(
            a.engine_opts(EngineKind::Fjall),
            vec![
                pair("max_memtable_size", "1048576"),
                pair("cache_size", "4096")
            ]
        );
        assert_eq!(
            a.engine_opts(EngineKind::Strata),
            vec![pair("write_buffer_bytes", "1048576")]
        );
        let cfg = a.engine_config(EngineKind::Strata);
        assert_eq!(cfg.cache_bytes, 8 << 20);
        assert!(cfg.create_if_missing);
        // A prefix naming an engine outside --engine, or no engine, is refused.
        let e = bench_args(&["--opt", "fjall.cache_size=1"])
            .unwrap()
            .validate()
            .unwrap_err()
            .to_string();
        assert!(e.contains("which --engine does not list"), "{e}");
        let e = bench_args(&["--opt", "leveldb.x=1"])
            .unwrap()
            .validate()
            .unwrap_err()
            .to_string();
        assert!(e.contains("is not an engine"), "{e}");
    }

    #[test]
    fn read_distribution_flags() {
        let a = bench_args(&["--read-distribution", "gaussian"]).unwrap();
        assert_eq!(
            a.read_dist(),
            ReadDist::Gaussian {
                sigma_fraction: 0.1
            }
        );
        let a = bench_args(&[
            "--read-distribution",
            "gaussian",
            "--gaussian-sigma",
            "0.25",
        ])
        .unwrap();
        a.validate().unwrap();
        assert_eq!(
            a.read_dist(),
            ReadDist::Gaussian {
                sigma_fraction: 0.25
            }
        );
        assert!(bench_args(&["--read-distribution", "zipf"]).is_err());
        for bad in ["0", "-1", "inf", "NaN"] {
            let e = bench_args(&[&format!("--gaussian-sigma={bad}")])
                .unwrap()
                .validate()
                .unwrap_err()
                .to_string();
            assert!(e.contains("--gaussian-sigma"), "{bad}: {e}");
        }
    }

    #[test]
    fn a_value_size_range_has_its_mean_and_must_not_be_reversed() {
        let a = bench_args(&[]).unwrap();
        assert_eq!((a.value_sizes(), a.mean_value_size()), ((128, 128), 128));
        let a = bench_args(&["--value-size", "64", "--value-size-max", "8192"]).unwrap();
        a.validate().unwrap();
        assert_eq!((a.value_sizes(), a.mean_value_size()), ((64, 8192), 4128));
        let e = bench_args(&["--value-size", "100", "--value-size-max", "99"])
            .unwrap()
            .validate()
            .unwrap_err()
            .to_string();
        assert!(e.contains("--value-size-max"), "{e}");
    }

    #[test]
    fn repeated_benchmarks_get_numbered_labels() {
        let a = bench_args(&["--benchmarks", "readrandom,compact,readrandom,readrandom"]).unwrap();
        assert_eq!(
            a.labels(),
            vec!["readrandom", "compact", "readrandom#2", "readrandom#3"]
        );
    }

    #[test]
    fn every_benchmark_name_parses_and_unknown_ones_are_listed() {
        for (n, b) in ALL {
            assert_eq!(parse_benchmark(n), Ok(b));
            assert_eq!(b.name(), n);
        }
        let e = parse_benchmark("readrandomm").unwrap_err();
        assert!(e.contains("unknown benchmark \"readrandomm\""), "{e}");
        assert!(e.contains("fillseq, fillrandom"), "{e}");
        assert!(bench_args(&["--benchmarks", "fillseq,nope"]).is_err());
    }

    #[test]
    fn validation_catches_impossible_runs() {
        let bad = |args: &[&str], msg: &str| {
            let e = bench_args(args)
                .unwrap()
                .validate()
                .unwrap_err()
                .to_string();
            assert!(e.contains(msg), "{args:?}: {e}");
        };
        bad(&["--num", "0"], "--num");
        bad(&["--threads", "0"], "--threads");
        bad(&["--batch-size", "0"], "--batch-size");
        bad(&["--key-size", "1", "--num", "300"], "does not fit");
        bad(&["--use-existing-db"], "needs --db");
        bad(&["--rounds", "0"], "--rounds");
        bad(&["--engine", "strata,strata"], "twice");
        bad(
            &["--benchmarks", "ycsb-load", "--key-size", "4"],
            "--key-size 8",
        );
        if !cfg!(feature = "rocksdb") {
            bad(&["--engine", "rocksdb"], "built without RocksDB");
        }
    }
}
