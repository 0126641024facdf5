//! `strata bench`: db_bench-style and YCSB benchmarks, on Strata and its peers.
//!
//! Semantics follow RocksDB's db_bench so numbers can be set side by side:
//! * `--num` is the key space `[0, num)`. Writing benchmarks do `num` operations per thread
//!   (fillseq splits `[0, num)` between threads, in order within each thread; fillrandom,
//!   overwrite and deleterandom pick uniformly from the whole key space in every thread).
//! * Reading benchmarks do `--reads` operations per thread (default `num`); `--writes`
//!   changes the writes per thread of fillrandom, overwrite and deleterandom.
//! * `--duration SECS` bounds the random benchmarks by time instead of operations.
//! * fillseq, fillrandom and ycsb-load start from an empty database (the directory is wiped
//!   and the database reopened when an earlier benchmark of the run wrote to it); they are
//!   skipped with `--use-existing-db`.
//! * micros/op is the threads' busy time divided by the operations; ops/sec and MB/s use the
//!   wall time from the first thread's start to the last thread's end.
//!
//! `--engine strata,rocksdb,fjall --rounds N` runs the whole benchmark list on each engine
//! in turn (A B C A B C ...), each in its own fresh directory, then prints medians.
//!
//! Keys and values: see [`keys`]; YCSB: see [`ycsb`] and [`dist`].

mod dist;
mod engine;
mod env;
mod fjall_engine;
mod keys;
mod latency_plot;
mod plot;
mod report;
#[cfg(feature = "rocksdb")]
mod rocks_engine;
mod runner;
mod sharded_engine;
#[cfg(test)]
mod smoke_tests;
mod sysstat;
mod timeline;
mod ycsb;

use crate::opts::{parse_opt, OPT_HELP};
use crate::store::{inspect, require_bench_db, Found, Kind};
use crate::text::human_bytes;
use anyhow::{bail, Context, Result};
use clap::Args;
use dist::RequestDist;
use engine::{Compression, Engine, EngineConfig, Strata};
use fjall_engine::Fjall;
use keys::KeyGen;
use report::{summarize, summary_table, Record, SummaryRow};
use runner::Runner;
use sharded_engine::Sharded;
use std::path::{Path, PathBuf};

const BENCHMARKS_HELP: &str = "Comma-separated benchmarks, run in order:
  fillseq            write num keys in increasing order (fresh database)
  fillrandom         write num random keys per thread (fresh database)
  overwrite          write num random keys per thread into the existing data
  readrandom         look up reads random keys per thread (reports found/total)
  readmissing        look up reads keys that do not exist
  multireadrandom    look up reads random keys per thread, --batch-size per MultiGet
  seekrandom         reads seeks to random keys, each followed by --seek-nexts nexts
  readseq            iterate forward over up to reads entries per thread
  readreverse        iterate backward over up to reads entries per thread
  readwhilewriting   readrandom on --threads threads while one more thread writes
                     random keys until they finish (the result line counts the reads)
  deleterandom       delete num random keys per thread
  compact            compact the whole key range (one operation)
  flush              flush the memtable (one operation)
  waitforcompaction  wait until no flush or compaction is pending
  stats              print the engine's statistics at this point
YCSB (records are YCSB's hashed keys, not db_bench's; run ycsb-load first):
  ycsb-load          insert records 0..num split between threads (fresh database)
  ycsb-a             reads ops per thread: 50% read, 50% update, zipfian
  ycsb-b             95% read, 5% update, zipfian
  ycsb-c             100% read, zipfian
  ycsb-d             95% read, 5% insert, latest
  ycsb-e             95% scan (1-100 records, uniform), 5% insert, zipfian
  ycsb-f             50% read, 50% read-modify-write, zipfian";

/// Every benchmark `--benchmarks` accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Benchmark {
    FillSeq,
    FillRandom,
    Overwrite,
    ReadRandom,
    ReadMissing,
    MultiReadRandom,
    SeekRandom,
    ReadSeq,
    ReadReverse,
    ReadWhileWriting,
    DeleteRandom,
    Compact,
    Flush,
    WaitForCompaction,
    Stats,
    YcsbLoad,
    YcsbA,
    YcsbB,
    YcsbC,
    YcsbD,
    YcsbE,
    YcsbF,
}

