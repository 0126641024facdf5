//! The types layer: Redis keys as metadata records over `strata::Db`, with no protocol in it.
//! Record layout: `docs/format/redis-keys.md` (keys in `keys.rs`, values here).
//!
//! **Where a command runs, and atomicity.** Redis runs one command at a time; read-modify-write
//! commands (INCR, APPEND, SET NX/XX/GET, lazy expiry) rely on it. A command whose keys all
//! live in one shard runs on that shard's worker (`strata::Db::exec`, see `exec.rs` in the
//! server): while it runs nothing else reads or writes the shard, and its reads and writes go
//! through the worker's [`strata::ShardTxn`], which the command is given as its transaction ([`Tx`],
//! `store/tx.rs`: chosen once when the command starts), so the same methods serve both
//! places. Other commands (keys in
//! several shards, whole-database commands) run on the connection's thread through the
//! front, holding the stripes of their keys exclusively (taken by the dispatcher from the
//! command's key specs, [`Tx::lock_for_command`]; 1024 reader-writer
//! locks chosen by a hash of the encoded key, taken in ascending order so that multi-key
//! commands cannot deadlock) for their whole read-modify-write; a single-shard *write*
//! command takes the same stripes *shared* before it is queued and releases them when its
//! group's write is done, so the two kinds exclude each other. Single-shard commands need
//! not exclude each other: their worker already runs them one at a time, and a later one
//! reads the earlier ones' writes through the group's transaction. Shared stripes let many
//! clients' writes to one hot key ride one group write (with an exclusive stripe per key,
//! each waited for the previous one's write: 4x fewer LPUSHes per second on one list).
//! Workers never wait for a stripe, so this cannot deadlock. Writes spanning shards go to
//! the front as one `WriteBatch`, atomic across shards.
//!
//! **Expiry index.** Every write through the store updates the in-memory index of keys with
//! a TTL that active expiry samples (`expire.rs`), once the write is applied (on a worker:
//! buffered in the group; if the group's write then fails, the index holds a stale entry,
//! which is harmless: the cycle re-reads a record before it deletes it), while the writer
//! holds the key's stripe or runs on the key's worker.
//!
//! Layer: store and types (above configuration; no services, commands or execution).

mod meta;
mod scan;
#[cfg(test)]
pub(crate) mod tests;
mod tx;

pub use meta::{Meta, RType, TypeError, Writes};
pub use tx::Tx;

use crate::access::AccessTable;
use crate::expire::{Due, ExpiryIndex};
use crate::keys::{meta_key, user_key_of_meta, SERVER_PREFIX};
use crate::notify::Class;
use crate::watch::Watches;
use meta::corrupt;
#[cfg(test)]
use meta::REWRITE_SLACK;
use parking_lot::{Mutex, RwLock, RwLockWriteGuard};
use smallvec::SmallVec;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};
use strata::{Db, EngineIter, IterOptions, WriteBatch, WriteOptions};
use strata_engine::Result;
use xxhash_rust::xxh3::xxh3_64_with_seed;

const STRIPES: usize = 1024;

/// A Redis key with its database.
pub(crate) type DbKey = (u8, Vec<u8>);

/// The keys clients are blocked on (`blocking.rs` keeps it), so that a write can tell at
/// the cost of one atomic load whether it may wake someone.
#[derive(Default)]
pub struct WaitedKeys {
    count: std::sync::atomic::AtomicUsize,
    keys: Mutex<std::collections::HashMap<(u8, Vec<u8>), usize>>,
}

impl WaitedKeys {
    /// One more client waits on `key`.
    pub fn add(&self, db: u8, key: &[u8]) {
        *self.keys.lock().entry((db, key.to_vec())).or_insert(0) += 1;
        self.count.fetch_add(1, Ordering::SeqCst);
    }

    /// One client fewer waits on `key`.
    pub fn remove(&self, db: u8, key: &[u8]) {
        let mut keys = self.keys.lock();
        let k = (db, key.to_vec());
        if let Some(n) = keys.get_mut(&k) {
            *n -= 1;
            if *n == 0 {
                keys.remove(&k);
            }
            self.count.fetch_sub(1, Ordering::SeqCst);
        }
    }

