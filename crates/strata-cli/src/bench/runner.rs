//! Runs the benchmarks of one engine in one round and measures each ([`Record`]).

use super::args::BenchArgs;
use super::catalog::Benchmark;
use super::engine::{Engine, EngineConfig};
use super::keys::KeyGen;
use super::live::LiveKeys;
use super::print::result_lines;
use super::record::{new_histogram, Latency, Merged, Record, ThreadStats, KINDS};
use super::sysstat::{self, DeviceIo};
use super::timeline::{self, Counter, Goal, Samples};
use super::worker::{thread_rng, AsyncPuts, Pacer, Worker};
use super::workload::{workload, ycsb_spec, Work};
use super::ycsb::Inserts;
use anyhow::{Context, Result};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

/// What the threads of one benchmark produced.
struct Threaded {
    /// The threads whose operations the result line counts.
    main: Merged,
    /// readwhilewriting's writer.
    writer: Option<Merged>,
    samples: Samples,
}

/// What the process and engine counters said at one point.
struct Probe {
    io: Option<DeviceIo>,
    cpu: Option<Duration>,
    stall: Option<u64>,
}

impl Probe {
    fn take(engine: &impl Engine) -> Probe {
        Probe {
            io: DeviceIo::now(),
            cpu: sysstat::cpu_time(),
            stall: engine.stall_micros(),
        }
    }
}

pub struct Runner<'a, E: Engine> {
    args: &'a BenchArgs,
    cfg: EngineConfig,
    dir: &'a Path,
    engine: Option<E>,
    /// Something was written since the database was (re)created.
    dirty: bool,
    keys: KeyGen,
    live: Option<LiveKeys>,
    /// YCSB records in the database: `[0, ycsb_records)`.
    ycsb_records: u64,
    round: usize,
}

