//! Key access tracking for OBJECT FREQ and OBJECT IDLETIME (Redis's per-object `lru` field).
//!
//! Redis keeps, in every value object, the time of its last access and, under an LFU
//! `maxmemory-policy`, an 8-bit logarithmic access counter (`evict.c`): a new key starts at
//! [`LFU_INIT_VAL`]; an access first decays the counter by one per `lfu-decay-time` minutes
//! elapsed since the last access, then increments it with probability
//! `1 / ((counter - LFU_INIT_VAL) * lfu-log-factor + 1)`, saturating at 255.
//!
//! Here the state lives in one bounded side table, not beside the records: a fixed array of
//! 64-bit words, direct-mapped by a hash of (database, key). A word packs a tag of the hash
//! (which key holds the slot), the last access in Unix seconds, and the counter. Tracking
//! both always (whatever the policy) costs one relaxed load and one relaxed store per
//! access, with no lock and no allocation; the counter's random draw comes from the server's
//! one generator (`random.rs`), needed only once the counter is above its initial value.
//!
//! **The deviation.** Two keys hashed to one slot take turns: the one that is not in the
//! slot is untracked and reports what a fresh key would (counter [`LFU_INIT_VAL`], idle 0);
//! its next access starts it again as a fresh key. Concurrent accesses of one key may lose an
//! increment (the load and store are not one atomic step), as Redis's approximate counter
//! may. `docs/design.md` §13.7 sizes the table.
//!
//! Layer: store and types (above configuration; no services, commands or execution).

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use xxhash_rust::xxh3::xxh3_64_with_seed;

/// Redis's `LFU_INIT_VAL`: the counter of a new key.
pub const LFU_INIT_VAL: u8 = 5;

/// Slots for each byte of hot-tier budget (one per 256 bytes: a cached record weighs at
/// least 64 bytes plus its key and value), clamped to [`MIN_SLOTS`, `MAX_SLOTS`].
const BYTES_PER_SLOT: u64 = 256;
const MIN_SLOTS: usize = 1 << 12;
const MAX_SLOTS: usize = 1 << 22;

/// A word: tag (24 bits, never 0 in a used slot) | last access, Unix seconds (32) | counter (8).
fn pack(tag: u64, secs: u32, counter: u8) -> u64 {
    (tag << 40) | (u64::from(secs) << 8) | u64::from(counter)
}

fn unpack(w: u64) -> (u64, u32, u8) {
    (w >> 40, (w >> 8) as u32, w as u8)
}

/// Redis's `LFUDecrAndReturn`: `counter` less one per `decay_time` minutes elapsed
/// (`decay_time` 0: no decay).
pub fn decay(counter: u8, elapsed_min: u64, decay_time: u32) -> u8 {
    if decay_time == 0 {
        return counter;
    }
    let periods = elapsed_min / u64::from(decay_time);
    counter.saturating_sub(periods.min(255) as u8)
}

/// Redis's `LFULogIncr`: `counter` plus one if `r` (uniform in [0, 1]) falls under
/// `1 / ((counter - LFU_INIT_VAL) * log_factor + 1)`; 255 stays.
pub fn log_incr(counter: u8, log_factor: u32, r: f64) -> u8 {
    if counter == 255 {
        return 255;
    }
    let base = f64::from(counter.saturating_sub(LFU_INIT_VAL));
    let p = 1.0 / (base * f64::from(log_factor) + 1.0);
    if r < p {
        counter + 1
    } else {
        counter
    }
}

/// A uniform draw in [0, 1).
fn random() -> f64 {
    crate::random::unit()
}

/// The access table (see the module comment).
pub struct AccessTable {
    slots: Box<[AtomicU64]>,
    mask: u64,
    /// `lfu-log-factor` and `lfu-decay-time` (CONFIG SET), read on every access.
    log_factor: AtomicU32,
    decay_time: AtomicU32,
}

/// What OBJECT FREQ and OBJECT IDLETIME report for a key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Access {
    /// The counter after the decay due now.
    pub freq: u8,
    /// Seconds since the last access.
    pub idle_secs: u64,
}

impl AccessTable {
    /// A table sized for a hot tier of `hot_bytes`.
    pub fn new(hot_bytes: u64) -> AccessTable {
        let n = ((hot_bytes / BYTES_PER_SLOT) as usize)
            .clamp(MIN_SLOTS, MAX_SLOTS)
            .next_power_of_two();
        AccessTable {
            slots: (0..n).map(|_| AtomicU64::new(0)).collect(),
            mask: n as u64 - 1,
            log_factor: AtomicU32::new(10),
            decay_time: AtomicU32::new(1),
        }
    }