    pub(crate) fn contains(&self, db: u8, key: &[u8]) -> bool {
        self.count.load(Ordering::SeqCst) > 0 && self.keys.lock().contains_key(&(db, key.to_vec()))
    }
}

/// Version of the record layout in `docs/format/redis-keys.md`.
const FORMAT_VERSION: u8 = 1;

pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Keyspace counters (INFO stats).
#[derive(Default)]
pub struct KeyStats {
    pub expired_keys: AtomicU64,
    /// Active expiry's running estimate of the share of expired keys among keys with a
    /// TTL, in percent, as `f64` bits (Redis's `expired_stale_perc`).
    pub expired_stale_perc: AtomicU64,
    /// Active expiry cycles that ran out of time (Redis's `expired_time_cap_reached_count`).
    pub expired_time_cap_reached: AtomicU64,
    pub hits: AtomicU64,
    pub misses: AtomicU64,
}

impl KeyStats {
    /// CONFIG RESETSTAT.
    pub fn reset(&self) {
        for c in [&self.expired_keys, &self.hits, &self.misses] {
            c.store(0, Ordering::Relaxed);
        }
    }
}

/// The keyspace over a `strata::Db`.
pub struct Store {
    db: Db,
    stripes: Vec<Arc<RwLock<()>>>,
    /// Last version handed out (microsecond clock, bumped to stay increasing).
    version: AtomicU64,
    /// `appendfsync always`: every write synced.
    sync_writes: AtomicBool,
    /// A write happened since the last background sync (`appendfsync everysec`).
    dirty: AtomicBool,
    /// Unix milliseconds of the last write made durable by a log sync (0: none yet).
    last_sync_ms: AtomicU64,
    pub stats: KeyStats,
    /// Keys with a TTL, for active expiry (`expire.rs`).
    expires: ExpiryIndex,
    /// Keys clients are blocked on (`blocking.rs`).
    pub waited: WaitedKeys,
    /// The keys clients WATCH, flagged by every write (`watch.rs`).
    pub watches: Watches,
    /// Client-side caching (`tracking.rs`), told of every write by the same hook.
    pub tracking: crate::tracking::Tracking,
    /// Last access and access counter of keys (OBJECT FREQ, IDLETIME; `access.rs`).
    pub access: AccessTable,
    /// Keyspace notifications (`notify.rs`): commands publish their events through it, the
    /// store its `expired` and `new` events.
    pub notify: crate::notify::Notifier,
    /// The last keys expired (database, key, version), so that a key the active cycle and
    /// a lazy read expire at the same time (reads on a worker take no stripe) is notified
    /// once ([`Store::notify_expired`]).
    expired_recently: Mutex<std::collections::VecDeque<(u8, Vec<u8>, u64)>>,
    /// A replica's store: logically expired keys read as absent but are not deleted (the
    /// master's DEL deletes them, as Redis 7 replicas wait for it).
    keep_expired: AtomicBool,
    /// Logical → physical database (SWAPDB, `dbmap.rs`); records carry the physical one.
    pub dbs: Arc<crate::dbmap::DbMap>,
    /// `lazyfree-lazy-expire`: active expiry propagates `UNLINK` instead of `DEL`.
    unlink_expired: AtomicBool,
    /// Writes since open (a promoted replica resumes from its old master only if nothing
    /// was written since it stopped following: `replica/mod.rs`).
    writes: AtomicU64,
}

/// How many expired keys [`Store::notify_expired`] remembers.
const EXPIRED_REMEMBERED: usize = 256;

/// Stripe indexes, ascending. Inline up to a few keys (a command's stripes are taken on
/// every request: no allocation for the common one to four keys).
type Stripes = SmallVec<[usize; 4]>;

