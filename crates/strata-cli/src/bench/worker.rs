//! One benchmark thread's tools ([`Worker`]): its key and value generators, its
//! measurements, its operation budget, the pacing of `--rate` and the puts in flight of
//! `--async`.

use super::engine::Engine;
use super::keys::{KeyGen, Rng, ValueGen};
use super::live::LiveKeys;
use super::record::ThreadStats;
use super::timeline::Counter;
use crate::text::to_hex;
use anyhow::{Context, Result};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Stops a thread's loop after its operations, or at the `--duration` deadline.
pub(super) struct Budget {
    pub(super) left: u64,
    pub(super) deadline: Option<Instant>,
    pub(super) n: u32,
}

impl Budget {
    #[inline]
    pub(super) fn more(&mut self) -> bool {
        if let Some(d) = self.deadline {
            self.n = self.n.wrapping_add(1);
            return self.n % 16 != 1 || Instant::now() < d;
        }
        if self.left == 0 {
            return false;
        }
        self.left -= 1;
        true
    }
}

/// One thread's tools while it runs a benchmark.
pub(super) struct Worker<'a> {
    pub(super) thread: usize,
    pub(super) rng: Rng,
    pub(super) values: ValueGen,
    pub(super) keys: KeyGen,
    pub(super) stats: ThreadStats,
    pub(super) stop: &'a AtomicBool,
    pub(super) counter: &'a Counter,
    pub(super) live: Option<&'a LiveKeys>,
    /// `--duration` deadline, for the benchmarks that honour it.
    pub(super) deadline: Option<Instant>,
    /// `--rate`: when the next operation is due.
    pub(super) pacer: Option<Pacer>,
    /// `--async`: the puts in flight and their latencies.
    pub(super) asyncs: Option<Arc<AsyncPuts>>,
}

/// Issues one thread's operations at a fixed rate (`--rate`). Each operation's latency counts
/// from when it was due, so time spent queued behind a slow store is measured.
pub(super) struct Pacer {
    pub(super) interval: Duration,
    pub(super) next: Instant,
}

impl Pacer {
    /// Waits until the next operation is due and returns when that was.
    pub(super) fn wait(&mut self) -> Instant {
        let due = self.next;
        self.next += self.interval;
        let now = Instant::now();
        if due > now {
            let left = due - now;
            // Sleep most of the wait (timers overshoot by tens of microseconds), yield the rest.
            if left > Duration::from_micros(80) {
                std::thread::sleep(left - Duration::from_micros(60));
            }
            while Instant::now() < due {
                std::thread::yield_now();
            }
        }
        due
    }
}

/// One thread's asynchronous puts (`--async`): completions come on the store's threads.
pub(super) struct AsyncPuts {
    pub(super) in_flight: AtomicU64,
    pub(super) hist: parking_lot::Mutex<hdrhistogram::Histogram<u64>>,
    pub(super) error: parking_lot::Mutex<Option<anyhow::Error>>,
    pub(super) depth: u64,
}

impl AsyncPuts {
    pub(super) fn complete(&self, t0: Instant, r: Result<()>) {
        let ns = t0.elapsed().as_nanos().min(u64::MAX as u128) as u64;
        self.hist.lock().saturating_record(ns.max(1));
        if let Err(e) = r {
            self.error.lock().get_or_insert(e);
        }
        self.in_flight.fetch_sub(1, Ordering::AcqRel);
    }

    /// Waits until fewer than `limit` puts are in flight.
    pub(super) fn wait_below(&self, limit: u64) {
        while self.in_flight.load(Ordering::Acquire) >= limit {
            std::thread::yield_now();
        }
    }

    pub(super) fn take_error(&self) -> Result<()> {
        match self.error.lock().take() {
            Some(e) => Err(e.context("asynchronous put failed")),
            None => Ok(()),
        }
    }
}

