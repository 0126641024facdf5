//! Active expiry: the index of keys with a TTL and the background cycle that deletes expired
//! keys nobody reads (Redis's `activeExpireCycle`, expire.c, adapted).
//!
//! **Why an index.** Redis samples its `expires` dict, which holds only keys with a TTL. The
//! store keeps expiries inside the metadata records, so sampling the store would mostly find
//! keys without one. [`ExpiryIndex`] is that dict's stand-in: per database, the user keys
//! that have an expiry and the expiry itself, in memory. It is rebuilt when the store opens
//! by one scan of the metadata records ([`crate::store::Store::open`]) and maintained by
//! the store itself: every write through the store ([`crate::store::Tx::put`], `delete`,
//! `write_many`, lazy expiry, FLUSHDB) updates it after the write succeeded, so commands
//! that set, change or clear a TTL keep it current without knowing about it.
//!
//! **Protocol.** Writers update the index while holding the key's stripe lock (commands take
//! it for their read-modify-write), so under a stripe the index entry and the record agree.
//! The cycle never trusts the index: it samples entries under the index mutex, releases it,
//! and for each entry whose indexed expiry has passed takes the key's stripe lock and
//! re-reads the record ([`crate::store::Store::expire_if_due`]); only a record that is
//! itself expired is deleted (a concurrent SET may have replaced the key). Lock order:
//! stripe, then index mutex; the cycle never holds the index mutex while taking a stripe.
//!
//! **The cycle** ([`active_expire_cycle`]) runs 10 times a second (Redis's default `hz`):
//! for each database with indexed keys it samples up to 20 entries, deletes those that are
//! due, and samples again while more than a quarter of the sample was expired (Redis up to
//! 5.0; 6.0 made the threshold tunable). A cycle stops after [`CYCLE_BUDGET`] (a quarter of
//! the 100 ms period, Redis's 25% CPU limit); the next cycle starts at the database it
//! stopped in. INFO reports `expired_keys`, `expired_stale_perc` (a running estimate of the
//! share of due keys among those sampled) and `expired_time_cap_reached_count`.
//!
//! Layer: store and types (above configuration; no services, commands or execution).

use crate::keys::MAX_DATABASES;
use crate::store::{now_ms, Store};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Keys sampled per loop (Redis's `ACTIVE_EXPIRE_CYCLE_KEYS_PER_LOOP`).
pub const KEYS_PER_LOOP: usize = 20;
/// Period of the cycle (Redis's default `hz 10`).
pub const PERIOD: Duration = Duration::from_millis(100);
/// Most time one cycle may take: 25% of the period.
pub const CYCLE_BUDGET: Duration = Duration::from_millis(25);

/// One database's keys with a TTL: a vector for O(1) random sampling and a map from key to
/// its place in the vector for O(1) update and swap-remove.
#[derive(Default)]
struct DbExpires {
    entries: Vec<(Vec<u8>, u64)>,
    pos: HashMap<Vec<u8>, usize>,
}

impl DbExpires {
    fn set(&mut self, key: &[u8], expire_ms: u64) {
        match self.pos.get(key) {
            Some(&i) => self.entries[i].1 = expire_ms,
            None => {
                self.pos.insert(key.to_vec(), self.entries.len());
                self.entries.push((key.to_vec(), expire_ms));
            }
        }
    }

    fn remove(&mut self, key: &[u8]) {
        let Some(i) = self.pos.remove(key) else {
            return;
        };
        self.entries.swap_remove(i);
        if let Some((moved, _)) = self.entries.get(i) {
            self.pos.insert(moved.clone(), i);
        }
    }
}

/// The keys with a TTL of every database (see the module comment).
pub struct ExpiryIndex {
    dbs: Vec<Mutex<DbExpires>>,
    /// Each database's number of indexed keys, as its map last left it.
    indexed: Vec<AtomicUsize>,
    /// Database the next cycle starts at (a cycle that ran out of time resumes there).
    next_db: AtomicUsize,
}

impl Default for ExpiryIndex {
    fn default() -> Self {
        ExpiryIndex {
            dbs: (0..MAX_DATABASES)
                .map(|_| Mutex::new(DbExpires::default()))
                .collect(),
            indexed: (0..MAX_DATABASES).map(|_| AtomicUsize::new(0)).collect(),
            next_db: AtomicUsize::new(0),
        }
    }
}

impl ExpiryIndex {
    /// Records that `key` of `db` expires at `expire_ms` (0: has no expiry any more).
    pub fn set(&self, db: u8, key: &[u8], expire_ms: u64) {
        if expire_ms == 0 {
            return self.remove(db, key);
        }
        let mut d = self.dbs[db as usize].lock();
        d.set(key, expire_ms);
        self.indexed[db as usize].store(d.entries.len(), Ordering::Release);
    }

    pub fn remove(&self, db: u8, key: &[u8]) {
        // A database without keys with a TTL (every write of a key without one, in a
        // keyspace without expiries) takes no lock: writers of one key are ordered by its
        // stripe or its shard, so an entry of `key` is seen here if it was indexed.
        if self.indexed[db as usize].load(Ordering::Acquire) == 0 {
            return;
        }
        let mut d = self.dbs[db as usize].lock();
        d.remove(key);
        self.indexed[db as usize].store(d.entries.len(), Ordering::Release);
    }

    /// Number of indexed keys of `db`.
    #[cfg(test)]
    pub fn len(&self, db: u8) -> usize {
        self.dbs[db as usize].lock().entries.len()
    }

    /// Up to `n` entries of `db`: all of them if there are at most `n`, else `n` drawn at
    /// random (with replacement).
    fn sample(&self, db: u8, n: usize) -> Vec<(Vec<u8>, u64)> {
        let d = self.dbs[db as usize].lock();
        if d.entries.len() <= n {
            return d.entries.clone();
        }
        (0..n)
            .map(|_| {
                d.entries[(crate::random::next_u64() % d.entries.len() as u64) as usize].clone()
            })
            .collect()
    }
}

/// What [`Store::expire_if_due`] found under the key's lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Due {
    /// The key was expired and is deleted now.
    Deleted,
    /// The index was stale (the key is gone, or has a later expiry or none): index fixed.
    Stale,
}