/// Stripe locks held for the duration of one command: exclusively, or shared by a blind
/// write ([`Tx::lock_for_command`]).
#[derive(Default)]
pub struct KeyGuard<'a> {
    _guards: SmallVec<[RwLockWriteGuard<'a, ()>; 4]>,
    _shared: SmallVec<[parking_lot::RwLockReadGuard<'a, ()>; 4]>,
}

/// Stripe locks held shared for a command queued to a worker, released when it is dropped
/// there (after its group's write).
pub struct OwnedKeyGuard {
    _guards: SmallVec<[parking_lot::ArcRwLockReadGuard<parking_lot::RawRwLock, ()>; 4]>,
}

/// The stripes an EXEC holds while its queued commands run: those of the keys they name (and
/// of the watched keys), or all of them; plus any a command asked for beyond those.
pub struct ExecLocks {
    /// Held stripes, ascending; `None`: all.
    held: Option<Vec<usize>>,
    guards: Vec<parking_lot::ArcRwLockWriteGuard<parking_lot::RawRwLock, ()>>,
}

impl ExecLocks {
    /// Makes sure the stripes `idx` (ascending) are held. A stripe beyond the planned ones
    /// is taken out of the ascending order, which could deadlock with another EXEC doing
    /// the same; only a command whose keys the command table does not describe asks for one
    /// (EXEC plans every stripe for those it knows of: `cmd/multi.rs` `lock_plan`).
    fn ensure(&mut self, stripes: &[Arc<RwLock<()>>], idx: &[usize]) {
        let Some(held) = &mut self.held else { return };
        for &i in idx {
            if let Err(pos) = held.binary_search(&i) {
                held.insert(pos, i);
                self.guards.push(stripes[i].write_arc());
            }
        }
    }
}

/// The stripe of `key` in database `db`.
fn stripe_of(db: u8, key: &[u8]) -> usize {
    // Hashed in place (the database as the seed): no record key is built for a lock.
    (xxh3_64_with_seed(key, u64::from(db)) % STRIPES as u64) as usize
}

/// The stripes of `keys` in database `db`, ascending, without repeats.
fn stripes_of<K: AsRef<[u8]>>(db: u8, keys: &[K]) -> Stripes {
    stripes(keys.iter().map(|k| (db, k.as_ref())))
}

/// The stripes of `(database, key)`s, ascending (the order locks are taken in), without
/// repeats.
fn stripes<'a>(keys: impl Iterator<Item = (u8, &'a [u8])>) -> Stripes {
    let mut idx: Stripes = keys.map(|(db, k)| stripe_of(db, k)).collect();
    idx.sort_unstable();
    idx.dedup();
    idx
}

impl Store {
    /// The keyspace over `db`: checks (or, in a new database, writes) the format record.
    pub fn open(db: Db, sync_writes: bool) -> Result<Store> {
        if db.routing() != strata::Routing::Slot {
            return Err(strata_engine::Error::InvalidArgument(format!(
                "{} routes keys by {:?}; the Redis server's databases route them by hash \
                 slot (created by `strata serve`)",
                db.path().display(),
                db.routing()
            )));
        }
        let mut key = vec![SERVER_PREFIX];
        key.extend_from_slice(b"redis-format");
        match db.get(&key)? {
            None => db.put_opt(&WriteOptions { sync: true }, &key, &[FORMAT_VERSION])?,
            Some(v) if v == [FORMAT_VERSION] => {}
            Some(v) => {
                return Err(strata_engine::Error::InvalidArgument(format!(
                    "this database holds Redis keys in format {v:?}; this server reads \
                     format {FORMAT_VERSION} (docs/format/redis-keys.md)"
                )))
            }
        }
        let dbs = crate::dbmap::DbMap::decode(db.get(&crate::dbmap::record_key())?.as_deref())
            .map_err(strata_engine::Error::InvalidArgument)?;
        let hot_bytes = db.hot_stats().map_or(0, |h| h.capacity_bytes);
        let store = Store {
            db,
            stripes: (0..STRIPES).map(|_| Arc::new(RwLock::new(()))).collect(),
            version: AtomicU64::new(0),
            sync_writes: AtomicBool::new(sync_writes),
            dirty: AtomicBool::new(false),
            last_sync_ms: AtomicU64::new(0),
            stats: KeyStats::default(),
            expires: ExpiryIndex::default(),
            waited: WaitedKeys::default(),
            watches: Watches::default(),
            tracking: Default::default(),
            access: AccessTable::new(hot_bytes),
            notify: Default::default(),
            expired_recently: Mutex::new(Default::default()),
            keep_expired: AtomicBool::new(false),
            dbs: Arc::new(dbs),
            unlink_expired: AtomicBool::new(false),
            writes: AtomicU64::new(0),
        };
        store.notify.translate_with(store.dbs.clone());
        store.rebuild_expiry_index()?;
        Ok(store)
    }

