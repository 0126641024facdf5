//! Measurements of one benchmark and their db_bench-shaped report; the per-run figures
//! ([`Record`]) and the summary table over engines and rounds.

use super::timeline::Timeline;
use crate::text::human_bytes;
use hdrhistogram::Histogram;
use serde::Serialize;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// Kinds of YCSB operation, each with its own count and latency histogram.
pub const KINDS: [&str; 5] = ["read", "update", "insert", "scan", "rmw"];

/// Latencies are recorded in nanoseconds, up to an hour, to 3 significant digits.
pub(crate) fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000_000, 3).expect("constant histogram bounds")
}

/// What one thread measured.
pub struct ThreadStats {
    /// Operations done (for multireadrandom: keys looked up).
    pub done: u64,
    /// Bytes of keys and values moved.
    pub bytes: u64,
    /// Lookups that found their key.
    pub found: u64,
    /// Lookups done (point reads, seeks, the reads of read-modify-writes).
    pub lookups: u64,
    /// Bytes of keys and values written (puts) and keys deleted: the user bytes of write
    /// amplification.
    pub written: u64,
    /// One sample per timed operation (per batch for multireadrandom).
    pub hist: Histogram<u64>,
    /// Per kind of operation (YCSB), when the benchmark mixes kinds.
    pub kinds: Option<Vec<(u64, Histogram<u64>)>>,
    pub start: Instant,
    pub finish: Instant,
}

impl ThreadStats {
    pub fn new() -> Self {
        let now = Instant::now();
        ThreadStats {
            done: 0,
            bytes: 0,
            found: 0,
            lookups: 0,
            written: 0,
            hist: new_histogram(),
            kinds: None,
            start: now,
            finish: now,
        }
    }

    /// Keeps a count and a histogram per kind of operation ([`KINDS`]).
    pub fn with_kinds(mut self) -> Self {
        self.kinds = Some(KINDS.iter().map(|_| (0, new_histogram())).collect());
        self
    }

    /// Records one operation of kind `kind` (an index into [`KINDS`]) started at `t0`.
    #[inline]
    pub fn record_kind(&mut self, t0: Instant, kind: usize, bytes: u64) {
        let ns = t0.elapsed().as_nanos().min(u64::MAX as u128) as u64;
        self.hist.saturating_record(ns.max(1));
        if let Some(k) = self.kinds.as_mut().and_then(|k| k.get_mut(kind)) {
            k.0 += 1;
            k.1.saturating_record(ns.max(1));
        }
        self.done += 1;
        self.bytes += bytes;
    }

    /// Marks the start of the timed part.
    pub fn start(&mut self) {
        self.start = Instant::now();
        self.finish = self.start;
    }

    /// Records `ops` operations started at `t0` that moved `bytes` bytes.
    #[inline]
    pub fn record(&mut self, t0: Instant, ops: u64, bytes: u64) {
        let ns = t0.elapsed().as_nanos().min(u64::MAX as u128) as u64;
        self.hist.saturating_record(ns.max(1));
        self.done += ops;
        self.bytes += bytes;
    }

    pub fn stop(&mut self) {
        self.finish = Instant::now();
    }
}

/// All threads of one benchmark together.
pub struct Merged {
    pub done: u64,
    pub bytes: u64,
    pub found: u64,
    pub lookups: u64,
    pub written: u64,
    pub hist: Histogram<u64>,
    pub kinds: Option<Vec<(u64, Histogram<u64>)>>,
    /// Sum of the threads' busy times (db_bench's micros/op divides this by `done`).
    pub thread_time: Duration,
    /// First start to last finish.
    pub wall: Duration,
}