const ALL: [(&str, Benchmark); 22] = [
    ("fillseq", Benchmark::FillSeq),
    ("fillrandom", Benchmark::FillRandom),
    ("overwrite", Benchmark::Overwrite),
    ("readrandom", Benchmark::ReadRandom),
    ("readmissing", Benchmark::ReadMissing),
    ("multireadrandom", Benchmark::MultiReadRandom),
    ("seekrandom", Benchmark::SeekRandom),
    ("readseq", Benchmark::ReadSeq),
    ("readreverse", Benchmark::ReadReverse),
    ("readwhilewriting", Benchmark::ReadWhileWriting),
    ("deleterandom", Benchmark::DeleteRandom),
    ("compact", Benchmark::Compact),
    ("flush", Benchmark::Flush),
    ("waitforcompaction", Benchmark::WaitForCompaction),
    ("stats", Benchmark::Stats),
    ("ycsb-load", Benchmark::YcsbLoad),
    ("ycsb-a", Benchmark::YcsbA),
    ("ycsb-b", Benchmark::YcsbB),
    ("ycsb-c", Benchmark::YcsbC),
    ("ycsb-d", Benchmark::YcsbD),
    ("ycsb-e", Benchmark::YcsbE),
    ("ycsb-f", Benchmark::YcsbF),
];

impl Benchmark {
    pub fn name(self) -> &'static str {
        ALL.iter()
            .find(|(_, b)| *b == self)
            .map(|(n, _)| *n)
            .unwrap()
    }

    /// Starts from an empty database, like db_bench's fresh_db benchmarks.
    fn fresh_db(self) -> bool {
        matches!(
            self,
            Benchmark::FillSeq | Benchmark::FillRandom | Benchmark::YcsbLoad
        )
    }

    /// Changes the data (so a later fresh benchmark must wipe it).
    fn writes(self) -> bool {
        matches!(
            self,
            Benchmark::FillSeq
                | Benchmark::FillRandom
                | Benchmark::Overwrite
                | Benchmark::DeleteRandom
                | Benchmark::ReadWhileWriting
                | Benchmark::YcsbLoad
                | Benchmark::YcsbA
                | Benchmark::YcsbB
                | Benchmark::YcsbD
                | Benchmark::YcsbE
                | Benchmark::YcsbF
        )
    }

    /// Reports how many lookups found their key.
    fn reports_found(self) -> bool {
        matches!(
            self,
            Benchmark::ReadRandom
                | Benchmark::ReadMissing
                | Benchmark::MultiReadRandom
                | Benchmark::SeekRandom
                | Benchmark::ReadWhileWriting
        )
    }

    /// Bounded by `--duration` when it is set (fills of a fixed key set and scans of the
    /// whole database are not).
    fn honours_duration(self) -> bool {
        !matches!(
            self,
            Benchmark::FillSeq | Benchmark::YcsbLoad | Benchmark::ReadSeq | Benchmark::ReadReverse
        )
    }

    /// One operation, timed (compact, flush, waitforcompaction).
    fn one_shot(self) -> bool {
        matches!(
            self,
            Benchmark::Compact | Benchmark::Flush | Benchmark::WaitForCompaction
        )
    }

    /// The YCSB workload letter ('a'..='f'); None for the other benchmarks.
    fn ycsb(self) -> Option<char> {
        match self {
            Benchmark::YcsbA => Some('a'),
            Benchmark::YcsbB => Some('b'),
            Benchmark::YcsbC => Some('c'),
            Benchmark::YcsbD => Some('d'),
            Benchmark::YcsbE => Some('e'),
            Benchmark::YcsbF => Some('f'),
            _ => None,
        }
    }
}

fn parse_benchmark(s: &str) -> Result<Benchmark, String> {
    let s = s.trim();
    ALL.iter()
        .find(|(n, _)| *n == s)
        .map(|(_, b)| *b)
        .ok_or_else(|| {
            let names: Vec<&str> = ALL.iter().map(|(n, _)| *n).collect();
            format!("unknown benchmark {s:?}; known: {}", names.join(", "))
        })
}

/// The stores `strata bench` can measure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EngineKind {
    Strata,
    Rocksdb,
    Fjall,
    /// The sharded front (crate `strata`) over Strata's engine.
    Sharded,
    /// The sharded front over RocksDB.
    ShardedRocksdb,
}