    /// Fills the expiry index from the metadata records of every database (one scan, at
    /// open, before any command runs), and starts versions above every version on disk.
    /// Keys already expired are indexed too: the first expiry cycle deletes them.
    fn rebuild_expiry_index(&self) -> Result<()> {
        let mut it = self.db.iter_opt(&IterOptions {
            lower_bound: None,
            upper_bound: Some(vec![SERVER_PREFIX]),
        })?;
        it.seek_to_first();
        let mut max_version = 0;
        while it.valid() {
            if let Some(k) = user_key_of_meta(it.key()) {
                let m = Meta::decode(it.value()).ok_or_else(|| corrupt(k))?;
                if m.expire_ms != 0 {
                    self.expires.set(it.key()[0], k, m.expire_ms);
                }
                max_version = max_version.max(m.version);
            } else if let Some((_, _, _, v, _)) = crate::keys::parse_sub_key(it.key()) {
                max_version = max_version.max(v);
            }
            it.next();
        }
        it.status()?;
        // New incarnations get versions above every one on disk, member records of deleted
        // keys included, even if the clock went back since they were written: a reused
        // version would bring a deleted collection's members back.
        self.version.fetch_max(max_version, Ordering::Relaxed);
        Ok(())
    }

    /// Publishes `expired` for incarnation `version` of `key`, unless it was already (the
    /// active cycle and a lazy read may both find it due).
    fn notify_expired(&self, db: u8, key: &[u8], version: u64) {
        if !self.notify.wants(Class::Expired) {
            return;
        }
        {
            let mut seen = self.expired_recently.lock();
            if seen
                .iter()
                .any(|(d, k, v)| *d == db && *v == version && k == key)
            {
                return;
            }
            if seen.len() == EXPIRED_REMEMBERED {
                seen.pop_front();
            }
            seen.push_back((db, key.to_vec(), version));
        }
        self.notify.event(Class::Expired, "expired", db, key);
    }

    pub(crate) fn expiry_index(&self) -> &ExpiryIndex {
        &self.expires
    }

    /// Updates the expiry index after a successful write of `key` (`None`: deleted).
    fn note_written(&self, db: u8, key: &[u8], meta: Option<&Meta>) {
        match meta {
            Some(m) => {
                self.expires.set(db, key, m.expire_ms);
                self.access.written(db, key, now_ms());
            }
            None => {
                self.expires.remove(db, key);
                self.access.forget(db, key);
            }
        }
        self.note_touched(db, key, meta.is_none());
    }

    /// Notes that a command modified `key` (Redis's `signalModifiedKey`; `deleted`: its
    /// metadata record was deleted): the hook for WATCH and for clients blocked on the key.
    /// Called once the write is applied (on a worker or in an EXEC: buffered in its
    /// transaction), while the writer still holds the key's stripe.
    fn note_touched(&self, db: u8, key: &[u8], deleted: bool) {
        self.watches.touch(db, key, deleted);
        self.tracking.touch(key);
    }