impl Merged {
    pub fn merge(threads: Vec<ThreadStats>) -> Merged {
        let mut m = Merged {
            done: 0,
            bytes: 0,
            found: 0,
            lookups: 0,
            written: 0,
            hist: new_histogram(),
            kinds: None,
            thread_time: Duration::ZERO,
            wall: Duration::ZERO,
        };
        let first = threads.iter().map(|t| t.start).min();
        let last = threads.iter().map(|t| t.finish).max();
        if let (Some(a), Some(b)) = (first, last) {
            m.wall = b.saturating_duration_since(a);
        }
        for t in threads {
            m.done += t.done;
            m.bytes += t.bytes;
            m.found += t.found;
            m.lookups += t.lookups;
            m.written += t.written;
            m.thread_time += t.finish.saturating_duration_since(t.start);
            // Same bounds on both sides: cannot fail.
            let _ = m.hist.add(&t.hist);
            if let Some(tk) = t.kinds {
                let mk = m
                    .kinds
                    .get_or_insert_with(|| KINDS.iter().map(|_| (0, new_histogram())).collect());
                for (a, b) in mk.iter_mut().zip(tk) {
                    a.0 += b.0;
                    let _ = a.1.add(&b.1);
                }
            }
        }
        m
    }
}

/// db_bench's result line (RocksDB 7.x's shape):
/// `fillrandom   :       2.345 micros/op 426439 ops/sec 2.345 seconds 1000000 operations;   59.3 MB/s`,
/// with ` (found of lookups found)` appended when `found` is given as (found, lookups).
/// db_bench prints one thread's counts there; this prints all threads' together.
pub fn result_line(
    name: &str,
    done: u64,
    thread_time: Duration,
    wall: Duration,
    bytes: u64,
    found: Option<(u64, u64)>,
) -> String {
    let micros_per_op = if done > 0 {
        thread_time.as_secs_f64() * 1e6 / done as f64
    } else {
        0.0
    };
    let secs = wall.as_secs_f64();
    let ops_per_sec = if secs > 0.0 {
        (done as f64 / secs) as u64
    } else {
        0
    };
    let mut extra = Vec::new();
    if bytes > 0 && secs > 0.0 {
        extra.push(format!("{:6.1} MB/s", bytes as f64 / 1048576.0 / secs));
    }
    if let Some((f, lookups)) = found {
        extra.push(format!("({f} of {lookups} found)"));
    }
    let extra = if extra.is_empty() {
        String::new()
    } else {
        format!(" {}", extra.join(" "))
    };
    format!(
        "{name:<12} : {micros_per_op:11.3} micros/op {ops_per_sec} ops/sec {secs:.3} seconds \
         {done} operations;{extra}"
    )
}

/// Our addition to db_bench's output: the latency distribution, in microseconds.
/// `unit` is what one sample is ("op", or "batch of 32").
pub fn latency_line(hist: &Histogram<u64>, unit: &str) -> String {
    let us = |ns: u64| fmt_micros(ns as f64 / 1000.0);
    format!(
        "{:<12} : latency micros/{unit}: p50 {} p99 {} p99.9 {} max {}",
        "",
        us(hist.value_at_quantile(0.50)),
        us(hist.value_at_quantile(0.99)),
        us(hist.value_at_quantile(0.999)),
        us(hist.max()),
    )
}

/// Three significant digits or so: 0.412, 3.57, 41.2, 1203.
pub fn fmt_micros(v: f64) -> String {
    if v < 1.0 {
        format!("{v:.3}")
    } else if v < 10.0 {
        format!("{v:.2}")
    } else if v < 100.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.0}")
    }
}

/// Latency percentiles in microseconds.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Latency {
    /// What one sample is: "op", "batch of 32", "read"...
    pub per: String,
    pub count: u64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
}

impl Latency {
    pub fn of(hist: &Histogram<u64>, per: &str) -> Latency {
        let us = |ns: u64| ns as f64 / 1000.0;
        Latency {
            per: per.to_string(),
            count: hist.len(),
            p50_us: us(hist.value_at_quantile(0.50)),
            p99_us: us(hist.value_at_quantile(0.99)),
            p999_us: us(hist.value_at_quantile(0.999)),
            max_us: us(hist.max()),
        }
    }
}

