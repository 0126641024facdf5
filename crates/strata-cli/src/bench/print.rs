//! The text output, db_bench-shaped: each benchmark's result line, latency lines and
//! figures line, and the summary table over engines and rounds.

use super::record::{Merged, Record, KINDS};
use super::summary::SummaryRow;
use crate::text::human_bytes;
use hdrhistogram::Histogram;
use std::time::Duration;

/// Everything printed after one benchmark: the result line, the latency line, for YCSB the
/// workload (`workload`), operation counts and per-kind latencies, readwhilewriting's
/// writer, and the figures line; one line each.
pub fn result_lines(
    name: &str,
    m: &Merged,
    writer: Option<&Merged>,
    unit: &str,
    workload: Option<String>,
    rec: &Record,
) -> String {
    let mut out = String::new();
    let mut line = |s: String| {
        out.push_str(&s);
        out.push('\n');
    };
    let found = rec.found.zip(rec.lookups);
    line(result_line(
        name,
        m.done,
        m.thread_time,
        m.wall,
        m.bytes,
        found,
    ));
    if !m.hist.is_empty() {
        line(latency_line(&m.hist, unit));
    }
    if let Some(kinds) = &m.kinds {
        line(format!(
            "{:<12} : workload: {}",
            "",
            workload.unwrap_or_default()
        ));
        let counts: Vec<String> = rec
            .op_counts
            .iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect();
        line(format!("{:<12} : ops: {}", "", counts.join(", ")));
        for ((count, hist), kind) in kinds.iter().zip(KINDS) {
            if *count > 0 {
                line(latency_line(hist, kind));
            }
        }
    }
    if let Some(w) = writer {
        line(format!(
            "{:<12} : writer: {} puts in the background",
            "", w.done
        ));
    }
    line(figures_line(rec));
    out
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
/// `unit` is what one sample is ("op", or "batch of 32"). The mean comes last so that readers
/// of the older line (p50 first) still parse it.
pub fn latency_line(hist: &Histogram<u64>, unit: &str) -> String {
    let us = |ns: u64| fmt_micros(ns as f64 / 1000.0);
    format!(
        "{:<12} : latency micros/{unit}: p50 {} p99 {} p99.9 {} max {} mean {}",
        "",
        us(hist.value_at_quantile(0.50)),
        us(hist.value_at_quantile(0.99)),
        us(hist.value_at_quantile(0.999)),
        us(hist.max()),
        fmt_micros(hist.mean() / 1000.0),
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
    use super::super::record::new_histogram;
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
        // Mean of 1..=1000 µs: 500.5 µs (the histogram keeps 3 significant digits).
        assert!(line.contains("max 1000 mean 50"), "{line}");
    }

    #[test]
    fn fmt_micros_keeps_small_values_readable() {
        assert_eq!(fmt_micros(0.4123), "0.412");
        assert_eq!(fmt_micros(3.567), "3.57");
        assert_eq!(fmt_micros(41.23), "41.2");
        assert_eq!(fmt_micros(1203.4), "1203");
    }
}
