//! What one benchmark measured: each thread's counts and latencies ([`ThreadStats`]), all
//! threads together ([`Merged`]), and the figures of one benchmark of one engine in one
//! round ([`Record`], written to the JSON).

use super::timeline::Timeline;
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
    /// The histogram's mean (db_bench's "Average" of its --histogram output).
    pub mean_us: f64,
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
            mean_us: hist.mean() / 1000.0,
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

#[cfg(test)]
pub(super) mod tests {
    use super::super::print::figures_line;
    use super::*;

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

    pub(in crate::bench) fn record(engine: &str, round: usize, ops_per_sec: f64) -> Record {
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
}