    /// Active expiry of one indexed key: under the key's stripe, deletes it if its record
    /// is expired now (not merely its index entry: a concurrent write may have replaced it),
    /// and fixes a stale index entry.
    pub(crate) fn expire_if_due(&self, db: u8, key: &[u8]) -> Result<Due> {
        let _g = self.lock_stripes(std::iter::once((db, key)), false);
        let mk = meta_key(db, key);
        let Some(raw) = self.db.get(&mk)? else {
            self.expires.remove(db, key);
            return Ok(Due::Stale);
        };
        let m = Meta::decode(&raw).ok_or_else(|| corrupt(key))?;
        if m.expired_at(now_ms()) {
            // Published before the delete is visible: a command that finds the key gone
            // (reads on a worker take no stripe) runs after its subscribers got the event.
            self.notify_expired(db, key, m.version);
            self.db.delete_opt(&self.wo(), &mk)?;
            let unlink = self.unlink_expired.load(Ordering::Relaxed);
            crate::effects::outside(self.dbs.logical(db), crate::effects::deletion(key, unlink));
            self.expires.remove(db, key);
            self.access.forget(db, key);
            self.note_touched(db, key, true);
            self.stats.expired_keys.fetch_add(1, Ordering::Relaxed);
            return Ok(Due::Deleted);
        }
        self.note_written(db, key, Some(&m));
        Ok(Due::Stale)
    }

    pub fn db(&self) -> &Db {
        &self.db
    }

    pub fn into_db(self) -> Db {
        self.db
    }

    /// Notes that the logs were just synced (INFO persistence).
    pub fn note_sync(&self) {
        self.last_sync_ms.store(now_ms(), Ordering::Relaxed);
    }

    /// Unix milliseconds of the last sync of the logs (0: none yet).
    pub fn last_sync_ms(&self) -> u64 {
        self.last_sync_ms.load(Ordering::Relaxed)
    }

    /// Whether every write is synced (`appendfsync always`).
    pub fn sync_writes(&self) -> bool {
        self.sync_writes.load(Ordering::Relaxed)
    }

    /// Replica mode: expired keys are hidden, never deleted, by reads and active expiry.
    /// Writes through the store since it was opened.
    pub fn writes(&self) -> u64 {
        self.writes.load(Ordering::Relaxed)
    }

    pub fn set_keep_expired(&self, on: bool) {
        self.keep_expired.store(on, Ordering::Release);
    }

    pub fn keeps_expired(&self) -> bool {
        self.keep_expired.load(Ordering::Acquire)
    }

    /// `lazyfree-lazy-expire`: active expiry's deletions propagate as `UNLINK`.
    pub fn set_unlink_expired(&self, on: bool) {
        self.unlink_expired.store(on, Ordering::Relaxed);
    }

    pub fn set_sync_writes(&self, on: bool) {
        self.sync_writes.store(on, Ordering::Relaxed);
    }

    fn wo(&self) -> WriteOptions {
        // Stored only when it changes: every write would otherwise claim the line for itself.
        if !self.dirty.load(Ordering::Relaxed) {
            self.dirty.store(true, Ordering::Relaxed);
        }
        self.writes.fetch_add(1, Ordering::Relaxed);
        WriteOptions {
            sync: self.sync_writes.load(Ordering::Relaxed),
        }
    }

