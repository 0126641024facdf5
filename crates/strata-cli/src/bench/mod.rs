//! `strata bench`: db_bench-style benchmarks.
//!
//! Semantics follow RocksDB's db_bench so numbers can be set side by side:
//! * `--num` is the key space `[0, num)`. Writing benchmarks do `num` operations per thread
//!   (fillseq splits `[0, num)` between threads, in order within each thread; fillrandom,
//!   overwrite and deleterandom pick uniformly from the whole key space in every thread).
//! * Reading benchmarks do `--reads` operations per thread (default `num`).
//! * fillseq and fillrandom start from an empty database (the directory is wiped and the
//!   database reopened when an earlier benchmark of the run wrote to it); they are skipped
//!   with `--use-existing-db`.
//! * micros/op is the threads' busy time divided by the operations; ops/sec and MB/s use the
//!   wall time from the first thread's start to the last thread's end.
//!
//! Keys and values: see [`keys`].

mod engine;
mod env;
mod keys;
mod report;

use crate::commands::require_existing_db;
use crate::opts::{parse_opt, OPT_HELP};
use crate::text::{human_bytes, to_hex};
use anyhow::{bail, Context, Result};
use clap::Args;
use engine::{Engine, EngineConfig, EngineIter, Strata};
use keys::{thread_range, KeyGen, Rng, ValueGen};
use report::{latency_line, result_line, Merged, ThreadStats};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Barrier;
use std::time::Instant;

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
  deleterandom       delete num random keys per thread
  compact            compact the whole key range (one operation)
  flush              flush the memtable (one operation)
  waitforcompaction  wait until no flush or compaction is pending
  stats              print the engine's statistics at this point";

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
    DeleteRandom,
    Compact,
    Flush,
    WaitForCompaction,
    Stats,
}

const ALL: [(&str, Benchmark); 14] = [
    ("fillseq", Benchmark::FillSeq),
    ("fillrandom", Benchmark::FillRandom),
    ("overwrite", Benchmark::Overwrite),
    ("readrandom", Benchmark::ReadRandom),
    ("readmissing", Benchmark::ReadMissing),
    ("multireadrandom", Benchmark::MultiReadRandom),
    ("seekrandom", Benchmark::SeekRandom),
    ("readseq", Benchmark::ReadSeq),
    ("readreverse", Benchmark::ReadReverse),
    ("deleterandom", Benchmark::DeleteRandom),
    ("compact", Benchmark::Compact),
    ("flush", Benchmark::Flush),
    ("waitforcompaction", Benchmark::WaitForCompaction),
    ("stats", Benchmark::Stats),
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
        matches!(self, Benchmark::FillSeq | Benchmark::FillRandom)
    }

    /// Changes the data (so a later fresh benchmark must wipe it).
    fn writes(self) -> bool {
        matches!(
            self,
            Benchmark::FillSeq
                | Benchmark::FillRandom
                | Benchmark::Overwrite
                | Benchmark::DeleteRandom
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
        )
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
    /// Size of the key space, and writes per thread for fill*, overwrite and deleterandom.
    #[arg(long, value_name = "N", default_value_t = 200_000)]
    pub num: u64,
    /// Operations per thread of the reading benchmarks [default: --num].
    #[arg(long, value_name = "N")]
    pub reads: Option<u64>,
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
    /// --keep]. Without --use-existing-db it must be new or empty.
    #[arg(long, value_name = "DIR")]
    pub db: Option<PathBuf>,
    /// Keep the temporary database directory and print where it is.
    #[arg(long)]
    pub keep: bool,
    /// Benchmark the database already in --db DIR (fillseq and fillrandom are skipped).
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
    #[arg(long = "opt", value_name = "NAME=VALUE", value_parser = parse_opt, help = OPT_HELP)]
    pub opts: Vec<(String, String)>,
    /// seekrandom: entries read with next() after each seek.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub seek_nexts: u64,
    /// multireadrandom: keys per MultiGet call.
    #[arg(long, value_name = "N", default_value_t = 32)]
    pub batch_size: usize,
}

impl BenchArgs {
    fn reads(&self) -> u64 {
        self.reads.unwrap_or(self.num)
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
        if self.key_size > strata_engine::batch::MAX_KEY_LEN {
            bail!(
                "--key-size must be at most {} bytes",
                strata_engine::batch::MAX_KEY_LEN
            );
        }
        KeyGen::check(self.key_size, self.num).map_err(anyhow::Error::msg)?;
        if self.use_existing_db && self.db.is_none() {
            bail!("--use-existing-db needs --db DIR");
        }
        Ok(())
    }

    fn engine_config(&self) -> EngineConfig {
        EngineConfig {
            opts: self.opts.clone(),
            sync: self.sync,
            disable_wal: self.disable_wal,
            create_if_missing: !self.use_existing_db,
        }
    }
}