impl EngineKind {
    const ALL: [EngineKind; 5] = [
        EngineKind::Strata,
        EngineKind::Rocksdb,
        EngineKind::Fjall,
        EngineKind::Sharded,
        EngineKind::ShardedRocksdb,
    ];

    pub fn name(self) -> &'static str {
        match self {
            EngineKind::Strata => Strata::NAME,
            EngineKind::Rocksdb => "rocksdb",
            EngineKind::Fjall => Fjall::NAME,
            EngineKind::Sharded => "sharded",
            EngineKind::ShardedRocksdb => "sharded-rocksdb",
        }
    }

    /// Whether this binary can run it.
    fn available(self) -> bool {
        !matches!(self, EngineKind::Rocksdb | EngineKind::ShardedRocksdb)
            || cfg!(feature = "rocksdb")
    }
}

/// Why `--engine rocksdb` cannot run, and how to get a binary that can.
pub const NO_ROCKSDB: &str = "this strata binary was built without RocksDB. Install the \
system library (apt-get install -y librocksdb-dev libclang-dev) and rebuild with the \
feature: ROCKSDB_LIB_DIR=/usr/lib/x86_64-linux-gnu cargo build --release -p strata-cli \
--features rocksdb";

fn parse_engine(s: &str) -> Result<EngineKind, String> {
    let s = s.trim();
    EngineKind::ALL
        .into_iter()
        .find(|e| e.name() == s)
        .ok_or_else(|| {
            format!("unknown engine {s:?}; known: strata, rocksdb, fjall, sharded, sharded-rocksdb")
        })
}

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

const ENGINE_HELP: &str = "Comma-separated engines to run the benchmarks on, in turn: \
strata, fjall, rocksdb (rocksdb needs a binary built with --features rocksdb). With more \
than one, a summary table gives each engine's medians and its ratio to the first engine";

