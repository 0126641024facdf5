//! Runs the benchmarks of one engine in one round and measures each ([`Record`]).

use super::dist::{scan_length, KeyChooser};
use super::engine::{Engine, EngineConfig, EngineIter};
use super::keys::{thread_range, KeyGen, Rng, ValueGen};
use super::report::{
    figures_line, latency_line, new_histogram, result_line, Latency, Merged, Record, ThreadStats,
    KINDS,
};
use super::sysstat::{self, DeviceIo};
use super::timeline::{self, Counter, Goal, Samples};
use super::ycsb::{self, Inserts, Spec};
use super::{BenchArgs, Benchmark};
use crate::text::to_hex;
use anyhow::{Context, Result};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

/// Which keys are live, to know the live user bytes (space amplification). db_bench keys
/// and YCSB records are different keys (see [`KeyGen::fill_ycsb`]), so each has its set;
/// YCSB records numbered `num` and above are only ever inserted once, so they are counted.
pub struct LiveKeys {
    num: u64,
    plain: Vec<AtomicU64>,
    ycsb: Vec<AtomicU64>,
    count: AtomicU64,
}

impl LiveKeys {
    pub fn new(num: u64, with_ycsb: bool) -> LiveKeys {
        let words = num.div_ceil(64) as usize;
        let bits = |n: usize| (0..n).map(|_| AtomicU64::new(0)).collect();
        LiveKeys {
            num,
            plain: bits(words),
            ycsb: bits(if with_ycsb { words } else { 0 }),
            count: AtomicU64::new(0),
        }
    }

    pub fn clear(&self) {
        for w in self.plain.iter().chain(&self.ycsb) {
            w.store(0, Ordering::Relaxed);
        }
        self.count.store(0, Ordering::Relaxed);
    }

    fn set(bits: &[AtomicU64], i: u64) -> bool {
        let mask = 1u64 << (i % 64);
        bits[(i / 64) as usize].fetch_or(mask, Ordering::Relaxed) & mask == 0
    }

