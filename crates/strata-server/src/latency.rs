//! The latency monitor (Redis's latency.c): per event ("command", "fast-command"), the
//! latest 160 samples of at least `latency-monitor-threshold` milliseconds, one per
//! second (the largest of that second), and the largest ever. LATENCY LATEST, HISTORY and
//! RESET read it (`cmd/latency.rs`).
//!
//! Events are kept in name order (Redis: its hash table's order, unspecified).
//!
//! Layer: services (above store and types; below commands).

use parking_lot::Mutex;
use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};

/// Samples kept per event (Redis's `LATENCY_TS_LEN`).
pub const SAMPLES: usize = 160;

/// One event's samples: (unix seconds, milliseconds), oldest first.
#[derive(Default, Clone)]
pub struct Series {
    pub samples: VecDeque<(u64, u64)>,
    pub max: u64,
}

#[derive(Default)]
pub struct Monitor {
    events: Mutex<BTreeMap<String, Series>>,
    /// `latency-monitor-threshold` in milliseconds (0: off), kept here so that the
    /// dispatcher reads one atomic per command instead of the configuration.
    threshold_ms: AtomicU64,
    /// Per-command latency histograms (`latency-tracking`; `latency_histogram.rs`).
    pub histograms: crate::latency_histogram::Histograms,
}

impl Monitor {
    /// Sets `latency-monitor-threshold` from its configured text (0 when not a number).
    pub fn set_threshold(&self, value: Option<&str>) {
        let ms = value.and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        self.threshold_ms.store(ms, Ordering::Relaxed);
    }

    /// Sets `latency-tracking` from its configured text (`yes` unless `no`).
    pub fn set_tracking(&self, value: Option<&str>) {
        self.histograms
            .set_enabled(!value.is_some_and(|v| v.eq_ignore_ascii_case("no")));
    }

    /// `latency-monitor-threshold` in milliseconds; 0 while the monitor is off.
    pub fn threshold_ms(&self) -> u64 {
        self.threshold_ms.load(Ordering::Relaxed)
    }

    /// Records `ms` for `event` at `now_s` (Redis's `latencyAddSample`).
    pub fn add(&self, event: &str, now_s: u64, ms: u64) {
        let mut m = self.events.lock();
        let s = m.entry(event.to_string()).or_default();
        s.max = s.max.max(ms);
        if let Some(last) = s.samples.back_mut() {
            if last.0 == now_s {
                last.1 = last.1.max(ms);
                return;
            }
        }
        if s.samples.len() == SAMPLES {
            s.samples.pop_front();
        }
        s.samples.push_back((now_s, ms));
    }

    /// Every event with its samples, in name order.
    pub fn snapshot(&self) -> Vec<(String, Series)> {
        self.events
            .lock()
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    pub fn history(&self, event: &[u8]) -> Option<Series> {
        let name = std::str::from_utf8(event).ok()?;
        self.events.lock().get(name).cloned()
    }

    /// Forgets the events named (all when `None`); how many there were.
    pub fn reset(&self, events: Option<&[&[u8]]>) -> usize {
        let mut m = self.events.lock();
        match events {
            None => {
                let n = m.len();
                m.clear();
                n
            }
            Some(names) => names
                .iter()
                .filter(|n| {
                    std::str::from_utf8(n)
                        .ok()
                        .and_then(|n| m.remove(n))
                        .is_some()
                })
                .count(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_sample_per_second_the_largest_and_at_most_160() {
        let m = Monitor::default();
        m.add("command", 10, 5);
        m.add("command", 10, 3);
        m.add("command", 10, 8);
        m.add("command", 11, 2);
        let s = m.history(b"command").unwrap();
        assert_eq!(Vec::from(s.samples), vec![(10, 8), (11, 2)]);
        assert_eq!(s.max, 8);
        for t in 0..200 {
            m.add("fast-command", 100 + t, t);
        }
        let s = m.history(b"fast-command").unwrap();
        assert_eq!(s.samples.len(), SAMPLES);
        assert_eq!(s.samples.front(), Some(&(140, 40)));
        assert_eq!(m.reset(Some(&[b"command", b"nosuch"])), 1);
        assert_eq!(m.reset(None), 1);
        assert!(m.snapshot().is_empty());
    }
}
