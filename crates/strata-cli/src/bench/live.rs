//! Which keys are live during a run, for the live user bytes behind space amplification.

use std::sync::atomic::{AtomicU64, Ordering};

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
}
