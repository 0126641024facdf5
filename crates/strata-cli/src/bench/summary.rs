//! The summary over rounds: each engine's medians per benchmark and its ratio to the first
//! engine.

use super::record::Record;
use serde::Serialize;

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

#[cfg(test)]
mod tests {
    use super::super::print::summary_table;
    use super::super::record::tests::record;
    use super::*;

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