/// Everything measured in one benchmark of one engine in one round.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Record {
    pub engine: String,
    /// 1-based.
    pub round: usize,
    pub benchmark: String,
    /// Operations counted in the result line (for readwhilewriting: the reads).
    pub ops: u64,
    pub lookups: Option<u64>,
    pub found: Option<u64>,
    /// Operations by kind (YCSB), and the writer's puts of readwhilewriting.
    pub op_counts: BTreeMap<String, u64>,
    pub seconds: f64,
    pub micros_per_op: f64,
    pub ops_per_sec: f64,
    pub mb_per_sec: f64,
    pub latency: Option<Latency>,
    pub latency_by_kind: BTreeMap<String, Latency>,
    /// Key and value bytes the benchmark wrote (and key bytes it deleted).
    pub user_bytes_written: u64,
    /// Bytes the process made the device write and read (`/proc/self/io` `write_bytes`
    /// and `read_bytes`).
    pub device_bytes_written: Option<u64>,
    pub device_bytes_read: Option<u64>,
    /// `cancelled_write_bytes`: dirty bytes of deleted or truncated files that never
    /// reached the device (possibly written during an earlier benchmark).
    pub device_bytes_cancelled: Option<u64>,
    /// device_bytes_written / user_bytes_written.
    pub write_amp: Option<f64>,
    /// Bytes of the database's files at the end of the benchmark.
    pub disk_bytes: u64,
    /// Key and value bytes of the keys live at the end (unknown with --use-existing-db).
    pub live_bytes: Option<u64>,
    /// disk_bytes / live_bytes.
    pub space_amp: Option<f64>,
    /// User + system CPU time of the process during the benchmark.
    pub cpu_seconds: Option<f64>,
    pub cpu_seconds_per_million_ops: Option<f64>,
    /// Peak resident set during the benchmark (of the process so far if the kernel cannot
    /// reset the peak).
    pub peak_rss_bytes: Option<u64>,
    /// Time writers were stalled or slowed by the engine (when the engine counts it).
    pub stall_seconds: Option<f64>,
    pub timeline: Timeline,
}

impl Record {
    /// Fills the ratios from the measured figures.
    pub fn derive(&mut self) {
        self.write_amp = match self.device_bytes_written {
            Some(d) if self.user_bytes_written > 0 => {
                Some(d as f64 / self.user_bytes_written as f64)
            }
            _ => None,
        };
        self.space_amp = match self.live_bytes {
            Some(l) if l > 0 => Some(self.disk_bytes as f64 / l as f64),
            _ => None,
        };
        self.cpu_seconds_per_million_ops = match self.cpu_seconds {
            Some(c) if self.ops > 0 => Some(c * 1e6 / self.ops as f64),
            _ => None,
        };
    }
}

/// Our third line: what the benchmark cost the machine.
pub fn figures_line(r: &Record) -> String {
    let mut parts = Vec::new();
    if let (Some(w), Some(rd)) = (r.device_bytes_written, r.device_bytes_read) {
        let mut s = format!("device write {} read {}", human_bytes(w), human_bytes(rd));
        if let Some(wa) = r.write_amp {
            s.push_str(&format!(" (W-amp {wa:.2})"));
        }
        parts.push(s);
    }
    let mut disk = format!("disk {}", human_bytes(r.disk_bytes));
    if let Some(sa) = r.space_amp {
        disk.push_str(&format!(" (S-amp {sa:.2})"));
    }
    parts.push(disk);
    if let Some(c) = r.cpu_seconds {
        let mut s = format!("CPU {c:.2} s");
        if let Some(per) = r.cpu_seconds_per_million_ops {
            s.push_str(&format!(" ({per:.2} s/Mop)"));
        }
        parts.push(s);
    }
    if let Some(rss) = r.peak_rss_bytes {
        parts.push(format!("peak RSS {}", human_bytes(rss)));
    }
    if let Some(st) = r.stall_seconds {
        parts.push(format!("stall {st:.3} s"));
    }
    format!("{:<12} : {}", "", parts.join(", "))
}