    /// Sets `lfu-log-factor` and `lfu-decay-time`.
    pub fn set_params(&self, log_factor: u32, decay_time: u32) {
        self.log_factor.store(log_factor, Ordering::Relaxed);
        self.decay_time.store(decay_time, Ordering::Relaxed);
    }

    /// The slot and tag of `key` of database `db`.
    fn slot(&self, db: u8, key: &[u8]) -> (&AtomicU64, u64) {
        let h = xxh3_64_with_seed(key, u64::from(db));
        // The index takes the low bits, the tag the top 24 (at most 22 bits of index, so
        // they do not overlap); a tag is never 0, the empty slot's.
        let tag = (h >> 40).max(1);
        (&self.slots[(h & self.mask) as usize], tag)
    }

    /// Reads the slots of `keys` of database `db` ahead of the commands that will touch them.
    /// Each slot is one likely cache miss in a table of megabytes; a pipelined run touches
    /// its keys' slots one command at a time, each miss waiting in turn (5.7% of a P16 SET's
    /// CPU). Independent loads issued back to back wait together instead. A plain load, not
    /// a prefetch instruction: the server has no `unsafe` code.
    pub fn warm<'a>(&self, db: u8, keys: impl Iterator<Item = &'a [u8]>) {
        let mut acc = 0u64;
        for k in keys {
            acc ^= self.slot(db, k).0.load(Ordering::Relaxed);
        }
        std::hint::black_box(acc);
    }

    /// The counter and idle time of a tracked word at `now_secs`, without changing it.
    fn read(&self, w: u64, tag: u64, now_secs: u32) -> Option<Access> {
        let (t, secs, counter) = unpack(w);
        if t != tag {
            return None;
        }
        let elapsed = now_secs.saturating_sub(secs);
        Some(Access {
            freq: decay(
                counter,
                u64::from(now_secs / 60).saturating_sub(u64::from(secs / 60)),
                self.decay_time.load(Ordering::Relaxed),
            ),
            idle_secs: u64::from(elapsed),
        })
    }

    /// Notes an access of `key` at `now_ms` (Redis's `lookupKey` without `LOOKUP_NOTOUCH`):
    /// decays and increments its counter and restarts its idle time. An untracked key
    /// starts as a fresh one.
    pub fn touch(&self, db: u8, key: &[u8], now_ms: u64) {
        let now = (now_ms / 1000) as u32;
        let (slot, tag) = self.slot(db, key);
        let counter = self
            .read(slot.load(Ordering::Relaxed), tag, now)
            .map_or(LFU_INIT_VAL, |a| a.freq);
        let counter = if counter <= LFU_INIT_VAL {
            // Probability 1: no draw.
            counter + 1
        } else {
            log_incr(counter, self.log_factor.load(Ordering::Relaxed), random())
        };
        slot.store(pack(tag, now, counter), Ordering::Relaxed);
    }

    /// Notes an access of `key` at `now_ms` if it is tracked: a blind overwrite (a write
    /// without a lookup), which Redis's `setKey` counts as an access of an existing key. A
    /// tracked key exists, or expired without being deleted yet (the slot is cleared when
    /// it is deleted).
    pub fn touch_tracked(&self, db: u8, key: &[u8], now_ms: u64) {
        let (slot, tag) = self.slot(db, key);
        if unpack(slot.load(Ordering::Relaxed)).0 == tag {
            self.touch(db, key, now_ms);
        }
    }

    /// Notes that `key` was written at `now_ms`: a key not tracked yet starts as a fresh
    /// one (a new key's object in Redis); a tracked one keeps its counter (Redis's
    /// `dbSetValue` carries it over; the write's own lookup has touched it).
    pub fn written(&self, db: u8, key: &[u8], now_ms: u64) {
        let (slot, tag) = self.slot(db, key);
        if unpack(slot.load(Ordering::Relaxed)).0 != tag {
            slot.store(
                pack(tag, (now_ms / 1000) as u32, LFU_INIT_VAL),
                Ordering::Relaxed,
            );
        }
    }

    /// The tracked state of `key` (last access, counter), for [`AccessTable::carry`].
    pub fn state(&self, db: u8, key: &[u8]) -> Option<(u32, u8)> {
        let (slot, tag) = self.slot(db, key);
        let (t, secs, counter) = unpack(slot.load(Ordering::Relaxed));
        (t == tag).then_some((secs, counter))
    }

    /// Gives `key` the state another key had (RENAME and MOVE move the object, and with it
    /// its counter and access time); `None`: untracked, nothing to carry.
    pub fn carry(&self, db: u8, key: &[u8], state: Option<(u32, u8)>) {
        if let Some((secs, counter)) = state {
            let (slot, tag) = self.slot(db, key);
            slot.store(pack(tag, secs, counter), Ordering::Relaxed);
        }
    }

    /// Forgets `key` (deleted or expired), so that a key created again under its name
    /// starts fresh.
    pub fn forget(&self, db: u8, key: &[u8]) {
        let (slot, tag) = self.slot(db, key);
        if unpack(slot.load(Ordering::Relaxed)).0 == tag {
            slot.store(0, Ordering::Relaxed);
        }
    }

    /// What OBJECT FREQ and OBJECT IDLETIME report for `key` at `now_ms`: an untracked key
    /// reports a fresh key's values.
    pub fn get(&self, db: u8, key: &[u8], now_ms: u64) -> Access {
        let (slot, tag) = self.slot(db, key);
        self.read(slot.load(Ordering::Relaxed), tag, (now_ms / 1000) as u32)
            .unwrap_or(Access {
                freq: LFU_INIT_VAL,
                idle_secs: 0,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_increment_probability() {
        // At or below the initial value: certain.
        assert_eq!(log_incr(0, 10, 0.999), 1);
        assert_eq!(log_incr(5, 10, 0.999), 6);
        // At 6 with factor 10: p = 1/11.
        assert_eq!(log_incr(6, 10, 1.0 / 11.0 - 1e-9), 7);
        assert_eq!(log_incr(6, 10, 1.0 / 11.0 + 1e-9), 6);
        // At 105 with factor 10: p = 1/1001.
        assert_eq!(log_incr(105, 10, 0.0009), 106);
        assert_eq!(log_incr(105, 10, 0.0011), 105);
        // Factor 0: always.
        assert_eq!(log_incr(200, 0, 0.999), 201);
        // Saturates.
        assert_eq!(log_incr(255, 0, 0.0), 255);
        // Averaged: the expected number of draws from 6 to 7 is 11.
        let mut c = 6u8;
        let mut n = 0;
        while c == 6 {
            c = log_incr(c, 10, random());
            n += 1;
            assert!(n < 10_000);
        }
    }

    #[test]
    fn decay_by_elapsed_periods() {
        assert_eq!(decay(10, 0, 1), 10);
        assert_eq!(decay(10, 3, 1), 7);
        assert_eq!(decay(10, 3, 2), 9);
        assert_eq!(decay(10, 100, 1), 0);
        assert_eq!(decay(10, u64::MAX, 1), 0);
        // decay-time 0: never.
        assert_eq!(decay(10, 1000, 0), 10);
    }

    #[test]
    fn table_tracks_touches_writes_and_deletes() {
        let t = AccessTable::new(0);
        t.set_params(0, 1);
        let now = 1_700_000_000_000;
        // Untracked: a fresh key's values.
        assert_eq!(
            t.get(0, b"k", now),
            Access {
                freq: 5,
                idle_secs: 0
            }
        );
        t.written(0, b"k", now);
        assert_eq!(t.get(0, b"k", now + 2500).idle_secs, 2);
        t.touch(0, b"k", now + 3000);
        t.touch(0, b"k", now + 3000);
        assert_eq!(t.get(0, b"k", now + 3000).freq, 7);
        // A write keeps the counter; another database's key is another slot's.
        t.written(0, b"k", now + 3000);
        assert_eq!(t.get(0, b"k", now + 3000).freq, 7);
        assert_eq!(t.get(1, b"k", now + 3000).freq, 5);
        // Three minutes later: decayed by 3 when read, and before the increment.
        assert_eq!(t.get(0, b"k", now + 183_000).freq, 4);
        t.touch(0, b"k", now + 183_000);
        assert_eq!(t.get(0, b"k", now + 183_000).freq, 5);
        // Saturates with factor 0.
        for _ in 0..300 {
            t.touch(0, b"k", now + 183_000);
        }
        assert_eq!(t.get(0, b"k", now + 183_000).freq, 255);
        t.forget(0, b"k");
        assert_eq!(t.get(0, b"k", now + 183_000).freq, 5);
        t.written(0, b"k", now + 183_000);
        assert_eq!(t.get(0, b"k", now + 183_000).freq, 5);
    }
}
