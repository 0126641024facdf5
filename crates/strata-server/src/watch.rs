//! WATCH: which clients watch which keys, and flagging a client when one of its keys is
//! modified (Redis's `touchWatchedKey`, multi.c).
//!
//! **Protocol.** A client registers its keys while holding their stripes (WATCH's
//! dispatch takes them), so
//! a write of the keys in flight finishes first, and every write that starts later sees the
//! registration. Every write through the `Store` calls [`Watches::touch`] for the keys it
//! modified, while it still holds their stripes (or runs on their shard's worker), before its
//! stripes are released; it returns at once while nobody watches anything (one atomic
//! count). A touched client's `dirty` flag is set; EXEC takes the stripes of the watched keys
//! before it reads the flag, so no write of them slips in between the check and the queued
//! commands. The map is behind one mutex, taken only while some client watches a key.
//!
//! Layer: services (above store and types; below commands).

use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

/// Every client's watched keys.
#[derive(Default)]
pub struct Watches {
    /// Watched `(database, key)` entries over all clients; 0: [`Watches::touch`] returns at
    /// once.
    count: AtomicUsize,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    by_key: HashMap<(u8, Vec<u8>), Vec<Watch>>,
    by_client: HashMap<u64, Vec<(u8, Vec<u8>)>>,
}

/// One client watching one key.
struct Watch {
    client: u64,
    dirty: Arc<AtomicBool>,
    /// The key was logically expired when WATCH ran: its deletion (by expiry, or FLUSHDB) is
    /// no change (Redis 7.0's `watchedKey.expired`); any other write is.
    expired: bool,
}

impl Watches {
    /// Client `client` (whose flag is `dirty`) watches `key` of database `db`; `expired`:
    /// the key exists but is expired now. Watching a key twice is watching it once.
    pub fn watch(&self, client: u64, dirty: &Arc<AtomicBool>, db: u8, key: &[u8], expired: bool) {
        let mut g = self.inner.lock();
        let list = g.by_key.entry((db, key.to_vec())).or_default();
        if list.iter().any(|w| w.client == client) {
            return;
        }
        list.push(Watch {
            client,
            dirty: dirty.clone(),
            expired,
        });
        g.by_client
            .entry(client)
            .or_default()
            .push((db, key.to_vec()));
        self.count.fetch_add(1, Ordering::SeqCst);
    }

    /// `key` of `db` was modified (`deleted`: its record deleted): flags its watchers.
    pub fn touch(&self, db: u8, key: &[u8], deleted: bool) {
        if self.count.load(Ordering::SeqCst) == 0 {
            return;
        }
        let mut g = self.inner.lock();
        let Some(list) = g.by_key.get_mut(&(db, key.to_vec())) else {
            return;
        };
        for w in list {
            if w.expired && deleted {
                // An expired key deleted: logically no change. Deleted keys are not expired.
                w.expired = false;
                continue;
            }
            w.dirty.store(true, Ordering::SeqCst);
        }
    }

    /// SWAPDB swapped the logical databases of physical databases `p` and `q`: each watched
    /// key of either now names the other physical database (its client's logical database
    /// did not change), and its watchers are flagged if the key exists in either (Redis's
    /// `touchAllWatchedKeysInDb` for both).
    pub fn swap_dbs(&self, p: u8, q: u8, exists: impl Fn(u8, &[u8]) -> bool) {
        if self.count.load(Ordering::SeqCst) == 0 {
            return;
        }
        let other = |db: u8| if db == p { q } else { p };
        let keys: Vec<(u8, Vec<u8>)> = self
            .inner
            .lock()
            .by_key
            .keys()
            .filter(|(db, _)| *db == p || *db == q)
            .cloned()
            .collect();
        // Looked up without the lock: a lookup may expire a key, which touches watchers.
        let touched: Vec<bool> = keys
            .iter()
            .map(|(_, k)| exists(p, k) || exists(q, k))
            .collect();
        let mut g = self.inner.lock();
        let inner = &mut *g;
        let mut lists = Vec::with_capacity(keys.len());
        for ((db, key), touched) in keys.into_iter().zip(touched) {
            if let Some(list) = inner.by_key.remove(&(db, key.clone())) {
                for w in list.iter().filter(|_| touched) {
                    w.dirty.store(true, Ordering::SeqCst);
                }
                lists.push(((other(db), key), list));
            }
        }
        inner.by_key.extend(lists);
        for keys in inner.by_client.values_mut() {
            for (db, _) in keys.iter_mut() {
                if *db == p || *db == q {
                    *db = other(*db);
                }
            }
        }
    }