impl Worker<'_> {
    /// When the next operation starts: now, or with `--rate` when it is due (after waiting).
    #[inline]
    pub(super) fn pace(&mut self) -> Instant {
        match &mut self.pacer {
            Some(p) => p.wait(),
            None => Instant::now(),
        }
    }

    /// `--async`: waits for every put in flight and folds their latencies into the stats.
    pub(super) fn finish_async(&mut self) -> Result<()> {
        if let Some(a) = self.asyncs.take() {
            a.wait_below(1);
            self.stats
                .hist
                .add(&*a.hist.lock())
                .context("merging asynchronous latencies")?;
            a.take_error()?;
        }
        Ok(())
    }

    /// True once another thread failed: stop early.
    pub(super) fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    pub(super) fn budget(&self, ops: u64) -> Budget {
        Budget {
            left: ops,
            deadline: self.deadline,
            n: 0,
        }
    }

    /// Records a batch of lookups of `keys` started at `t0`, whose results are `values` in
    /// the keys' order: the keys found and their bytes.
    pub(super) fn record_lookups<'v>(
        &mut self,
        t0: Instant,
        keys: &[&[u8]],
        values: impl Iterator<Item = &'v Option<Vec<u8>>>,
    ) {
        let mut bytes = 0;
        for (k, v) in keys.iter().zip(values) {
            if let Some(v) = v {
                self.stats.found += 1;
                bytes += (k.len() + v.len()) as u64;
            }
        }
        self.stats.lookups += keys.len() as u64;
        self.record(t0, keys.len() as u64, bytes);
    }

    #[inline]
    pub(super) fn record(&mut self, t0: Instant, ops: u64, bytes: u64) {
        self.stats.record(t0, ops, bytes);
        self.counter.publish(self.stats.done);
    }

    #[inline]
    pub(super) fn record_kind(&mut self, t0: Instant, kind: usize, bytes: u64) {
        self.stats.record_kind(t0, kind, bytes);
        self.counter.publish(self.stats.done);
    }

    /// Writes db_bench key `i` with the next value.
    pub(super) fn put_key(&mut self, e: &impl Engine, key: &mut [u8], i: u64) -> Result<()> {
        self.keys.fill(i, key);
        put_one(e, self, key)?;
        if let Some(l) = self.live {
            l.put(i);
        }
        Ok(())
    }
}

/// The generator and values of thread `t` of benchmark `index`: a function so that tests
/// can replay which keys a benchmark used.
pub fn thread_rng(
    seed: u64,
    index: usize,
    t: usize,
    (min, max): (usize, usize),
) -> (Rng, ValueGen) {
    let mut rng = Rng::for_thread(seed, index, t);
    let values = ValueGen::new(min, max, &mut rng);
    (rng, values)
}

/// One timed put of `key` with the worker's next value.
#[inline]
pub(super) fn put_one(e: &impl Engine, w: &mut Worker, key: &[u8]) -> Result<()> {
    let t0 = w.pace();
    let value = w.values.next_value();
    let bytes = (key.len() + value.len()) as u64;
    if let Some(a) = &w.asyncs {
        a.wait_below(a.depth);
        a.in_flight.fetch_add(1, Ordering::AcqRel);
        let done = a.clone();
        e.put_async(key, value, Box::new(move |r| done.complete(t0, r)));
        a.take_error()?;
        w.stats.written += bytes;
        w.stats.done += 1;
        w.stats.bytes += bytes;
        w.counter.publish(w.stats.done);
        return Ok(());
    }
    e.put(key, value)
        .with_context(|| format!("put of key {} failed", to_hex(key)))?;
    w.stats.written += bytes;
    w.record(t0, 1, bytes);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budget_counts_operations() {
        let mut b = Budget {
            left: 3,
            deadline: None,
            n: 0,
        };
        let mut n = 0;
        while b.more() {
            n += 1;
        }
        assert_eq!(n, 3);
        // A deadline in the past stops at the first check.
        let mut b = Budget {
            left: 0,
            deadline: Some(Instant::now()),
            n: 0,
        };
        assert!(!b.more());
    }
}
