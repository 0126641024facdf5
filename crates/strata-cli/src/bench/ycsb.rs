//! YCSB's core workloads A-F (as its `workloads/workload[a-f]` files define them) and the
//! shared state of their inserts.
//!
//! | workload | operations | request distribution |
//! |---|---|---|
//! | A | 50% read, 50% update | zipfian |
//! | B | 95% read, 5% update | zipfian |
//! | C | 100% read | zipfian |
//! | D | 95% read, 5% insert | latest |
//! | E | 95% scan (length uniform in 1..=100), 5% insert | zipfian |
//! | F | 50% read, 50% read-modify-write | zipfian |
//!
//! An update or insert writes a whole value of `--value-size` bytes (YCSB's records are 10
//! fields of 100 bytes: `--value-size 1000` matches them). Inserts take the next record
//! number, growing the key space; reads only pick records whose insert has completed.

use super::dist::RequestDist;
use super::record::KINDS;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

pub const READ: usize = 0;
pub const UPDATE: usize = 1;
pub const INSERT: usize = 2;
pub const SCAN: usize = 3;
pub const RMW: usize = 4;

/// YCSB's `maxscanlength` default.
pub const MAX_SCAN_LENGTH: u64 = 100;

/// Proportions of each kind of operation (in [`KINDS`] order) and the request distribution.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Spec {
    pub proportions: [f64; 5],
    pub dist: RequestDist,
}

impl Spec {
    /// The workload of that letter ('a'..='f').
    pub fn of(letter: char) -> Option<Spec> {
        let (p, dist) = match letter {
            'a' => ([0.5, 0.5, 0.0, 0.0, 0.0], RequestDist::Zipfian),
            'b' => ([0.95, 0.05, 0.0, 0.0, 0.0], RequestDist::Zipfian),
            'c' => ([1.0, 0.0, 0.0, 0.0, 0.0], RequestDist::Zipfian),
            'd' => ([0.95, 0.0, 0.05, 0.0, 0.0], RequestDist::Latest),
            'e' => ([0.0, 0.0, 0.05, 0.95, 0.0], RequestDist::Zipfian),
            'f' => ([0.5, 0.0, 0.0, 0.0, 0.5], RequestDist::Zipfian),
            _ => return None,
        };
        Some(Spec {
            proportions: p,
            dist,
        })
    }

    /// The kind of operation for a uniform draw `u` in [0, 1).
    pub fn pick(&self, u: f64) -> usize {
        let mut acc = 0.0;
        let mut last = 0;
        for (i, &p) in self.proportions.iter().enumerate() {
            if p <= 0.0 {
                continue;
            }
            acc += p;
            last = i;
            if u < acc {
                return i;
            }
        }
        last
    }

    pub fn insert_share(&self) -> f64 {
        self.proportions[INSERT]
    }

    /// "50% read, 50% update".
    pub fn describe(&self) -> String {
        let parts: Vec<String> = self
            .proportions
            .iter()
            .zip(KINDS)
            .filter(|(p, _)| **p > 0.0)
            .map(|(p, k)| format!("{:.0}% {k}", p * 100.0))
            .collect();
        format!("{}, {}", parts.join(", "), self.dist.name())
    }
}

/// Record numbers handed out to inserts, and how many records are known to exist.
///
/// Records `[0, readable)` all exist: `readable` is the lowest record whose insert is still
/// in flight, or the next record number when none is (YCSB's acknowledged counter).
pub struct Inserts {
    readable: AtomicU64,
    state: Mutex<InsertState>,
}

struct InsertState {
    next: u64,
    in_flight: Vec<Option<u64>>,
}

impl Inserts {
    /// `records` exist; `threads` may insert.
    pub fn new(records: u64, threads: usize) -> Inserts {
        Inserts {
            readable: AtomicU64::new(records),
            state: Mutex::new(InsertState {
                next: records,
                in_flight: vec![None; threads],
            }),
        }
    }

    /// How many records reads may pick from.
    pub fn readable(&self) -> u64 {
        self.readable.load(Ordering::Acquire)
    }

    /// Takes the next record number for `thread` to insert.
    pub fn begin(&self, thread: usize) -> u64 {
        let mut s = self.state.lock();
        let k = s.next;
        s.next += 1;
        s.in_flight[thread] = Some(k);
        k
    }

    /// `thread`'s insert is done (its record can be read).
    pub fn end(&self, thread: usize) {
        let mut s = self.state.lock();
        s.in_flight[thread] = None;
        let low = s
            .in_flight
            .iter()
            .flatten()
            .min()
            .copied()
            .unwrap_or(s.next);
        self.readable.store(low, Ordering::Release);
    }

    /// Record numbers handed out so far (the key space after the run).
    pub fn next(&self) -> u64 {
        self.state.lock().next
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::keys::Rng;

    #[test]
    fn specs_follow_ycsb() {
        let a = Spec::of('a').unwrap();
        assert_eq!(a.describe(), "50% read, 50% update, zipfian");
        assert_eq!(
            Spec::of('d').unwrap().describe(),
            "95% read, 5% insert, latest"
        );
        assert_eq!(
            Spec::of('e').unwrap().describe(),
            "5% insert, 95% scan, zipfian"
        );
        assert_eq!(
            Spec::of('f').unwrap().describe(),
            "50% read, 50% rmw, zipfian"
        );
        assert!(Spec::of('g').is_none());
        for l in 'a'..='f' {
            let s: f64 = Spec::of(l).unwrap().proportions.iter().sum();
            assert!((s - 1.0).abs() < 1e-12, "{l}");
        }
    }

    #[test]
    fn picks_follow_the_proportions() {
        let mut rng = Rng::new(2);
        for l in 'a'..='f' {
            let spec = Spec::of(l).unwrap();
            let mut counts = [0u32; 5];
            for _ in 0..100_000 {
                counts[spec.pick(rng.unit())] += 1;
            }
            for (k, &p) in spec.proportions.iter().enumerate() {
                let share = counts[k] as f64 / 100_000.0;
                assert!((share - p).abs() < 0.01, "{l}: kind {k} {share} vs {p}");
            }
        }
        // The top edge never picks a kind with no share.
        assert_eq!(Spec::of('c').unwrap().pick(0.999_999_9), READ);
        assert_eq!(Spec::of('e').unwrap().pick(0.999_999_9), SCAN);
    }

    #[test]
    fn readable_waits_for_in_flight_inserts() {
        let ins = Inserts::new(10, 2);
        assert_eq!(ins.readable(), 10);
        let a = ins.begin(0);
        let b = ins.begin(1);
        assert_eq!((a, b), (10, 11));
        // The later insert finishes first: record 10 is still in flight.
        ins.end(1);
        assert_eq!(ins.readable(), 10);
        ins.end(0);
        assert_eq!(ins.readable(), 12);
        assert_eq!(ins.next(), 12);
    }
}
