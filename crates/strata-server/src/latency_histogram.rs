//! Per-command latency histograms (Redis 7's `latency-tracking`): every command that ran is
//! recorded, in nanoseconds, in an HDR histogram of its command (1 ns to 1 s, 2 significant
//! digits, as Redis's), read by LATENCY HISTOGRAM and INFO latencystats.
//!
//! **Protocol.** Recording must not serialize the connections: each thread records into its
//! own map (command → histogram) behind its own mutex, which only a reader (LATENCY
//! HISTOGRAM, INFO, CONFIG RESETSTAT) ever contends for. The maps are registered with the
//! [`Histograms`] they belong to the first time a thread records, and a read merges them.
//! A thread-local list finds this thread's map per [`Histograms`] (a process may run
//! several servers, as the tests do).
//!
//! Layer: services (above store and types; below commands).

use hdrhistogram::Histogram;
use parking_lot::Mutex;
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

/// Redis's `LATENCY_HISTOGRAM_MIN_VALUE` / `MAX_VALUE` (ns) and precision.
const MIN_NS: u64 = 1;
const MAX_NS: u64 = 1_000_000_000;
const SIGFIG: u8 = 2;

type Map = HashMap<&'static str, Histogram<u64>>;
type Shard = Arc<Mutex<Map>>;

static NEXT_ID: AtomicUsize = AtomicUsize::new(1);

thread_local! {
    /// This thread's map for each [`Histograms`], by its id.
    static LOCAL: RefCell<Vec<(usize, Shard)>> = const { RefCell::new(Vec::new()) };
}

/// Every thread's histograms of one server.
pub struct Histograms {
    id: usize,
    /// `latency-tracking`.
    enabled: AtomicBool,
    shards: Mutex<Vec<Shard>>,
}

impl Default for Histograms {
    fn default() -> Self {
        Histograms {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            enabled: AtomicBool::new(true),
            shards: Mutex::new(Vec::new()),
        }
    }
}

fn new_histogram() -> Option<Histogram<u64>> {
    Histogram::new_with_bounds(MIN_NS, MAX_NS, SIGFIG).ok()
}

impl Histograms {
    /// `latency-tracking yes|no`.
    pub fn set_enabled(&self, on: bool) {
        self.enabled.store(on, Ordering::Relaxed);
    }

    /// Command `name` ran for `micros` microseconds (Redis records `duration*1000` ns,
    /// within the histogram's bounds).
    pub fn record(&self, name: &'static str, micros: u64) {
        if !self.enabled.load(Ordering::Relaxed) {
            return;
        }
        let ns = micros.saturating_mul(1000).clamp(MIN_NS, MAX_NS);
        LOCAL.with(|l| {
            let mut l = l.borrow_mut();
            let at = match l.iter().position(|(id, _)| *id == self.id) {
                Some(at) => at,
                None => {
                    let s: Shard = Arc::default();
                    self.shards.lock().push(s.clone());
                    l.push((self.id, s));
                    l.len() - 1
                }
            };
            // Recorded through the thread's own reference: no reference count touched.
            let mut m = l[at].1.lock();
            if let Some(h) = m.get_mut(name) {
                let _ = h.record(ns);
            } else if let Some(mut h) = new_histogram() {
                let _ = h.record(ns);
                m.insert(name, h);
            }
        });
    }

    /// Every command's histogram, merged over the threads, in name order.
    pub fn merged(&self) -> BTreeMap<&'static str, Histogram<u64>> {
        let shards = self.shards.lock().clone();
        let mut out: BTreeMap<&'static str, Histogram<u64>> = BTreeMap::new();
        for s in shards {
            for (name, h) in s.lock().iter() {
                match out.get_mut(name) {
                    Some(o) => {
                        let _ = o.add(h);
                    }
                    None => {
                        out.insert(name, h.clone());
                    }
                }
            }
        }
        out.retain(|_, h| !h.is_empty());
        out
    }

    /// CONFIG RESETSTAT.
    pub fn reset(&self) {
        for s in self.shards.lock().iter() {
            s.lock().clear();
        }
    }
}