    /// db_bench key `i` (below num) was written.
    pub fn put(&self, i: u64) {
        if Self::set(&self.plain, i) {
            self.count.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// db_bench key `i` was deleted.
    pub fn delete(&self, i: u64) {
        let mask = 1u64 << (i % 64);
        if self.plain[(i / 64) as usize].fetch_and(!mask, Ordering::Relaxed) & mask != 0 {
            self.count.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// YCSB record `k` was written.
    pub fn put_ycsb(&self, k: u64) {
        let new = k >= self.num || self.ycsb.is_empty() || Self::set(&self.ycsb, k);
        if new {
            self.count.fetch_add(1, Ordering::Relaxed);
        }
    }

    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }
}

/// Stops a thread's loop after its operations, or at the `--duration` deadline.
struct Budget {
    left: u64,
    deadline: Option<Instant>,
    n: u32,
}

impl Budget {
    #[inline]
    fn more(&mut self) -> bool {
        if let Some(d) = self.deadline {
            self.n = self.n.wrapping_add(1);
            return self.n % 16 != 1 || Instant::now() < d;
        }
        if self.left == 0 {
            return false;
        }
        self.left -= 1;
        true
    }
}

/// One thread's tools while it runs a benchmark.
pub struct Worker<'a> {
    thread: usize,
    rng: Rng,
    values: ValueGen,
    keys: KeyGen,
    stats: ThreadStats,
    stop: &'a AtomicBool,
    counter: &'a Counter,
    live: Option<&'a LiveKeys>,
    /// `--duration` deadline, for the benchmarks that honour it.
    deadline: Option<Instant>,
    /// `--rate`: when the next operation is due.
    pacer: Option<Pacer>,
    /// `--async`: the puts in flight and their latencies.
    asyncs: Option<Arc<AsyncPuts>>,
}

/// Issues one thread's operations at a fixed rate (`--rate`). Each operation's latency counts
/// from when it was due, so time spent queued behind a slow store is measured.
struct Pacer {
    interval: Duration,
    next: Instant,
}

impl Pacer {
    /// Waits until the next operation is due and returns when that was.
    fn wait(&mut self) -> Instant {
        let due = self.next;
        self.next += self.interval;
        let now = Instant::now();
        if due > now {
            let left = due - now;
            // Sleep most of the wait (timers overshoot by tens of microseconds), yield the rest.
            if left > Duration::from_micros(80) {
                std::thread::sleep(left - Duration::from_micros(60));
            }
            while Instant::now() < due {
                std::thread::yield_now();
            }
        }
        due
    }
}

/// One thread's asynchronous puts (`--async`): completions come on the store's threads.
struct AsyncPuts {
    in_flight: AtomicU64,
    hist: parking_lot::Mutex<hdrhistogram::Histogram<u64>>,
    error: parking_lot::Mutex<Option<anyhow::Error>>,
    depth: u64,
}

impl AsyncPuts {
    fn complete(&self, t0: Instant, r: Result<()>) {
        let ns = t0.elapsed().as_nanos().min(u64::MAX as u128) as u64;
        self.hist.lock().saturating_record(ns.max(1));
        if let Err(e) = r {
            self.error.lock().get_or_insert(e);
        }
        self.in_flight.fetch_sub(1, Ordering::AcqRel);
    }

    /// Waits until fewer than `limit` puts are in flight.
    fn wait_below(&self, limit: u64) {
        while self.in_flight.load(Ordering::Acquire) >= limit {
            std::thread::yield_now();
        }
    }

    fn take_error(&self) -> Result<()> {
        match self.error.lock().take() {
            Some(e) => Err(e.context("asynchronous put failed")),
            None => Ok(()),
        }
    }
}

impl Worker<'_> {
    /// When the next operation starts: now, or with `--rate` when it is due (after waiting).
    #[inline]
    fn pace(&mut self) -> Instant {
        match &mut self.pacer {
            Some(p) => p.wait(),
            None => Instant::now(),
        }
    }

    /// `--async`: waits for every put in flight and folds their latencies into the stats.
    fn finish_async(&mut self) -> Result<()> {
        if let Some(a) = self.asyncs.take() {
            a.wait_below(1);
            self.stats
                .hist
                .add(&*a.hist.lock())
                .context("merging asynchronous latencies")?;
            a.take_error()?;
        }
        Ok(())
    }

    /// True once another thread failed: stop early.
    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    fn budget(&self, ops: u64) -> Budget {
        Budget {
            left: ops,
            deadline: self.deadline,
            n: 0,
        }
    }

    #[inline]
    fn record(&mut self, t0: Instant, ops: u64, bytes: u64) {
        self.stats.record(t0, ops, bytes);
        self.counter.publish(self.stats.done);
    }

    #[inline]
    fn record_kind(&mut self, t0: Instant, kind: usize, bytes: u64) {
        self.stats.record_kind(t0, kind, bytes);
        self.counter.publish(self.stats.done);
    }

    /// Writes db_bench key `i` with the next value.
    fn put_key(&mut self, e: &impl Engine, key: &mut [u8], i: u64) -> Result<()> {
        self.keys.fill(i, key);
        put_one(e, self, key)?;
        if let Some(l) = self.live {
            l.put(i);
        }
        Ok(())
    }
}

/// The generator and values of thread `t` of benchmark `index`: a function so that tests
/// can replay which keys a benchmark used.
pub fn thread_rng(seed: u64, index: usize, t: usize, value_size: usize) -> (Rng, ValueGen) {
    let mut rng = Rng::for_thread(seed, index, t);
    let values = ValueGen::new(value_size, &mut rng);
    (rng, values)
}

/// What each thread of a benchmark runs.
type Work<E> = Box<dyn Fn(&E, &mut Worker<'_>) -> Result<()> + Sync>;

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
                .map(|l| l.count() * (self.args.key_size + self.args.value_size) as u64),
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

        let found = rec.found.zip(rec.lookups);
        println!(
            "{}",
            result_line(name, m.done, m.thread_time, m.wall, m.bytes, found)
        );
        if !m.hist.is_empty() {
            println!("{}", latency_line(&m.hist, &unit));
        }
        if let Some(kinds) = &m.kinds {
            println!("{:<12} : workload: {}", "", self.ycsb_spec(b).describe());
            let counts: Vec<String> = rec
                .op_counts
                .iter()
                .map(|(k, n)| format!("{k} {n}"))
                .collect();
            println!("{:<12} : ops: {}", "", counts.join(", "));
            for ((count, hist), kind) in kinds.iter().zip(KINDS) {
                if *count > 0 {
                    println!("{}", latency_line(hist, kind));
                }
            }
        }
        if let Some(w) = &t.writer {
            println!("{:<12} : writer: {} puts in the background", "", w.done);
        }
        println!("{}", figures_line(&rec));
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
        let work = self.workload(b, inserts.clone());
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

    /// The per-thread loop of a benchmark.
    fn workload(&self, b: Benchmark, inserts: Option<Arc<Inserts>>) -> Work<E> {
        let num = self.args.num;
        let writes = self.args.writes();
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
                    w.put_key(e, &mut key, i)?;
                }
                Ok(())
            }),
            Benchmark::FillRandom | Benchmark::Overwrite => Box::new(move |e, w| {
                let mut key = w.keys.buffer();
                let mut budget = w.budget(writes);
                while budget.more() && !w.stopped() {
                    let i = w.rng.below(num);
                    w.put_key(e, &mut key, i)?;
                }
                Ok(())
            }),
            Benchmark::DeleteRandom => Box::new(move |e, w| {
                let mut key = w.keys.buffer();
                let mut budget = w.budget(writes);
                while budget.more() && !w.stopped() {
                    let i = w.rng.below(num);
                    w.keys.fill(i, &mut key);
                    let t0 = Instant::now();
                    e.delete(&key)
                        .with_context(|| format!("delete of key {} failed", to_hex(&key)))?;
                    w.stats.written += key.len() as u64;
                    w.record(t0, 1, 0);
                    if let Some(l) = w.live {
                        l.delete(i);
                    }
                }
                Ok(())
            }),
            Benchmark::ReadRandom | Benchmark::ReadMissing => {
                let missing = b == Benchmark::ReadMissing;
                Box::new(move |e, w| read_random(e, w, num, reads, missing))
            }
            Benchmark::ReadWhileWriting => {
                let readers_done = Arc::new(AtomicUsize::new(0));
                Box::new(move |e, w| {
                    if w.thread == threads {
                        // The writer: random puts until every reader is done.
                        let mut key = w.keys.buffer();
                        while readers_done.load(Ordering::Acquire) < threads && !w.stopped() {
                            let i = w.rng.below(num);
                            w.put_key(e, &mut key, i)?;
                        }
                        return Ok(());
                    }
                    let r = read_random(e, w, num, reads, false);
                    readers_done.fetch_add(1, Ordering::Release);
                    r
                })
            }
            Benchmark::MultiReadRandom => Box::new(move |e, w| {
                let mut keys: Vec<Vec<u8>> = (0..batch).map(|_| w.keys.buffer()).collect();
                let mut left = reads;
                let mut budget = w.budget(u64::MAX);
                while left > 0 && budget.more() && !w.stopped() {
                    let n = if w.deadline.is_some() {
                        batch
                    } else {
                        (batch as u64).min(left) as usize
                    };
                    for k in &mut keys[..n] {
                        let i = w.rng.below(num);
                        w.keys.fill(i, k);
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
                    w.stats.lookups += n as u64;
                    w.record(t0, n as u64, bytes);
                    if w.deadline.is_none() {
                        left -= n as u64;
                    }
                }
                Ok(())
            }),
            Benchmark::SeekRandom => Box::new(move |e, w| {
                let mut it = e.iter().context("cannot create an iterator")?;
                let mut key = w.keys.buffer();
                let mut budget = w.budget(reads);
                while budget.more() && !w.stopped() {
                    let i = w.rng.below(num);
                    w.keys.fill(i, &mut key);
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
                    w.stats.lookups += 1;
                    w.record(t0, 1, bytes);
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
                        w.record(t0, 1, bytes);
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
            Benchmark::YcsbLoad => Box::new(move |e, w| {
                let mut key = w.keys.buffer();
                for k in thread_range(num, threads, w.thread) {
                    if w.stopped() {
                        break;
                    }
                    w.keys.fill_ycsb(k, &mut key);
                    put_one(e, w, &key)?;
                    if let Some(l) = w.live {
                        l.put_ycsb(k);
                    }
                }
                Ok(())
            }),
            Benchmark::YcsbA
            | Benchmark::YcsbB
            | Benchmark::YcsbC
            | Benchmark::YcsbD
            | Benchmark::YcsbE
            | Benchmark::YcsbF => {
                let spec = self.ycsb_spec(b);
                let inserts = inserts.expect("YCSB benchmarks have their insert state");
                let initial = self.ycsb_records;
                let expected =
                    initial + (reads as f64 * threads as f64 * spec.insert_share() * 2.0) as u64;
                Box::new(move |e, w| {
                    let mut chooser = KeyChooser::new(spec.dist, initial, expected);
                    ycsb_loop(e, w, &spec, &mut chooser, &inserts, reads)
                })
            }
            Benchmark::Compact
            | Benchmark::Flush
            | Benchmark::WaitForCompaction
            | Benchmark::Stats => unreachable!("{} is not a threaded benchmark", b.name()),
        }
    }

    /// The YCSB workload of `b`, with `--ycsb-distribution` applied.
    fn ycsb_spec(&self, b: Benchmark) -> Spec {
        let mut spec = b
            .ycsb()
            .and_then(Spec::of)
            .expect("a YCSB benchmark has a workload letter");
        if let Some(d) = self.args.ycsb_distribution {
            spec.dist = d;
        }
        spec
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
                    let (keys, seed, value_size) =
                        (self.keys, self.args.seed, self.args.value_size);
                    let tx = tx.clone();
                    s.spawn(move || {
                        let (rng, values) = thread_rng(seed, index, t, value_size);
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

/// readrandom / readmissing / readwhilewriting's readers.
fn read_random(
    e: &impl Engine,
    w: &mut Worker<'_>,
    num: u64,
    reads: u64,
    missing: bool,
) -> Result<()> {
    let ks = w.keys.key_size();
    let mut key = if missing {
        w.keys.missing_key_buffer()
    } else {
        w.keys.buffer()
    };
    let mut budget = w.budget(reads);
    while budget.more() && !w.stopped() {
        let i = w.rng.below(num);
        w.keys.fill(i, &mut key[..ks]);
        let t0 = w.pace();
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
        w.stats.lookups += 1;
        w.record(t0, 1, bytes);
    }
    Ok(())
}

/// One thread of a YCSB workload.
fn ycsb_loop(
    e: &impl Engine,
    w: &mut Worker<'_>,
    spec: &Spec,
    chooser: &mut KeyChooser,
    inserts: &Inserts,
    ops: u64,
) -> Result<()> {
    let mut key = w.keys.buffer();
    let mut budget = w.budget(ops);
    while budget.more() && !w.stopped() {
        let kind = spec.pick(w.rng.unit());
        let due = w.pace();
        match kind {
            ycsb::INSERT => {
                let k = inserts.begin(w.thread);
                w.keys.fill_ycsb(k, &mut key);
                let value = w.values.next_value();
                let bytes = (key.len() + value.len()) as u64;
                let t0 = due;
                e.put(&key, value)
                    .with_context(|| format!("insert of key {} failed", to_hex(&key)))?;
                inserts.end(w.thread);
                w.stats.written += bytes;
                w.record_kind(t0, kind, bytes);
                if let Some(l) = w.live {
                    l.put_ycsb(k);
                }
            }
            _ => {
                let k = chooser.next(&mut w.rng, inserts.readable());
                w.keys.fill_ycsb(k, &mut key);
                match kind {
                    ycsb::READ => {
                        let t0 = due;
                        let v = e
                            .get(&key)
                            .with_context(|| format!("get of key {} failed", to_hex(&key)))?;
                        w.stats.lookups += 1;
                        let bytes = v.map_or(0, |v| {
                            w.stats.found += 1;
                            (key.len() + v.len()) as u64
                        });
                        w.record_kind(t0, kind, bytes);
                    }
                    ycsb::UPDATE => {
                        let value = w.values.next_value();
                        let bytes = (key.len() + value.len()) as u64;
                        let t0 = due;
                        e.put(&key, value)
                            .with_context(|| format!("update of key {} failed", to_hex(&key)))?;
                        w.stats.written += bytes;
                        w.record_kind(t0, kind, bytes);
                    }
                    ycsb::SCAN => {
                        let len = scan_length(&mut w.rng, ycsb::MAX_SCAN_LENGTH);
                        let t0 = due;
                        // A new iterator per scan, as YCSB's bindings do.
                        let mut it = e.iter().context("cannot create an iterator")?;
                        it.seek(&key);
                        let mut bytes = 0;
                        let mut n = 0;
                        while it.valid() && n < len {
                            bytes += (it.key().len() + it.value().len()) as u64;
                            n += 1;
                            if n < len {
                                it.next();
                            }
                        }
                        it.status().context("scan failed")?;
                        drop(it);
                        w.record_kind(t0, kind, bytes);
                    }
                    ycsb::RMW => {
                        // Read-modify-write: read the record, write it back changed.
                        let t0 = due;
                        let v = e
                            .get(&key)
                            .with_context(|| format!("get of key {} failed", to_hex(&key)))?;
                        w.stats.lookups += 1;
                        let mut bytes = v.map_or(0, |v| {
                            w.stats.found += 1;
                            (key.len() + v.len()) as u64
                        });
                        let value = w.values.next_value();
                        let put_bytes = (key.len() + value.len()) as u64;
                        e.put(&key, value)
                            .with_context(|| format!("update of key {} failed", to_hex(&key)))?;
                        w.stats.written += put_bytes;
                        bytes += put_bytes;
                        w.record_kind(t0, kind, bytes);
                    }
                    _ => unreachable!("Spec::pick returns a kind of KINDS"),
                }
            }
        }
    }
    Ok(())
}

/// One timed put of `key` with the worker's next value.
#[inline]
fn put_one(e: &impl Engine, w: &mut Worker, key: &[u8]) -> Result<()> {
    let t0 = w.pace();
    let value = w.values.next_value();
    let bytes = (key.len() + value.len()) as u64;
    if let Some(a) = &w.asyncs {
        a.wait_below(a.depth);
        a.in_flight.fetch_add(1, Ordering::AcqRel);
        let done = a.clone();
        e.put_async(key, value, Box::new(move |r| done.complete(t0, r)));
        a.take_error()?;
        w.stats.written += bytes;
        w.stats.done += 1;
        w.stats.bytes += bytes;
        w.counter.publish(w.stats.done);
        return Ok(());
    }
    e.put(key, value)
        .with_context(|| format!("put of key {} failed", to_hex(key)))?;
    w.stats.written += bytes;
    w.record(t0, 1, bytes);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn live_keys_count_puts_deletes_and_inserts() {
        let l = LiveKeys::new(100, true);
        l.put(3);
        l.put(3);
        l.put(99);
        assert_eq!(l.count(), 2);
        l.delete(3);
        l.delete(3);
        l.delete(50);
        assert_eq!(l.count(), 1);
        l.put_ycsb(3);
        l.put_ycsb(3);
        l.put_ycsb(100);
        l.put_ycsb(101);
        assert_eq!(l.count(), 4);
        l.clear();
        assert_eq!(l.count(), 0);
    }

    #[test]
    fn budget_counts_operations() {
        let mut b = Budget {
            left: 3,
            deadline: None,
            n: 0,
        };
        let mut n = 0;
        while b.more() {
            n += 1;
        }
        assert_eq!(n, 3);
        // A deadline in the past stops at the first check.
        let mut b = Budget {
            left: 0,
            deadline: Some(Instant::now()),
            n: 0,
        };
        assert!(!b.more());
    }
}