/// One run of the active expiry cycle (see the module comment); returns the number of keys
/// it deleted.
pub fn active_expire_cycle(store: &Store, budget: Duration) -> strata_engine::Result<u64> {
    let start = Instant::now();
    let index = store.expiry_index();
    let first = index.next_db.load(Ordering::Relaxed);
    let (mut deleted, mut sampled, mut hit_total) = (0, 0, 0);
    let stats = &store.stats;
    // Redis's estimate: 95% the old value, 5% this cycle's share of expired samples.
    let update_stale = |sampled: usize, hits: usize| {
        if sampled > 0 {
            let cur = hits as f64 * 100.0 / sampled as f64;
            let old = f64::from_bits(stats.expired_stale_perc.load(Ordering::Relaxed));
            let new = cur * 0.05 + old * 0.95;
            stats
                .expired_stale_perc
                .store(new.to_bits(), Ordering::Relaxed);
        }
    };
    for i in 0..MAX_DATABASES {
        let db = ((first + i) % MAX_DATABASES) as u8;
        loop {
            if start.elapsed() >= budget {
                index.next_db.store(db as usize, Ordering::Relaxed);
                stats
                    .expired_time_cap_reached
                    .fetch_add(1, Ordering::Relaxed);
                update_stale(sampled, hit_total);
                return Ok(deleted);
            }
            let sample = index.sample(db, KEYS_PER_LOOP);
            if sample.is_empty() {
                break;
            }
            let now = now_ms();
            let mut hits = 0;
            for (key, expire_ms) in &sample {
                if *expire_ms > now {
                    continue;
                }
                match store.expire_if_due(db, key)? {
                    Due::Deleted => {
                        deleted += 1;
                        hits += 1;
                    }
                    Due::Stale => hits += 1,
                }
            }
            sampled += sample.len();
            hit_total += hits;
            if hits * 4 <= sample.len() {
                break;
            }
        }
    }
    index.next_db.store(first, Ordering::Relaxed);
    update_stale(sampled, hit_total);
    Ok(deleted)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_set_remove_and_sample() {
        let ix = ExpiryIndex::default();
        for i in 0..100u32 {
            ix.set(3, &i.to_be_bytes(), u64::from(i) + 1);
        }
        assert_eq!(ix.len(3), 100);
        assert_eq!(ix.len(0), 0);
        for i in (0..100u32).step_by(2) {
            ix.remove(3, &i.to_be_bytes());
        }
        ix.set(3, &1u32.to_be_bytes(), 0); // cleared TTL leaves the index
        ix.remove(3, b"never there");
        assert_eq!(ix.len(3), 49);
        let d = ix.dbs[3].lock();
        for (k, e) in &d.entries {
            let i = u32::from_be_bytes(k[..].try_into().unwrap());
            assert!(i % 2 == 1 && i != 1 && *e == u64::from(i) + 1);
            assert_eq!(d.entries[d.pos[k]].0, *k);
        }
        drop(d);
        let s = ix.sample(3, 20);
        assert_eq!(s.len(), 20);
        assert!(s.iter().all(|(k, _)| ix.dbs[3].lock().pos.contains_key(k)));
        assert_eq!(ix.sample(0, 20).len(), 0);
    }
}