    /// Takes the stripes of `(database, key)`s, exclusively or `shared` (see
    /// [`Tx::lock_for_command`], which calls this for a command on the front), for a writer
    /// outside any transaction: active expiry, a woken client's follow-up.
    pub(crate) fn lock_stripes<'k>(
        &self,
        keys: impl Iterator<Item = (u8, &'k [u8])>,
        shared: bool,
    ) -> KeyGuard<'_> {
        let mut g = KeyGuard::default();
        for i in stripes(keys) {
            if shared {
                g._shared.push(self.stripes[i].read());
            } else {
                g._guards.push(self.stripes[i].write());
            }
        }
        g
    }

    /// Every stripe, exclusively ([`Tx::lock_every_stripe_for_command`]).
    fn lock_every_stripe(&self) -> KeyGuard<'_> {
        KeyGuard {
            _guards: self.stripes.iter().map(|s| s.write()).collect(),
            _shared: SmallVec::new(),
        }
    }

    /// Takes the stripes of `keys` shared for a command queued to a worker, as a guard that may
    /// move to the worker. `None` if a front command holds one or waits for one (a waiting
    /// exclusive taker blocks new shared ones, so it is never starved): the caller waits for
    /// its own earlier commands, which may be what it waits for, then calls
    /// [`Store::lock_owned_blocking`].
    pub fn try_lock_owned<K: AsRef<[u8]>>(&self, db: u8, keys: &[K]) -> Option<OwnedKeyGuard> {
        let mut guards = SmallVec::new();
        for i in stripes_of(db, keys) {
            guards.push(self.stripes[i].try_read_arc()?);
        }
        Some(OwnedKeyGuard { _guards: guards })
    }

    /// [`Store::try_lock_owned`], waiting for held stripes.
    pub fn lock_owned_blocking<K: AsRef<[u8]>>(&self, db: u8, keys: &[K]) -> OwnedKeyGuard {
        OwnedKeyGuard {
            _guards: stripes_of(db, keys)
                .into_iter()
                .map(|i| self.stripes[i].read_arc())
                .collect(),
        }
    }

    /// A fresh version for a new incarnation of a key.
    pub fn next_version(&self) -> u64 {
        let now_us = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_micros() as u64)
            .unwrap_or(0);
        self.next_version_at(now_us)
    }

    /// [`Store::next_version`] with the clock reading `now_us`.
    fn next_version_at(&self, now_us: u64) -> u64 {
        let mut cur = self.version.load(Ordering::Relaxed);
        loop {
            let next = now_us.max(cur + 1);
            match self
                .version
                .compare_exchange(cur, next, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => return next,
                Err(c) => cur = c,
            }
        }
    }
    /// Takes the stripes for an EXEC: those of `keys` (database, key), or every stripe
    /// (`None`: the transaction has a command whose keys the command table does not name).
    /// Waits for held ones, in ascending order as every other taker.
    pub fn lock_for_exec(&self, keys: Option<&[(u8, &[u8])]>) -> ExecLocks {
        let idx: Vec<usize> = match keys {
            Some(k) => stripes(k.iter().copied()).into_vec(),
            None => (0..STRIPES).collect(),
        };
        let guards = idx.iter().map(|&i| self.stripes[i].write_arc()).collect();
        ExecLocks {
            held: keys.map(|_| idx),
            guards,
        }
    }

    /// `appendfsync everysec`: if anything was written since the last call, makes every
    /// shard's log durable by running, on each shard's worker, a synced write of one marker
    /// record (a synced write syncs the shard's log up to it; the front has no bare sync).
    pub fn sync_if_dirty(&self) -> Result<()> {
        if !self.dirty.swap(false, Ordering::Relaxed) {
            return Ok(());
        }
        let (tx, rx) = std::sync::mpsc::channel();
        let shards = self.db.shard_count();
        for s in 0..shards {
            let key = self.marker_key(s);
            let tx = tx.clone();
            self.db.exec(s, move |txn| {
                let r = txn.and_then(|t| {
                    t.sync();
                    t.put(&key, b"")
                });
                match r {
                    Ok(()) => Some(Box::new(move |r| {
                        let _ = tx.send(r);
                    })),
                    Err(e) => {
                        let _ = tx.send(Err(e));
                        None
                    }
                }
            });
        }
        drop(tx);
        let mut done = 0;
        for r in rx {
            r?;
            done += 1;
        }
        if done != shards {
            return Err(strata_engine::Error::Poisoned(
                "a shard worker dropped a sync without answering".to_string(),
            ));
        }
        self.note_sync();
        Ok(())
    }

    /// Writes server records (`0xfe ...`: the function libraries, the database map), synced;
    /// on a replica's link thread with the stream position in the same batch.
    pub fn write_server_records(&self, mut b: WriteBatch) -> Result<()> {
        crate::position::stamp(&self.db, &mut b);
        self.db.write_opt(&WriteOptions { sync: true }, b)?;
        self.note_sync();
        Ok(())
    }

    /// A server record that shard `s` owns, for its sync marker: `0xfe | slot | "sync"` with
    /// the first slot of the shard's range.
    fn marker_key(&self, s: usize) -> Vec<u8> {
        let n = self.db.shard_count();
        let slot = (s * crate::keys::SLOTS as usize).div_ceil(n) as u16;
        let mut k = vec![SERVER_PREFIX];
        k.extend_from_slice(&slot.to_be_bytes());
        k.extend_from_slice(b"sync");
        debug_assert_eq!(self.db.shard_of(&k), s);
        k
    }
}
