//! Measurements of one benchmark and their db_bench-shaped report.

use hdrhistogram::Histogram;
use std::time::{Duration, Instant};

/// Latencies are recorded in nanoseconds, up to an hour, to 3 significant digits.
fn new_histogram() -> Histogram<u64> {
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
    /// One sample per timed operation (per batch for multireadrandom).
    pub hist: Histogram<u64>,
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
            hist: new_histogram(),
            start: now,
            finish: now,
        }
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
    pub hist: Histogram<u64>,
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
            hist: new_histogram(),
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
            m.thread_time += t.finish.saturating_duration_since(t.start);
            // Same bounds on both sides: cannot fail.
            let _ = m.hist.add(&t.hist);
        }
        m
    }
}

/// db_bench's result line:
/// `fillrandom   :       2.345 micros/op 426439 ops/sec;   59.3 MB/s`,
/// with ` (found/total found)` appended for lookups when `found` is given.
pub fn result_line(
    name: &str,
    done: u64,
    thread_time: Duration,
    wall: Duration,
    bytes: u64,
    found: Option<u64>,
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
    let rate = if bytes > 0 && secs > 0.0 {
        format!(" {:6.1} MB/s", bytes as f64 / 1048576.0 / secs)
    } else {
        String::new()
    };
    let found = match found {
        Some(f) => format!(" ({f}/{done} found)"),
        None => String::new(),
    };
    format!("{name:<12} : {micros_per_op:11.3} micros/op {ops_per_sec} ops/sec;{rate}{found}")
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
            "fillrandom   :       2.345 micros/op 426439 ops/sec;   59.0 MB/s"
        );
    }

    #[test]
    fn result_line_with_found_and_without_bytes() {
        let t = Duration::from_secs(1);
        let line = result_line("readrandom", 1000, t, t, 0, Some(632));
        assert_eq!(
            line,
            "readrandom   :    1000.000 micros/op 1000 ops/sec; (632/1000 found)"
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
        assert!(line.contains("1000.000 micros/op 2000 ops/sec;"), "{line}");
    }

    #[test]
    fn zero_ops_do_not_divide_by_zero() {
        let line = result_line("readseq", 0, Duration::ZERO, Duration::ZERO, 0, None);
        assert_eq!(line, "readseq      :       0.000 micros/op 0 ops/sec;");
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
}