/// LATENCY HISTOGRAM's buckets (Redis's `fillCommandCDF`): walking powers of two from
/// 1024 ns, each level reports the microseconds of its bucket's highest equivalent value and
/// the count of values up to it, when that count grew.
pub fn cdf(h: &Histogram<u64>) -> Vec<(u64, u64)> {
    let total = h.len();
    let recorded: Vec<(u64, u64)> = h
        .iter_recorded()
        .map(|v| {
            (
                h.lowest_equivalent(v.value_iterated_to()),
                v.count_at_value(),
            )
        })
        .collect();
    let mut out = Vec::new();
    let (mut level, mut previous) = (1024u64, 0u64);
    while previous < total {
        let cumulative: u64 = recorded
            .iter()
            .filter(|(low, _)| *low <= level)
            .map(|(_, c)| *c)
            .sum();
        if cumulative > previous {
            out.push((h.highest_equivalent(level) / 1000, cumulative));
        }
        previous = cumulative;
        match level.checked_mul(2) {
            Some(l) => level = l,
            None => break,
        }
    }
    out
}

/// The value at `percentile` (0-100) in microseconds (Redis's `hdr_value_at_percentile`
/// / 1000: the highest equivalent value of the bucket reaching that share of the count).
pub fn percentile_usec(h: &Histogram<u64>, percentile: f64) -> f64 {
    let p = percentile.min(100.0);
    let wanted = ((p / 100.0) * h.len() as f64 + 0.5) as u64;
    let wanted = wanted.max(1);
    let mut seen = 0;
    for v in h.iter_recorded() {
        seen += v.count_at_value();
        if seen >= wanted {
            return h.highest_equivalent(v.value_iterated_to()) as f64 / 1000.0;
        }
    }
    0.0
}

/// Parses `latency-tracking-info-percentiles` ("50 99 99.9"); `None` if a value is not a
/// number within 0-100.
pub fn parse_percentiles(s: &str) -> Option<Vec<f64>> {
    s.split_whitespace()
        .map(|p| p.parse::<f64>().ok().filter(|v| (0.0..=100.0).contains(v)))
        .collect()
}

/// A percentile as Redis names it in INFO (`%f` with trailing zeros trimmed: `99.9`, `50`).
pub fn percentile_name(p: f64) -> String {
    let s = format!("{p:.6}");
    let s = s.trim_end_matches('0');
    s.trim_end_matches('.').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_record_apart_and_merge() {
        let h = Arc::new(Histograms::default());
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let h = h.clone();
                std::thread::spawn(move || {
                    for us in [1, 2, 3, 100] {
                        h.record("get", us);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        h.record("set", 5);
        let m = h.merged();
        assert_eq!(m.keys().copied().collect::<Vec<_>>(), vec!["get", "set"]);
        assert_eq!(m["get"].len(), 16);
        h.set_enabled(false);
        h.record("set", 5);
        assert_eq!(h.merged()["set"].len(), 1);
        h.reset();
        assert!(h.merged().is_empty());
    }

    #[test]
    fn cdf_and_percentiles_as_redis() {
        let mut h = new_histogram().unwrap();
        for us in [1u64, 1, 1, 2, 33, 40] {
            h.record(us * 1000).unwrap();
        }
        // Redis's levels: 1024 ns → 1 us, 2048 → 2, ..., 32768 → 33 (33023 ns), 65536 → 66.
        assert_eq!(cdf(&h), vec![(1, 3), (2, 4), (33, 5), (66, 6)]);
        assert_eq!(percentile_usec(&h, 50.0), 1.003);
        assert_eq!(percentile_usec(&h, 100.0), 40.191);
        assert_eq!(percentile_name(99.9), "99.9");
        assert_eq!(percentile_name(50.0), "50");
        assert_eq!(
            parse_percentiles("50 99 99.9"),
            Some(vec![50.0, 99.0, 99.9])
        );
        assert_eq!(parse_percentiles("50 101"), None);
    }
}