const BENCH_OPT_HELP: &str = "Engine option NAME=VALUE; repeatable. A bare NAME goes to the \
first engine of --engine; ENGINE.NAME (strata.NAME, rocksdb.NAME, fjall.NAME) to that \
engine. Strata: the names of Options::set (see `strata help put`). RocksDB: \
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
    fn reads(&self) -> u64 {
        self.reads.unwrap_or(self.num)
    }

    fn writes(&self) -> u64 {
        self.writes.unwrap_or(self.num)
    }

    fn validate(&self) -> Result<()> {
        if self.num == 0 {
            bail!("--num must be at least 1");
        }
        if self.threads == 0 || self.threads > 1024 {
            bail!("--threads must be between 1 and 1024");
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
    fn engine_opts(&self, kind: EngineKind) -> Vec<(String, String)> {
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

    fn engine_config(&self, kind: EngineKind) -> EngineConfig {
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
        }
    }

    /// Each benchmark's name in the results: its name, with "#2", "#3"... when the list
    /// holds it more than once.
    fn labels(&self) -> Vec<String> {
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

/// What the header says about one engine.
struct EngineInfo {
    kind: EngineKind,
    options: String,
    notes: Vec<String>,
}

fn describe(kind: EngineKind, cfg: &EngineConfig) -> Result<EngineInfo> {
    let (options, notes) = match kind {
        EngineKind::Strata => (Strata::describe(cfg)?, Strata::notes(cfg)),
        EngineKind::Fjall => (Fjall::describe(cfg)?, Fjall::notes(cfg)),
        #[cfg(feature = "rocksdb")]
        EngineKind::Rocksdb => (
            rocks_engine::Rocks::describe(cfg)?,
            rocks_engine::Rocks::notes(cfg),
        ),
        #[cfg(not(feature = "rocksdb"))]
        EngineKind::Rocksdb => bail!(NO_ROCKSDB),
        EngineKind::Sharded => (
            Sharded::<strata::StrataEngine>::describe(cfg)?,
            Sharded::<strata::StrataEngine>::notes(cfg),
        ),
        #[cfg(feature = "rocksdb")]
        EngineKind::ShardedRocksdb => (
            Sharded::<strata::rocks::RocksEngine>::describe(cfg)?,
            Sharded::<strata::rocks::RocksEngine>::notes(cfg),
        ),
        #[cfg(not(feature = "rocksdb"))]
        EngineKind::ShardedRocksdb => bail!(NO_ROCKSDB),
    };
    Ok(EngineInfo {
        kind,
        options,
        notes,
    })
}

fn run_engine(
    kind: EngineKind,
    args: &BenchArgs,
    cfg: EngineConfig,
    dir: &Path,
    round: usize,
    labels: &[String],
) -> Result<Vec<Record>> {
    match kind {
        EngineKind::Strata => Runner::<Strata>::run(args, cfg, dir, round, labels),
        EngineKind::Fjall => Runner::<Fjall>::run(args, cfg, dir, round, labels),
        #[cfg(feature = "rocksdb")]
        EngineKind::Rocksdb => Runner::<rocks_engine::Rocks>::run(args, cfg, dir, round, labels),
        #[cfg(not(feature = "rocksdb"))]
        EngineKind::Rocksdb => bail!(NO_ROCKSDB),
        EngineKind::Sharded => {
            Runner::<Sharded<strata::StrataEngine>>::run(args, cfg, dir, round, labels)
        }
        #[cfg(feature = "rocksdb")]
        EngineKind::ShardedRocksdb => {
            Runner::<Sharded<strata::rocks::RocksEngine>>::run(args, cfg, dir, round, labels)
        }
        #[cfg(not(feature = "rocksdb"))]
        EngineKind::ShardedRocksdb => bail!(NO_ROCKSDB),
    }
}

/// Runs `strata bench`.
pub fn run(args: BenchArgs) -> Result<()> {
    execute(&args).map(|_| ())
}

/// With --use-existing-db and one of Strata's engines alone, benchmarks the database in --db
/// through the API of its kind: `sharded` for a sharded database, `strata` for a single
/// engine instance, whichever of the two --engine named.
fn fit_existing_db(args: &BenchArgs) -> BenchArgs {
    let mut a = args.clone();
    if let (true, Some(d), [k @ (EngineKind::Strata | EngineKind::Sharded)]) =
        (a.use_existing_db, &a.db, a.engines.as_mut_slice())
    {
        match inspect(d) {
            Ok(Found::Db(Kind::Sharded)) => *k = EngineKind::Sharded,
            Ok(Found::Db(Kind::Engine)) => *k = EngineKind::Strata,
            _ => {}
        }
    }
    a
}

/// Everything a run measured (read by the tests; the command prints it).
#[cfg_attr(not(test), allow(dead_code))]
pub struct RunOutcome {
    pub records: Vec<Record>,
    pub summary: Vec<SummaryRow>,
}

fn execute(args: &BenchArgs) -> Result<RunOutcome> {
    let args = &fit_existing_db(args);
    args.validate()?;
    let infos = args
        .engines
        .iter()
        .map(|&k| describe(k, &args.engine_config(k)))
        .collect::<Result<Vec<_>>>()?;
    let several = args.engines.len() > 1;
    let engine_dir = |root: &Path, k: EngineKind| {
        if several {
            root.join(k.name())
        } else {
            root.to_path_buf()
        }
    };

    let (root, temp) = match &args.db {
        Some(d) if args.use_existing_db => {
            for &k in &args.engines {
                let want = match k {
                    EngineKind::Strata => Some(Kind::Engine),
                    EngineKind::Sharded => Some(Kind::Sharded),
                    _ => None,
                };
                require_bench_db(&engine_dir(d, k), want, k.name())?;
            }
            (d.clone(), None)
        }
        Some(d) => {
            require_new_or_empty(d)?;
            std::fs::create_dir_all(d)
                .with_context(|| format!("cannot create directory {}", d.display()))?;
            (d.clone(), None)
        }
        None => {
            let t = tempfile::Builder::new()
                .prefix("strata-bench-")
                .tempdir()
                .context("cannot create a temporary directory for the database")?;
            (t.path().to_path_buf(), Some(t))
        }
    };

    if env::is_debug_build() {
        eprintln!("{}", env::DEBUG_WARNING);
    }
    print!("{}", header(args, &infos, &root, temp.is_some()));
    if !args.use_existing_db {
        let mut loaded = false;
        for b in &args.benchmarks {
            loaded |= *b == Benchmark::YcsbLoad;
            if b.ycsb().is_some() && !loaded {
                println!(
                    "Note:       {} runs before any ycsb-load: its reads find nothing \
                     (YCSB records are not db_bench's keys)",
                    b.name()
                );
                break;
            }
        }
    }

    let base_labels = args.labels();
    // With several --rate values every benchmark runs once per rate, labelled NAME@RATE.
    let multi_rate = args.rate.len() > 1;
    let rate_labels = |rate: u64| -> Vec<String> {
        if multi_rate {
            base_labels.iter().map(|l| format!("{l}@{rate}")).collect()
        } else {
            base_labels.clone()
        }
    };
    let mut records = Vec::new();
    let result = (|| -> Result<()> {
        for &rate in &args.rate {
            let mut a = args.clone();
            a.rate = vec![rate];
            let labels = rate_labels(rate);
            for round in 1..=args.rounds {
                for &k in &args.engines {
                    let dir = engine_dir(&root, k);
                    if !args.use_existing_db {
                        // Every round starts from an empty directory: ours since the start.
                        if dir.exists() {
                            std::fs::remove_dir_all(&dir)
                                .with_context(|| format!("cannot empty {}", dir.display()))?;
                        }
                        std::fs::create_dir_all(&dir)
                            .with_context(|| format!("cannot create {}", dir.display()))?;
                    }
                    if several || args.rounds > 1 || multi_rate {
                        println!();
                        let at = if multi_rate {
                            format!(", offered {rate} ops/s")
                        } else {
                            String::new()
                        };
                        println!("=== {} (round {round}/{}{at}) ===", k.name(), args.rounds);
                    }
                    let recs = run_engine(k, &a, a.engine_config(k), &dir, round, &labels)?;
                    records.extend(recs);
                    if temp.is_some() && !args.keep && several {
                        // Free the space before the next engine writes its data.
                        let _ = std::fs::remove_dir_all(&dir);
                    }
                }
            }
        }
        Ok(())
    })();
    let labels: Vec<String> = args.rate.iter().flat_map(|&r| rate_labels(r)).collect();
    let benchmarks: Vec<Benchmark> = args
        .rate
        .iter()
        .flat_map(|_| args.benchmarks.iter().copied())
        .collect();

    if let Some(t) = temp {
        if args.keep {
            println!("Database kept at {}", t.keep().display());
        } else if let Err(e) = t.close() {
            eprintln!(
                "warning: cannot remove temporary directory {}: {e}",
                root.display()
            );
        }
    }
    result?;

    let names: Vec<&str> = args.engines.iter().map(|e| e.name()).collect();
    // One-shot benchmarks (compact, flush, waitforcompaction) have no rate worth a median:
    // their lines above give their time.
    let one_shot: Vec<&String> = labels
        .iter()
        .zip(&benchmarks)
        .filter(|(_, b)| b.one_shot())
        .map(|(l, _)| l)
        .collect();
    let rated: Vec<Record> = records
        .iter()
        .filter(|r| !one_shot.contains(&&r.benchmark))
        .cloned()
        .collect();
    let summary = summarize(&rated, &names);
    if several || args.rounds > 1 || multi_rate {
        println!();
        println!(
            "** Summary: medians over {} round(s); min–max of ops/s; ratio of ops/s to {} **",
            args.rounds, names[0]
        );
        print!("{}", summary_table(&summary, names[0]));
    }
    if let Some(path) = &args.json {
        write_json(path, args, &infos, &records, &summary)?;
        println!("JSON written to {}", path.display());
    }
    if let Some(path) = &args.latency_plot {
        let curves = latency_curves(args, &base_labels, &summary);
        let title = format!(
            "{} latency vs offered load:",
            base_labels.first().map(String::as_str).unwrap_or("")
        );
        latency_plot::draw(path, &title, &curves)?;
        println!("Latency plot written to {}", path.display());
    }
    if let Some(path) = &args.plot {
        let panels = plot_panels(&records, &summary);
        plot::draw(path, &names, &panels)?;
        println!("Plot written to {}", path.display());
    }
    Ok(RunOutcome { records, summary })
}

/// For the first rated benchmark, each engine's median p50 and p99 at each offered rate.
fn latency_curves(
    args: &BenchArgs,
    labels: &[String],
    summary: &[SummaryRow],
) -> Vec<latency_plot::Curve> {
    let Some(first) = labels
        .iter()
        .zip(&args.benchmarks)
        .find(|(_, b)| !b.one_shot())
        .map(|(l, _)| l)
    else {
        return Vec::new();
    };
    args.engines
        .iter()
        .map(|e| {
            let points = args
                .rate
                .iter()
                .filter_map(|&rate| {
                    let label = if args.rate.len() > 1 {
                        format!("{first}@{rate}")
                    } else {
                        first.clone()
                    };
                    let row = summary
                        .iter()
                        .find(|r| r.benchmark == label && r.engine == e.name())?;
                    let x = if rate > 0 {
                        rate as f64
                    } else {
                        row.ops_per_sec
                    };
                    Some((x, row.p50_us?, row.p99_us?))
                })
                .collect();
            latency_plot::Curve {
                engine: e.name().to_string(),
                points,
            }
        })
        .collect()
}

/// For each threaded benchmark, each engine's throughput in its median round.
fn plot_panels(records: &[Record], summary: &[SummaryRow]) -> Vec<plot::Panel> {
    let mut panels: Vec<plot::Panel> = Vec::new();
    for row in summary {
        let Some(r) = records.iter().find(|r| {
            r.benchmark == row.benchmark && r.engine == row.engine && r.round == row.median_round
        }) else {
            continue;
        };
        if r.timeline.ops_per_sec.is_empty() {
            continue;
        }
        let series = (r.engine.clone(), r.timeline.clone());
        match panels.iter_mut().find(|p| p.title == row.benchmark) {
            Some(p) => p.series.push(series),
            None => panels.push(plot::Panel {
                title: row.benchmark.clone(),
                series: vec![series],
            }),
        }
    }
    panels
}

fn write_json(
    path: &Path,
    args: &BenchArgs,
    infos: &[EngineInfo],
    records: &[Record],
    summary: &[SummaryRow],
) -> Result<()> {
    let doc = serde_json::json!({
        "tool": "strata bench",
        "version": env!("CARGO_PKG_VERSION"),
        "commit": env::git_commit(),
        // The program by its file name only: a recorded run must not name this machine's paths.
        "command_line": std::env::args()
            .enumerate()
            .map(|(i, a)| if i == 0 {
                std::path::Path::new(&a)
                    .file_name()
                    .map_or(a.clone(), |n| n.to_string_lossy().into_owned())
            } else {
                a
            })
            .collect::<Vec<_>>(),
        "environment": {
            "build": if env::is_debug_build() { "debug" } else { "release" },
            "warning": env::is_debug_build().then_some(
                "built without optimizations: the figures are meaningless"),
            "cores": env::cores(),
            "cpu": env::cpu_model(),
            "memory_bytes": env::memory_total(),
            "kernel": env::kernel(),
        },
        "args": {
            "benchmarks": args.benchmarks.iter().map(|b| b.name()).collect::<Vec<_>>(),
            "engines": args.engines.iter().map(|e| e.name()).collect::<Vec<_>>(),
            "rounds": args.rounds,
            "num": args.num,
            "reads": args.reads(),
            "writes": args.writes(),
            "duration": args.duration,
            "key_size": args.key_size,
            "value_size": args.value_size,
            "threads": args.threads,
            "batch_size": args.batch_size,
            "seek_nexts": args.seek_nexts,
            "sync": args.sync,
            "disable_wal": args.disable_wal,
            "direct_io": args.direct_io,
            "cache_bytes": args.cache_bytes,
            "bloom_bits": args.bloom_bits,
            "compression": args.compression.name(),
            "seed": args.seed,
            "use_existing_db": args.use_existing_db,
            "ycsb_distribution": args.ycsb_distribution.map(|d| d.name()),
            "opts": args.opts.iter().map(|(n, v)| format!("{n}={v}")).collect::<Vec<_>>(),
        },
        "engines": infos.iter().map(|i| serde_json::json!({
            "name": i.kind.name(),
            "options": i.options,
            "notes": i.notes,
        })).collect::<Vec<_>>(),
        "runs": records,
        "summary": summary,
    });
    let text = serde_json::to_string_pretty(&doc).context("cannot encode the results")?;
    std::fs::write(path, text + "\n").with_context(|| format!("cannot write {}", path.display()))
}

/// A user-named directory for a new benchmark database must not hold anything: fresh
/// benchmarks wipe the directory, which is only safe when everything in it is ours.
fn require_new_or_empty(dir: &Path) -> Result<()> {
    match std::fs::read_dir(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e).with_context(|| format!("cannot use {} as --db", dir.display())),
        Ok(mut entries) => {
            if entries.next().is_some() {
                bail!(
                    "{} is not empty: pass --use-existing-db to benchmark the database in it, \
                     or name a new or empty directory (fresh benchmarks delete what is there)",
                    dir.display()
                );
            }
            Ok(())
        }
    }
}

/// The environment header printed before the results.
fn header(args: &BenchArgs, infos: &[EngineInfo], dir: &Path, temp: bool) -> String {
    let mut h = String::new();
    let mut line = |k: &str, v: String| h.push_str(&format!("{k:<12}{v}\n"));
    line(
        "Strata:",
        format!(
            "version {} (commit {})",
            env!("CARGO_PKG_VERSION"),
            env::git_commit()
        ),
    );
    let names: Vec<&str> = infos.iter().map(|i| i.kind.name()).collect();
    line("Engine:", names.join(", "));
    line(
        "Build:",
        if env::is_debug_build() {
            "debug (UNOPTIMIZED)".to_string()
        } else {
            "release".to_string()
        },
    );
    let cpu = env::cpu_model().unwrap_or_else(|| "unknown model".to_string());
    line("CPU:", format!("{} cores, {cpu}", env::cores()));
    line(
        "Memory:",
        env::memory_total().map_or("unknown".to_string(), human_bytes),
    );
    line(
        "Kernel:",
        env::kernel().unwrap_or_else(|| "unknown".to_string()),
    );
    line(
        "Keys:",
        format!(
            "{} bytes each (8-byte big-endian index, padded with '0')",
            args.key_size
        ),
    );
    line(
        "Values:",
        format!("{} bytes each (random, incompressible)", args.value_size),
    );
    line(
        "Entries:",
        match args.writes {
            Some(w) => format!("{} (writes per thread: {w})", args.num),
            None => args.num.to_string(),
        },
    );
    line("Reads:", args.reads().to_string());
    line("Threads:", args.threads.to_string());
    if args.asynchronous {
        line(
            "Async:",
            format!(
                "puts through the asynchronous API of the sharded engines, up to {} in flight per thread; other engines write synchronously",
                args.async_depth
            ),
        );
    }
    if args.rate.iter().any(|&r| r > 0) {
        let rates: Vec<String> = args.rate.iter().map(|r| r.to_string()).collect();
        line(
            "Rate:",
            format!(
                "offered {} ops/s over all threads; latency counts from each operation's scheduled start",
                rates.join(", ")
            ),
        );
    }
    if args.duration > 0 {
        line(
            "Duration:",
            format!("{} s per random benchmark", args.duration),
        );
    }
    line(
        "RawSize:",
        format!(
            "{} (estimated)",
            human_bytes(args.num * (args.key_size + args.value_size) as u64)
        ),
    );
    let what = if temp && args.keep {
        " (temporary, kept: --keep)"
    } else if temp {
        " (temporary, removed at the end)"
    } else if args.use_existing_db {
        " (existing database)"
    } else {
        ""
    };
    let per_engine = if infos.len() > 1 {
        ", one directory per engine"
    } else {
        ""
    };
    line("Database:", format!("{}{what}{per_engine}", dir.display()));
    line(
        "Writes:",
        format!("sync={} disable_wal={}", args.sync, args.disable_wal),
    );
    line(
        "Tables:",
        format!(
            "cache={} bloom_bits={} compression={} direct_io={}",
            human_bytes(args.cache_bytes),
            args.bloom_bits,
            args.compression.name(),
            args.direct_io
        ),
    );
    if args.rounds > 1 {
        line(
            "Rounds:",
            format!("{} (engines alternate, medians reported)", args.rounds),
        );
    }
    for info in infos {
        let key = if infos.len() == 1 {
            "Options:".to_string()
        } else {
            format!("{}:", info.kind.name())
        };
        line(&key, info.options.clone());
        for n in &info.notes {
            line("Note:", format!("{}: {n}", info.kind.name()));
        }
    }
    if !args.opts.is_empty() {
        let set: Vec<String> = args.opts.iter().map(|(n, v)| format!("{n}={v}")).collect();
        line("Overrides:", set.join(" "));
    }
    if env::is_debug_build() {
        h.push_str(env::DEBUG_WARNING);
        h.push('\n');
    }
    h.push_str(&"-".repeat(48));
    h.push('\n');
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Cli, Command};
    use clap::Parser;

    fn bench_args(args: &[&str]) -> Result<BenchArgs, clap::Error> {
        let cli = Cli::try_parse_from(["strata", "bench"].iter().chain(args.iter()).copied())?;
        match cli.command {
            Command::Bench(b) => Ok(*b),
            _ => unreachable!(),
        }
    }

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

    #[test]
    fn fresh_and_writing_benchmarks() {
        assert!(Benchmark::FillSeq.fresh_db() && Benchmark::FillRandom.fresh_db());
        assert!(!Benchmark::Overwrite.fresh_db());
        assert!(Benchmark::Overwrite.writes() && Benchmark::DeleteRandom.writes());
        assert!(!Benchmark::ReadRandom.writes());
        assert!(Benchmark::ReadMissing.reports_found());
        assert!(!Benchmark::ReadSeq.reports_found());
        assert!(Benchmark::YcsbLoad.fresh_db() && Benchmark::YcsbLoad.writes());
        assert!(!Benchmark::YcsbC.writes() && Benchmark::YcsbE.writes());
        assert!(Benchmark::ReadWhileWriting.writes());
        assert!(!Benchmark::FillSeq.honours_duration() && Benchmark::YcsbA.honours_duration());
        assert_eq!(Benchmark::YcsbD.ycsb(), Some('d'));
        assert_eq!(Benchmark::YcsbLoad.ycsb(), None);
    }

    #[test]
    fn header_describes_the_run() {
        let a = bench_args(&["--num", "1000", "--opt", "filter=false"]).unwrap();
        let infos =
            vec![describe(EngineKind::Strata, &a.engine_config(EngineKind::Strata)).unwrap()];
        let h = header(&a, &infos, Path::new("/tmp/x"), true);
        for want in [
            "Strata:     version ",
            "Engine:     strata\n",
            "CPU:        ",
            "Memory:     ",
            "Kernel:     ",
            "Keys:       16 bytes each",
            "Values:     128 bytes each",
            "Entries:    1000\n",
            "Database:   /tmp/x (temporary, removed at the end)\n",
            "Overrides:  filter=false\n",
            "Options:    write_buffer_bytes=",
            "filter=false",
            "Tables:     cache=8.0 MiB bloom_bits=10 compression=none direct_io=false\n",
        ] {
            assert!(h.contains(want), "missing {want:?} in\n{h}");
        }
        assert_eq!(h.contains("WARNING"), cfg!(debug_assertions));

        let a = bench_args(&["--engine", "strata,fjall", "--direct-io", "--rounds", "2"]).unwrap();
        let infos: Vec<EngineInfo> = a
            .engines
            .iter()
            .map(|&k| describe(k, &a.engine_config(k)).unwrap())
            .collect();
        let h = header(&a, &infos, Path::new("/tmp/x"), false);
        for want in [
            "Engine:     strata, fjall\n",
            "strata:     write_buffer_bytes=",
            "fjall:      cache_size=8.0 MiB",
            "Note:       fjall: fjall has no direct I/O; --direct-io ignored\n",
            "Rounds:     2 (engines alternate",
            "one directory per engine",
        ] {
            assert!(h.contains(want), "missing {want:?} in\n{h}");
        }
    }

    #[test]
    fn a_user_directory_must_be_new_or_empty() {
        let tmp = tempfile::tempdir().unwrap();
        assert!(require_new_or_empty(&tmp.path().join("new")).is_ok());
        assert!(require_new_or_empty(tmp.path()).is_ok());
        std::fs::write(tmp.path().join("precious"), b"x").unwrap();
        let e = require_new_or_empty(tmp.path()).unwrap_err().to_string();
        assert!(e.contains("is not empty"), "{e}");
    }
}