/// The median of `v` (mean of the two middle values for an even count); NaN when empty.
pub fn median(v: &[f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

/// One row of the summary: an engine's medians over the rounds of one benchmark.
#[derive(Clone, Debug, Serialize)]
pub struct SummaryRow {
    pub benchmark: String,
    pub engine: String,
    pub rounds: usize,
    pub ops_per_sec: f64,
    pub ops_per_sec_min: f64,
    pub ops_per_sec_max: f64,
    /// Median ops/s over the first engine's median ops/s.
    pub ratio_to_first: Option<f64>,
    pub mb_per_sec: f64,
    pub p50_us: Option<f64>,
    pub p99_us: Option<f64>,
    pub p999_us: Option<f64>,
    pub max_us: Option<f64>,
    pub write_amp: Option<f64>,
    pub space_amp: Option<f64>,
    pub cpu_seconds_per_million_ops: Option<f64>,
    pub peak_rss_bytes: Option<f64>,
    pub stall_seconds: Option<f64>,
    pub found_ratio: Option<f64>,
    /// The round whose ops/s is nearest the median (plotted).
    pub median_round: usize,
}

/// Medians per benchmark and engine, benchmarks in run order, engines in `engines` order.
pub fn summarize(records: &[Record], engines: &[&str]) -> Vec<SummaryRow> {
    let mut benches: Vec<&str> = Vec::new();
    for r in records {
        if !benches.contains(&r.benchmark.as_str()) {
            benches.push(&r.benchmark);
        }
    }
    let mut rows = Vec::new();
    for b in benches {
        let mut first: Option<f64> = None;
        for (i, e) in engines.iter().enumerate() {
            let rs: Vec<&Record> = records
                .iter()
                .filter(|r| r.benchmark == b && r.engine == *e)
                .collect();
            if rs.is_empty() {
                continue;
            }
            let med = |f: &dyn Fn(&Record) -> Option<f64>| -> Option<f64> {
                let v: Vec<f64> = rs.iter().filter_map(|r| f(r)).collect();
                (!v.is_empty()).then(|| median(&v))
            };
            let ops: Vec<f64> = rs.iter().map(|r| r.ops_per_sec).collect();
            let m = median(&ops);
            if i == 0 {
                first = Some(m);
            }
            let median_round = rs
                .iter()
                .min_by(|a, b| {
                    (a.ops_per_sec - m)
                        .abs()
                        .total_cmp(&(b.ops_per_sec - m).abs())
                })
                .map_or(1, |r| r.round);
            rows.push(SummaryRow {
                benchmark: b.to_string(),
                engine: e.to_string(),
                rounds: rs.len(),
                ops_per_sec: m,
                ops_per_sec_min: ops.iter().copied().fold(f64::INFINITY, f64::min),
                ops_per_sec_max: ops.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                ratio_to_first: first.filter(|f| *f > 0.0).map(|f| m / f),
                mb_per_sec: med(&|r| Some(r.mb_per_sec)).unwrap_or(0.0),
                p50_us: med(&|r| r.latency.as_ref().map(|l| l.p50_us)),
                p99_us: med(&|r| r.latency.as_ref().map(|l| l.p99_us)),
                p999_us: med(&|r| r.latency.as_ref().map(|l| l.p999_us)),
                max_us: med(&|r| r.latency.as_ref().map(|l| l.max_us)),
                write_amp: med(&|r| r.write_amp),
                space_amp: med(&|r| r.space_amp),
                cpu_seconds_per_million_ops: med(&|r| r.cpu_seconds_per_million_ops),
                peak_rss_bytes: med(&|r| r.peak_rss_bytes.map(|b| b as f64)),
                stall_seconds: med(&|r| r.stall_seconds),
                found_ratio: med(&|r| match (r.found, r.lookups) {
                    (Some(f), Some(l)) if l > 0 => Some(f as f64 / l as f64),
                    _ => None,
                }),
                median_round,
            });
        }
    }
    rows
}

/// The summary as a Markdown table (so it can be pasted into docs/benchmarks.md).
pub fn summary_table(rows: &[SummaryRow], first_engine: &str) -> String {
    let opt = |v: Option<f64>, prec: usize| v.map_or("-".to_string(), |x| format!("{x:.prec$}"));
    let mut t = format!(
        "| benchmark | engine | ops/s (median) | min–max | vs {first_engine} | MB/s | \
         p50 µs | p99 µs | p99.9 µs | max µs | W-amp | S-amp | CPU s/Mop | peak RSS | \
         stall s | found |\n\
         |---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n"
    );
    for r in rows {
        t.push_str(&format!(
            "| {} | {} | {:.0} | {:.0}–{:.0} | {} | {:.1} | {} | {} | {} | {} | {} | {} | {} | \
             {} | {} | {} |\n",
            r.benchmark,
            r.engine,
            r.ops_per_sec,
            r.ops_per_sec_min,
            r.ops_per_sec_max,
            r.ratio_to_first
                .map_or("-".to_string(), |x| format!("{x:.2}x")),
            r.mb_per_sec,
            opt(r.p50_us, 2),
            opt(r.p99_us, 1),
            opt(r.p999_us, 1),
            opt(r.max_us, 0),
            opt(r.write_amp, 2),
            opt(r.space_amp, 2),
            opt(r.cpu_seconds_per_million_ops, 2),
            r.peak_rss_bytes
                .map_or("-".to_string(), |b| human_bytes(b as u64)),
            opt(r.stall_seconds, 3),
            r.found_ratio
                .map_or("-".to_string(), |f| format!("{:.1}%", f * 100.0)),
        ));
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn result_line_has_db_bench_shape() {
        // 1_000_000 ops in 2.345 s of thread time and wall time, 62 MB of data.
        let t = Duration::from_micros(2_345_000);
        let line = result_line("fillrandom", 1_000_000, t, t, 145_000_000, None);
        assert_eq!(
            line,
            "fillrandom   :       2.345 micros/op 426439 ops/sec 2.345 seconds 1000000 \
             operations;   59.0 MB/s"
        );
    }

    #[test]
    fn result_line_with_found_and_without_bytes() {
        let t = Duration::from_secs(1);
        let line = result_line("readrandom", 1000, t, t, 0, Some((632, 1000)));
        assert_eq!(
            line,
            "readrandom   :    1000.000 micros/op 1000 ops/sec 1.000 seconds 1000 operations; \
             (632 of 1000 found)"
        );
    }

    #[test]
    fn micros_per_op_uses_thread_time_and_ops_per_sec_wall_time() {
        // Two threads, each busy 1 s, running side by side for 1 s of wall time.
        let line = result_line(
            "readrandom",
            2000,
            Duration::from_secs(2),
            Duration::from_secs(1),
            0,
            None,
        );
        assert!(
            line.contains("1000.000 micros/op 2000 ops/sec 1.000 seconds 2000 operations;"),
            "{line}"
        );
    }

    #[test]
    fn zero_ops_do_not_divide_by_zero() {
        let line = result_line("readseq", 0, Duration::ZERO, Duration::ZERO, 0, None);
        assert_eq!(
            line,
            "readseq      :       0.000 micros/op 0 ops/sec 0.000 seconds 0 operations;"
        );
    }

    #[test]
    fn latency_line_reports_percentiles_in_micros() {
        let mut h = new_histogram();
        for i in 1..=1000u64 {
            h.record(i * 1000).unwrap(); // 1..1000 µs
        }
        let line = latency_line(&h, "op");
        assert!(
            line.starts_with("             : latency micros/op: p50 "),
            "{line}"
        );
        assert!(line.contains("p50 500"), "{line}");
        assert!(line.contains("p99 990"), "{line}");
        assert!(line.contains("p99.9 999"), "{line}");
        assert!(line.ends_with("max 1000"), "{line}");
    }

    #[test]
    fn fmt_micros_keeps_small_values_readable() {
        assert_eq!(fmt_micros(0.4123), "0.412");
        assert_eq!(fmt_micros(3.567), "3.57");
        assert_eq!(fmt_micros(41.23), "41.2");
        assert_eq!(fmt_micros(1203.4), "1203");
    }

    #[test]
    fn merge_sums_threads() {
        let mut a = ThreadStats::new();
        a.start();
        let t0 = Instant::now();
        a.record(t0, 3, 30);
        a.found = 2;
        a.stop();
        let mut b = ThreadStats::new();
        b.start();
        b.record(Instant::now(), 1, 10);
        b.stop();
        let m = Merged::merge(vec![a, b]);
        assert_eq!((m.done, m.bytes, m.found), (4, 40, 2));
        assert_eq!(m.hist.len(), 2);
        assert!(m.wall >= Duration::ZERO);
    }

    fn record(engine: &str, round: usize, ops_per_sec: f64) -> Record {
        Record {
            engine: engine.into(),
            round,
            benchmark: "fillrandom".into(),
            ops: 1000,
            ops_per_sec,
            user_bytes_written: 1000,
            device_bytes_written: Some(2500),
            device_bytes_read: Some(0),
            disk_bytes: 1500,
            live_bytes: Some(1000),
            cpu_seconds: Some(0.5),
            ..Record::default()
        }
    }

    #[test]
    fn derive_computes_amplification_and_cpu_per_mop() {
        let mut r = record("strata", 1, 10.0);
        r.derive();
        assert_eq!(r.write_amp, Some(2.5));
        assert_eq!(r.space_amp, Some(1.5));
        assert_eq!(r.cpu_seconds_per_million_ops, Some(500.0));
        let line = figures_line(&r);
        assert!(line.contains("(W-amp 2.50)"), "{line}");
        assert!(line.contains("(S-amp 1.50)"), "{line}");
        assert!(line.contains("500.00 s/Mop"), "{line}");
        let mut reads = Record {
            live_bytes: None,
            user_bytes_written: 0,
            ..r
        };
        reads.derive();
        assert_eq!((reads.write_amp, reads.space_amp), (None, None));
    }

    #[test]
    fn medians() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(&[]).is_nan());
    }

    #[test]
    fn summary_takes_medians_and_ratios_against_the_first_engine() {
        let mut rs = vec![
            record("strata", 1, 100.0),
            record("fjall", 1, 50.0),
            record("strata", 2, 300.0),
            record("fjall", 2, 70.0),
            record("strata", 3, 200.0),
            record("fjall", 3, 60.0),
        ];
        for r in &mut rs {
            r.derive();
        }
        let rows = summarize(&rs, &["strata", "fjall"]);
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].engine, "strata");
        assert_eq!(rows[0].ops_per_sec, 200.0);
        assert_eq!(
            (rows[0].ops_per_sec_min, rows[0].ops_per_sec_max),
            (100.0, 300.0)
        );
        assert_eq!(rows[0].ratio_to_first, Some(1.0));
        assert_eq!(rows[0].median_round, 3);
        assert_eq!(rows[1].ops_per_sec, 60.0);
        assert_eq!(rows[1].ratio_to_first, Some(0.3));
        let t = summary_table(&rows, "strata");
        assert!(t.starts_with("| benchmark | engine |"), "{t}");
        assert!(
            t.contains("| fillrandom | fjall | 60 | 50–70 | 0.30x |"),
            "{t}"
        );
        assert_eq!(t.lines().count(), 4);
    }
}