    /// The keys `client` watches, each with whether it was expired when watched.
    pub fn keys_of(&self, client: u64) -> Vec<(u8, Vec<u8>, bool)> {
        if self.count.load(Ordering::SeqCst) == 0 {
            return Vec::new();
        }
        let g = self.inner.lock();
        let Some(keys) = g.by_client.get(&client) else {
            return Vec::new();
        };
        keys.iter()
            .map(|(db, k)| {
                let expired = g
                    .by_key
                    .get(&(*db, k.clone()))
                    .and_then(|l| l.iter().find(|w| w.client == client))
                    .is_some_and(|w| w.expired);
                (*db, k.clone(), expired)
            })
            .collect()
    }

    /// Forgets every key `client` watches (UNWATCH, EXEC, DISCARD, RESET, disconnect).
    pub fn unwatch_all(&self, client: u64) {
        if self.count.load(Ordering::SeqCst) == 0 {
            return;
        }
        let mut g = self.inner.lock();
        let Some(keys) = g.by_client.remove(&client) else {
            return;
        };
        for k in keys {
            if let Some(list) = g.by_key.get_mut(&k) {
                list.retain(|w| w.client != client);
                if list.is_empty() {
                    g.by_key.remove(&k);
                }
                self.count.fetch_sub(1, Ordering::SeqCst);
            }
        }
    }

    /// Watched entries over all clients.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.count.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn touch_flags_watchers_of_the_key_only() {
        let w = Watches::default();
        let (a, b) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicBool::new(false)),
        );
        w.touch(0, b"k", false); // nobody watches: nothing to do
        w.watch(1, &a, 0, b"k", false);
        w.watch(1, &a, 0, b"k", false);
        w.watch(2, &b, 0, b"k", false);
        w.watch(2, &b, 1, b"j", false);
        assert_eq!(w.len(), 3);
        w.touch(1, b"k", false);
        w.touch(0, b"j", false);
        assert!(!a.load(Ordering::SeqCst) && !b.load(Ordering::SeqCst));
        w.touch(0, b"k", false);
        assert!(a.load(Ordering::SeqCst) && b.load(Ordering::SeqCst));
        assert_eq!(w.keys_of(2).len(), 2);
        w.unwatch_all(2);
        w.unwatch_all(2);
        assert_eq!(w.len(), 1);
        assert!(w.keys_of(2).is_empty());
        w.unwatch_all(1);
        assert_eq!(w.len(), 0);
        assert!(w.inner.lock().by_key.is_empty());
    }

    #[test]
    fn deleting_a_key_expired_when_watched_is_no_change() {
        let w = Watches::default();
        let a = Arc::new(AtomicBool::new(false));
        w.watch(1, &a, 0, b"k", true);
        assert_eq!(w.keys_of(1), vec![(0, b"k".to_vec(), true)]);
        w.touch(0, b"k", true);
        assert!(!a.load(Ordering::SeqCst));
        assert_eq!(w.keys_of(1), vec![(0, b"k".to_vec(), false)]);
        // Now deleted and no longer expired: a new write is a change.
        w.touch(0, b"k", false);
        assert!(a.load(Ordering::SeqCst));
    }
}
