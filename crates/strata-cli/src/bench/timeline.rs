//! Throughput over time: each benchmark thread publishes its operation count in its own
//! [`Counter`]; a sampler thread reads them every 100 ms, keeps the points for the
//! throughput plot and, on a terminal, drives a progress bar with rate and ETA.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde::Serialize;
use std::io::IsTerminal;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

/// One thread's published operation count, alone on its cache lines so that publishing
/// costs a plain store.
#[repr(align(128))]
#[derive(Default)]
pub struct Counter(AtomicU64);

impl Counter {
    #[inline]
    pub fn publish(&self, ops: u64) {
        self.0.store(ops, Ordering::Relaxed);
    }

    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

const TICK: Duration = Duration::from_millis(100);
/// The progress bar appears only on runs longer than this.
const PROGRESS_AFTER: Duration = Duration::from_secs(2);

/// What the progress bar counts toward.
#[derive(Clone, Debug)]
pub enum Goal {
    Ops(u64),
    Time(Duration),
}

/// Operations per second over a benchmark, in buckets of `interval_s` seconds (bucket `i`
/// covers `[i, i+1) * interval_s`; the last one may be shorter).
#[derive(Clone, Debug, Default, Serialize)]
pub struct Timeline {
    pub interval_s: f64,
    pub ops_per_sec: Vec<f64>,
}

/// Cumulative operation counts at points in time (seconds since the start).
#[derive(Clone, Debug, Default)]
pub struct Samples {
    pub points: Vec<(f64, u64)>,
}

impl Samples {
    /// Buckets of 1 s, or 0.1 s for runs shorter than 20 s.
    pub fn timeline(&self) -> Timeline {
        let end = self.points.last().map_or(0.0, |p| p.0);
        let interval = if end >= 20.0 { 1.0 } else { 0.1 };
        self.timeline_with(interval)
    }

    pub fn timeline_with(&self, interval: f64) -> Timeline {
        let mut t = Timeline {
            interval_s: interval,
            ops_per_sec: Vec::new(),
        };
        let Some(&(end, _)) = self.points.last() else {
            return t;
        };
        let full = (end / interval + 1e-9).floor() as usize;
        let mut prev = 0.0;
        for i in 1..=full {
            let at = self.ops_at(i as f64 * interval);
            t.ops_per_sec.push((at - prev) / interval);
            prev = at;
        }
        let rest = end - full as f64 * interval;
        // A last partial bucket, unless too short to mean anything.
        if rest > interval / 4.0 {
            t.ops_per_sec.push((self.ops_at(end) - prev) / rest);
        }
        t
    }

    /// Operations done at time `t`, interpolated between samples.
    fn ops_at(&self, t: f64) -> f64 {
        let mut before = (0.0, 0u64);
        for &(pt, ops) in &self.points {
            if pt >= t {
                let span = pt - before.0;
                if span <= 0.0 {
                    return ops as f64;
                }
                let f = (t - before.0) / span;
                return before.1 as f64 + f * (ops as f64 - before.1 as f64);
            }
            before = (pt, ops);
        }
        before.1 as f64
    }
}

/// Samples `counters` every 100 ms until `done` is disconnected (the benchmark threads have
/// finished); shows a progress bar on a terminal. `start` is the benchmark's start.
pub fn sample(
    counters: &[Counter],
    done: Receiver<()>,
    start: Instant,
    label: &str,
    goal: Goal,
) -> Samples {
    let mut s = Samples::default();
    let show = std::io::stderr().is_terminal();
    let mut bar: Option<ProgressBar> = None;
    let total = || counters.iter().map(Counter::get).sum::<u64>();
    let mut last = (Instant::now(), 0u64);
    loop {
        let next = start + TICK * (s.points.len() as u32 + 1);
        let wait = next.saturating_duration_since(Instant::now());
        let finished = match done.recv_timeout(wait) {
            Err(RecvTimeoutError::Timeout) => false,
            Ok(()) | Err(RecvTimeoutError::Disconnected) => true,
        };
        let now = Instant::now();
        let ops = total();
        s.points
            .push((now.saturating_duration_since(start).as_secs_f64(), ops));
        if finished {
            break;
        }
        let elapsed = now.saturating_duration_since(start);
        if show && bar.is_none() && elapsed >= PROGRESS_AFTER {
            bar = Some(new_bar(label, &goal, elapsed));
        }
        if let Some(b) = &bar {
            let dt = now.saturating_duration_since(last.0).as_secs_f64();
            if dt >= 0.5 {
                let rate = (ops - last.1) as f64 / dt;
                // ETA from the average rate so far (steadier than the last interval's).
                let secs = elapsed.as_secs_f64();
                let eta = match goal {
                    Goal::Ops(n) if ops > 0 => n.saturating_sub(ops) as f64 * secs / ops as f64,
                    Goal::Ops(_) => f64::NAN,
                    Goal::Time(d) => (d.as_secs_f64() - secs).max(0.0),
                };
                let eta = if eta.is_finite() {
                    format!("{:.0}s", eta.ceil())
                } else {
                    "?".to_string()
                };
                b.set_message(format!("{}ops/s ETA {eta}", crate::text::si(rate)));
                last = (now, ops);
            }
            match goal {
                Goal::Ops(_) => b.set_position(ops),
                Goal::Time(_) => b.set_position(elapsed.as_millis() as u64),
            }
        }
    }
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    s
}

/// A bar that fits 80 columns: `  fillrandom [=====>     ]  18% 134.4kops/s ETA 9s 2s`.
fn new_bar(label: &str, goal: &Goal, elapsed: Duration) -> ProgressBar {
    let len = match goal {
        Goal::Ops(n) => *n,
        Goal::Time(d) => d.as_millis() as u64,
    };
    let b = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr())
        .with_elapsed(elapsed);
    let style =
        ProgressStyle::with_template("{prefix:>12} [{bar:24}] {percent:>3}% {msg:>20} {elapsed}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> ");
    b.set_style(style);
    b.set_prefix(label.to_string());
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeline_buckets_rates() {
        // 1000 ops/s for 3 s, sampled every 0.5 s, then a 0.4 s tail at 2000 ops/s.
        let mut s = Samples::default();
        for i in 1..=6 {
            s.points.push((i as f64 * 0.5, i * 500));
        }
        s.points.push((3.4, 3800));
        let t = s.timeline_with(1.0);
        assert_eq!(t.interval_s, 1.0);
        assert_eq!(t.ops_per_sec.len(), 4);
        for r in &t.ops_per_sec[..3] {
            assert!((r - 1000.0).abs() < 1e-6, "{t:?}");
        }
        assert!((t.ops_per_sec[3] - 2000.0).abs() < 1e-6, "{t:?}");
        // Short runs get 0.1 s buckets.
        assert_eq!(s.timeline().interval_s, 0.1);
        assert!(Samples::default().timeline().ops_per_sec.is_empty());
    }

    #[test]
    fn sampler_stops_when_the_workers_finish() {
        let counters: Vec<Counter> = (0..2).map(|_| Counter::default()).collect();
        let (tx, rx) = std::sync::mpsc::channel();
        let start = Instant::now();
        let s = std::thread::scope(|sc| {
            let h = sc.spawn(|| sample(&counters, rx, start, "test", Goal::Ops(10)));
            counters[0].publish(3);
            counters[1].publish(4);
            drop(tx);
            h.join().unwrap()
        });
        // The last sample is taken after the workers are done: it has every operation.
        assert_eq!(s.points.last().unwrap().1, 7, "{:?}", s.points);
    }
}