impl<'a, E: Engine> Runner<'a, E> {
    /// Opens the engine in `dir`, runs every benchmark of `args` and closes it.
    pub fn run(
        args: &'a BenchArgs,
        cfg: EngineConfig,
        dir: &'a Path,
        round: usize,
        labels: &[String],
    ) -> Result<Vec<Record>> {
        let engine = E::open(dir, &cfg)?;
        let with_ycsb = args.benchmarks.iter().any(|b| b.ycsb().is_some());
        let mut r = Runner {
            args,
            cfg,
            dir,
            engine: Some(engine),
            dirty: args.use_existing_db,
            keys: KeyGen::new(args.key_size),
            live: (!args.use_existing_db).then(|| LiveKeys::new(args.num, with_ycsb)),
            ycsb_records: args.num,
            round,
        };
        let mut out = Vec::new();
        for (i, &b) in args.benchmarks.iter().enumerate() {
            let rec = r
                .run_one(i, b, &labels[i])
                .with_context(|| format!("benchmark {} failed on {}", b.name(), E::NAME))?;
            out.extend(rec);
        }
        let engine = r.engine.take().expect("engine is open between benchmarks");
        println!();
        println!("** Engine statistics ({}) **", E::NAME);
        println!("{}", engine.stats());
        engine
            .close()
            .with_context(|| format!("cannot close database at {} cleanly", dir.display()))?;
        Ok(out)
    }

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
        self.cfg.empty_l0_tier()?;
        self.engine = Some(E::open(self.dir, &self.cfg)?);
        if let Some(l) = &self.live {
            l.clear();
        }
        self.ycsb_records = self.args.num;
        self.dirty = false;
        Ok(())
    }

    fn run_one(&mut self, index: usize, b: Benchmark, label: &str) -> Result<Option<Record>> {
        let name = b.name();
        if b.fresh_db() {
            if self.args.use_existing_db {
                println!("{name:<12} : skipped (--use-existing-db is set)");
                return Ok(None);
            }
            if self.dirty {
                self.reopen_fresh()?;
            }
        }
        if b.writes() {
            self.dirty = true;
        }
        if b == Benchmark::Stats {
            println!("{name:<12} :");
            println!("{}", self.engine().stats());
            return Ok(None);
        }

        let before = Probe::take(self.engine());
        // When the kernel refuses, the peak is the process's so far (documented).
        let _ = sysstat::reset_peak_rss();
        let t = match b {
            Benchmark::Compact => self.single(|e| e.compact())?,
            Benchmark::Flush => self.single(|e| e.flush())?,
            Benchmark::WaitForCompaction => self.single(|e| e.wait_idle())?,
            _ => self.threaded(index, b)?,
        };
        let after = Probe::take(self.engine());

        let m = &t.main;
        let mut rec = Record {
            engine: E::NAME.to_string(),
            round: self.round,
            benchmark: label.to_string(),
            ops: m.done,
            seconds: m.wall.as_secs_f64(),
            micros_per_op: if m.done > 0 {
                m.thread_time.as_secs_f64() * 1e6 / m.done as f64
            } else {
                0.0
            },
            ops_per_sec: if m.wall > Duration::ZERO {
                m.done as f64 / m.wall.as_secs_f64()
            } else {
                0.0
            },
            mb_per_sec: if m.wall > Duration::ZERO {
                m.bytes as f64 / 1048576.0 / m.wall.as_secs_f64()
            } else {
                0.0
            },
            user_bytes_written: m.written + t.writer.as_ref().map_or(0, |w| w.written),
            disk_bytes: sysstat::dir_bytes(self.dir),
            live_bytes: self
                .live
                .as_ref()
                .map(|l| l.count() * (self.args.key_size + self.args.mean_value_size()) as u64),
            peak_rss_bytes: sysstat::peak_rss(),
            timeline: t.samples.timeline(),
            ..Record::default()
        };
        if let (Some(a), Some(b)) = (after.io, before.io) {
            let d = a.since(b);
            rec.device_bytes_written = Some(d.written);
            rec.device_bytes_read = Some(d.read);
            rec.device_bytes_cancelled = Some(d.cancelled);
        }
        if let (Some(a), Some(b)) = (after.cpu, before.cpu) {
            rec.cpu_seconds = Some(a.saturating_sub(b).as_secs_f64());
        }
        if let (Some(a), Some(b)) = (after.stall, before.stall) {
            rec.stall_seconds = Some(a.saturating_sub(b) as f64 / 1e6);
        }
        let unit = if b == Benchmark::MultiReadRandom {
            format!("batch of {}", self.args.batch_size)
        } else {
            "op".to_string()
        };
        if !m.hist.is_empty() {
            rec.latency = Some(Latency::of(&m.hist, &unit));
        }
        if b.reports_found() || m.lookups > 0 {
            rec.found = Some(m.found);
            rec.lookups = Some(m.lookups);
        }
        if let Some(kinds) = &m.kinds {
            for ((count, hist), kind) in kinds.iter().zip(KINDS) {
                if *count > 0 {
                    rec.op_counts.insert(kind.to_string(), *count);
                    rec.latency_by_kind
                        .insert(kind.to_string(), Latency::of(hist, kind));
                }
            }
        }
        if let Some(w) = &t.writer {
            rec.op_counts.insert("writer puts".to_string(), w.done);
        }
        rec.derive();

        let workload = m.kinds.as_ref().map(|_| ycsb_spec(self.args, b).describe());
        print!(
            "{}",
            result_lines(name, m, t.writer.as_ref(), &unit, workload, &rec)
        );
        Ok(Some(rec))
    }

    /// A one-shot operation (compact, flush, ...), timed as one op.
    fn single(&self, op: impl FnOnce(&E) -> Result<()>) -> Result<Threaded> {
        let mut st = ThreadStats::new();
        st.start();
        let t0 = Instant::now();
        op(self.engine())?;
        st.record(t0, 1, 0);
        st.stop();
        Ok(Threaded {
            main: Merged::merge(vec![st]),
            writer: None,
            samples: Samples::default(),
        })
    }

    /// Operations each thread of `b` does, for the progress bar.
    fn per_thread_ops(&self, b: Benchmark) -> u64 {
        let a = self.args;
        match b {
            Benchmark::FillSeq | Benchmark::YcsbLoad => a.num.div_ceil(a.threads as u64),
            Benchmark::FillRandom | Benchmark::Overwrite | Benchmark::DeleteRandom => a.writes(),
            _ => a.reads(),
        }
    }

    /// Runs `b` on `--threads` threads (plus a writer for readwhilewriting).
    fn threaded(&mut self, index: usize, b: Benchmark) -> Result<Threaded> {
        let threads = self.args.threads;
        let duration = (b.honours_duration() && self.args.duration > 0)
            .then(|| Duration::from_secs(self.args.duration));
        let goal = match duration {
            Some(d) => Goal::Time(d),
            None => Goal::Ops(self.per_thread_ops(b) * threads as u64),
        };
        let inserts = b
            .ycsb()
            .map(|_| Arc::new(Inserts::new(self.ycsb_records, threads)));
        let work = workload(self.args, b, inserts.clone(), self.ycsb_records);
        let writer = b == Benchmark::ReadWhileWriting;
        let (stats, samples) = self.parallel(index, b.name(), work, writer, duration, goal)?;
        if b == Benchmark::YcsbLoad {
            self.ycsb_records = self.args.num;
        }
        if let Some(ins) = inserts {
            self.ycsb_records = ins.next();
        }
        let mut stats = stats;
        let writer = writer.then(|| Merged::merge(stats.drain(threads..).collect()));
        Ok(Threaded {
            main: Merged::merge(stats),
            writer,
            samples,
        })
    }

    /// Runs `work` on `--threads` threads (one more with `writer`) started together, with a
    /// sampler of their progress; returns every thread's measurements (the writer's last).
    fn parallel(
        &self,
        index: usize,
        label: &str,
        work: Work<E>,
        writer: bool,
        duration: Option<Duration>,
        goal: Goal,
    ) -> Result<(Vec<ThreadStats>, Samples)> {
        let threads = self.args.threads;
        let n = threads + usize::from(writer);
        let engine = self.engine();
        let barrier = Barrier::new(n + 1);
        let stop = AtomicBool::new(false);
        let counters: Vec<Counter> = (0..n).map(|_| Counter::default()).collect();
        let live = self.live.as_ref();
        let with_kinds = self.args.benchmarks[index].ycsb().is_some();
        let rate = self.args.rate.first().copied().unwrap_or(0);
        let (asynchronous, async_depth) = (self.args.asynchronous, self.args.async_depth);
        let (results, samples) = std::thread::scope(|s| {
            let (tx, rx) = std::sync::mpsc::channel::<()>();
            let handles: Vec<_> = (0..n)
                .map(|t| {
                    let (work, barrier, stop, counter) = (&work, &barrier, &stop, &counters[t]);
                    let (keys, seed, value_sizes) =
                        (self.keys, self.args.seed, self.args.value_sizes());
                    let tx = tx.clone();
                    s.spawn(move || {
                        let (rng, values) = thread_rng(seed, index, t, value_sizes);
                        let mut stats = ThreadStats::new();
                        if with_kinds {
                            stats = stats.with_kinds();
                        }
                        let mut w = Worker {
                            thread: t,
                            rng,
                            values,
                            keys,
                            stats,
                            stop,
                            counter,
                            live,
                            deadline: None,
                            pacer: None,
                            asyncs: (asynchronous && engine.has_async()).then(|| {
                                Arc::new(AsyncPuts {
                                    in_flight: AtomicU64::new(0),
                                    hist: parking_lot::Mutex::new(new_histogram()),
                                    error: parking_lot::Mutex::new(None),
                                    depth: async_depth,
                                })
                            }),
                        };
                        barrier.wait();
                        w.stats.start();
                        w.deadline = duration.map(|d| w.stats.start + d);
                        if rate > 0 && t < threads {
                            // Each thread offers rate/threads, staggered over one interval.
                            let interval = Duration::from_secs_f64(threads as f64 / rate as f64);
                            let offset = interval.mul_f64(t as f64 / threads as f64);
                            w.pacer = Some(Pacer {
                                interval,
                                next: w.stats.start + offset,
                            });
                        }
                        let r = work(engine, &mut w);
                        let r = r.and(w.finish_async());
                        w.stats.stop();
                        if r.is_err() {
                            stop.store(true, Ordering::Relaxed);
                        }
                        drop(tx);
                        r.map(|()| w.stats)
                    })
                })
                .collect();
            drop(tx);
            let sampler = s.spawn(|| {
                barrier.wait();
                let start = Instant::now();
                timeline::sample(&counters[..threads], rx, start, label, goal)
            });
            let results: Vec<Result<ThreadStats>> = handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
                .collect();
            let samples = sampler
                .join()
                .unwrap_or_else(|p| std::panic::resume_unwind(p));
            (results, samples)
        });
        let stats = results.into_iter().collect::<Result<Vec<_>>>()?;
        Ok((stats, samples))
    }
}