/// Runs `strata bench` on Strata.
pub fn run(args: BenchArgs) -> Result<()> {
    run_on::<Strata>(args)
}

fn run_on<E: Engine>(args: BenchArgs) -> Result<()> {
    args.validate()?;
    let cfg = args.engine_config();
    let options = E::describe(&cfg)?;

    let (dir, temp) = match &args.db {
        Some(d) if args.use_existing_db => {
            require_existing_db(d)?;
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
    print!("{}", header::<E>(&args, &dir, temp.is_some(), &options));

    let result = run_benchmarks::<E>(&args, cfg, &dir);

    if let Some(t) = temp {
        if args.keep {
            println!("Database kept at {}", t.keep().display());
        } else if let Err(e) = t.close() {
            eprintln!(
                "warning: cannot remove temporary directory {}: {e}",
                dir.display()
            );
        }
    }
    result
}

fn run_benchmarks<E: Engine>(args: &BenchArgs, cfg: EngineConfig, dir: &Path) -> Result<()> {
    let engine = E::open(dir, &cfg)?;
    let mut r = Runner {
        args,
        cfg,
        dir,
        engine: Some(engine),
        dirty: args.use_existing_db,
        keys: KeyGen::new(args.key_size),
    };
    for (i, &b) in args.benchmarks.iter().enumerate() {
        r.run_one(i, b)
            .with_context(|| format!("benchmark {} failed", b.name()))?;
    }
    let engine = r.engine.take().expect("engine is open between benchmarks");
    println!();
    println!("** Engine statistics ({}) **", E::NAME);
    println!("{}", engine.stats());
    engine
        .close()
        .with_context(|| format!("cannot close database at {} cleanly", dir.display()))
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
fn header<E: Engine>(args: &BenchArgs, dir: &Path, temp: bool, options: &str) -> String {
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
    line("Engine:", E::NAME.to_string());
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
    line("Entries:", args.num.to_string());
    line("Reads:", args.reads().to_string());
    line("Threads:", args.threads.to_string());
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
    line("Database:", format!("{}{what}", dir.display()));
    line(
        "Writes:",
        format!("sync={} disable_wal={}", args.sync, args.disable_wal),
    );
    line("Options:", options.to_string());
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

/// One thread's tools while it runs a benchmark.
struct Worker<'a> {
    thread: usize,
    rng: Rng,
    values: ValueGen,
    keys: KeyGen,
    stats: ThreadStats,
    stop: &'a AtomicBool,
}

impl Worker<'_> {
    /// True once another thread failed: stop early.
    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }
}

/// What each thread of a benchmark runs.
type Work<E> = Box<dyn Fn(&E, &mut Worker<'_>) -> Result<()> + Sync>;

struct Runner<'a, E: Engine> {
    args: &'a BenchArgs,
    cfg: EngineConfig,
    dir: &'a Path,
    engine: Option<E>,
    /// Something was written since the database was (re)created.
    dirty: bool,
    keys: KeyGen,
}

impl<E: Engine> Runner<'_, E> {
    fn engine(&self) -> &E {
        self.engine
            .as_ref()
            .expect("engine is open between benchmarks")
    }

    /// Closes the database, empties its directory and opens a new one there.
    fn reopen_fresh(&mut self) -> Result<()> {
        if let Some(e) = self.engine.take() {
            e.close().context("cannot close the database")?;
        }
        std::fs::remove_dir_all(self.dir)
            .with_context(|| format!("cannot remove {}", self.dir.display()))?;
        std::fs::create_dir_all(self.dir)
            .with_context(|| format!("cannot create {}", self.dir.display()))?;
        self.engine = Some(E::open(self.dir, &self.cfg)?);
        self.dirty = false;
        Ok(())
    }

    fn run_one(&mut self, index: usize, b: Benchmark) -> Result<()> {
        let name = b.name();
        if b.fresh_db() {
            if self.args.use_existing_db {
                println!("{name:<12} : skipped (--use-existing-db is set)");
                return Ok(());
            }
            if self.dirty {
                self.reopen_fresh()?;
            }
        }
        if b.writes() {
            self.dirty = true;
        }
        let merged = match b {
            Benchmark::Stats => {
                println!("{name:<12} :");
                println!("{}", self.engine().stats());
                return Ok(());
            }
            Benchmark::Compact => self.single(|e| e.compact())?,
            Benchmark::Flush => self.single(|e| e.flush())?,
            Benchmark::WaitForCompaction => self.single(|e| e.wait_idle())?,
            _ => self.parallel(index, self.workload(b))?,
        };
        let found = b.reports_found().then_some(merged.found);
        println!(
            "{}",
            result_line(
                name,
                merged.done,
                merged.thread_time,
                merged.wall,
                merged.bytes,
                found
            )
        );
        if !merged.hist.is_empty() {
            let unit = if b == Benchmark::MultiReadRandom {
                format!("batch of {}", self.args.batch_size)
            } else {
                "op".to_string()
            };
            println!("{}", latency_line(&merged.hist, &unit));
        }
        Ok(())
    }

    /// A one-shot operation (compact, flush, ...), timed as one op.
    fn single(&self, op: impl FnOnce(&E) -> Result<()>) -> Result<Merged> {
        let mut st = ThreadStats::new();
        st.start();
        let t0 = Instant::now();
        op(self.engine())?;
        st.record(t0, 1, 0);
        st.stop();
        Ok(Merged::merge(vec![st]))
    }

    /// The per-thread loop of a benchmark.
    fn workload(&self, b: Benchmark) -> Work<E> {
        let num = self.args.num;
        let reads = self.args.reads();
        let threads = self.args.threads;
        let seek_nexts = self.args.seek_nexts;
        let batch = self.args.batch_size;
        match b {
            Benchmark::FillSeq => Box::new(move |e, w| {
                let mut key = w.keys.buffer();
                for i in thread_range(num, threads, w.thread) {
                    if w.stopped() {
                        break;
                    }
                    w.keys.fill(i, &mut key);
                    put_one(e, w, &key)?;
                }
                Ok(())
            }),
            Benchmark::FillRandom | Benchmark::Overwrite => Box::new(move |e, w| {
                let mut key = w.keys.buffer();
                for _ in 0..num {
                    if w.stopped() {
                        break;
                    }
                    w.keys.fill(w.rng.below(num), &mut key);
                    put_one(e, w, &key)?;
                }
                Ok(())
            }),
            Benchmark::DeleteRandom => Box::new(move |e, w| {
                let mut key = w.keys.buffer();
                for _ in 0..num {
                    if w.stopped() {
                        break;
                    }
                    w.keys.fill(w.rng.below(num), &mut key);
                    let t0 = Instant::now();
                    e.delete(&key)
                        .with_context(|| format!("delete of key {} failed", to_hex(&key)))?;
                    w.stats.record(t0, 1, 0);
                }
                Ok(())
            }),
            Benchmark::ReadRandom | Benchmark::ReadMissing => {
                let missing = b == Benchmark::ReadMissing;
                Box::new(move |e, w| {
                    let ks = w.keys.key_size();
                    let mut key = if missing {
                        w.keys.missing_key_buffer()
                    } else {
                        w.keys.buffer()
                    };
                    for _ in 0..reads {
                        if w.stopped() {
                            break;
                        }
                        w.keys.fill(w.rng.below(num), &mut key[..ks]);
                        let t0 = Instant::now();
                        let v = e
                            .get(&key)
                            .with_context(|| format!("get of key {} failed", to_hex(&key)))?;
                        let bytes = match v {
                            Some(v) => {
                                w.stats.found += 1;
                                (key.len() + v.len()) as u64
                            }
                            None => 0,
                        };
                        w.stats.record(t0, 1, bytes);
                    }
                    Ok(())
                })
            }
            Benchmark::MultiReadRandom => Box::new(move |e, w| {
                let mut keys: Vec<Vec<u8>> = (0..batch).map(|_| w.keys.buffer()).collect();
                let mut left = reads;
                while left > 0 && !w.stopped() {
                    let n = (batch as u64).min(left) as usize;
                    for k in &mut keys[..n] {
                        w.keys.fill(w.rng.below(num), k);
                    }
                    let refs: Vec<&[u8]> = keys[..n].iter().map(|k| k.as_slice()).collect();
                    let t0 = Instant::now();
                    let values = e.multi_get(&refs).context("multi_get failed")?;
                    let mut bytes = 0;
                    for (k, v) in refs.iter().zip(&values) {
                        if let Some(v) = v {
                            w.stats.found += 1;
                            bytes += (k.len() + v.len()) as u64;
                        }
                    }
                    w.stats.record(t0, n as u64, bytes);
                    left -= n as u64;
                }
                Ok(())
            }),
            Benchmark::SeekRandom => Box::new(move |e, w| {
                let mut it = e.iter().context("cannot create an iterator")?;
                let mut key = w.keys.buffer();
                for _ in 0..reads {
                    if w.stopped() {
                        break;
                    }
                    w.keys.fill(w.rng.below(num), &mut key);
                    let t0 = Instant::now();
                    it.seek(&key);
                    let mut bytes = 0;
                    if it.valid() {
                        if it.key() == key.as_slice() {
                            w.stats.found += 1;
                        }
                        bytes += (it.key().len() + it.value().len()) as u64;
                        for _ in 0..seek_nexts {
                            it.next();
                            if !it.valid() {
                                break;
                            }
                            bytes += (it.key().len() + it.value().len()) as u64;
                        }
                    }
                    w.stats.record(t0, 1, bytes);
                }
                it.status().context("iterator failed")
            }),
            Benchmark::ReadSeq | Benchmark::ReadReverse => {
                let forward = b == Benchmark::ReadSeq;
                Box::new(move |e, w| {
                    let mut it = e.iter().context("cannot create an iterator")?;
                    let mut t0 = Instant::now();
                    if forward {
                        it.seek_to_first();
                    } else {
                        it.seek_to_last();
                    }
                    let mut n = 0;
                    while n < reads && it.valid() && !w.stopped() {
                        let bytes = (it.key().len() + it.value().len()) as u64;
                        w.stats.record(t0, 1, bytes);
                        n += 1;
                        t0 = Instant::now();
                        if forward {
                            it.next();
                        } else {
                            it.prev();
                        }
                    }
                    it.status().context("iterator failed")
                })
            }
            Benchmark::Compact
            | Benchmark::Flush
            | Benchmark::WaitForCompaction
            | Benchmark::Stats => unreachable!("{} is not a threaded benchmark", b.name()),
        }
    }

    /// Runs `work` on `--threads` threads started together; merges what they measured.
    fn parallel(&self, index: usize, work: Work<E>) -> Result<Merged> {
        let threads = self.args.threads;
        let engine = self.engine();
        let barrier = Barrier::new(threads);
        let stop = AtomicBool::new(false);
        let results: Vec<Result<ThreadStats>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..threads)
                .map(|t| {
                    let (work, barrier, stop) = (&work, &barrier, &stop);
                    let (keys, seed, value_size) =
                        (self.keys, self.args.seed, self.args.value_size);
                    s.spawn(move || {
                        let mut rng = Rng::for_thread(seed, index, t);
                        let values = ValueGen::new(value_size, &mut rng);
                        let mut w = Worker {
                            thread: t,
                            rng,
                            values,
                            keys,
                            stats: ThreadStats::new(),
                            stop,
                        };
                        barrier.wait();
                        w.stats.start();
                        let r = work(engine, &mut w);
                        w.stats.stop();
                        if r.is_err() {
                            stop.store(true, Ordering::Relaxed);
                        }
                        r.map(|()| w.stats)
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
                .collect()
        });
        let stats = results.into_iter().collect::<Result<Vec<_>>>()?;
        Ok(Merged::merge(stats))
    }
}

/// One timed put of `key` with the worker's next value.
#[inline]
fn put_one<E: Engine>(e: &E, w: &mut Worker, key: &[u8]) -> Result<()> {
    let value = w.values.next_value();
    let bytes = (key.len() + value.len()) as u64;
    let t0 = Instant::now();
    e.put(key, value)
        .with_context(|| format!("put of key {} failed", to_hex(key)))?;
    w.stats.record(t0, 1, bytes);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Cli, Command};
    use clap::Parser;

    fn bench_args(args: &[&str]) -> Result<BenchArgs, clap::Error> {
        let cli = Cli::try_parse_from(["strata", "bench"].iter().chain(args.iter()).copied())?;
        match cli.command {
            Command::Bench(b) => Ok(b),
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
            (a.num, a.reads(), a.key_size, a.value_size),
            (1000, 10, 24, 1000)
        );
        assert_eq!(
            (a.threads, a.seed, a.seek_nexts, a.batch_size),
            (4, 7, 10, 8)
        );
        assert!(a.use_existing_db && a.sync && a.disable_wal && a.keep);
        assert_eq!(a.opts, vec![("filter".to_string(), "false".to_string())]);
        a.validate().unwrap();
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
    }

    #[test]
    fn fresh_and_writing_benchmarks() {
        assert!(Benchmark::FillSeq.fresh_db() && Benchmark::FillRandom.fresh_db());
        assert!(!Benchmark::Overwrite.fresh_db());
        assert!(Benchmark::Overwrite.writes() && Benchmark::DeleteRandom.writes());
        assert!(!Benchmark::ReadRandom.writes());
        assert!(Benchmark::ReadMissing.reports_found());
        assert!(!Benchmark::ReadSeq.reports_found());
    }

    #[test]
    fn header_describes_the_run() {
        let a = bench_args(&["--num", "1000", "--opt", "filter=false"]).unwrap();
        let cfg = a.engine_config();
        let opts = Strata::describe(&cfg).unwrap();
        let h = header::<Strata>(&a, Path::new("/tmp/x"), true, &opts);
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
            "filter=false",
        ] {
            assert!(h.contains(want), "missing {want:?} in\n{h}");
        }
        assert_eq!(h.contains("WARNING"), cfg!(debug_assertions));
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
