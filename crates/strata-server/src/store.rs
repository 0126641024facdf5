//! The types layer: Redis keys as metadata records over `strata::Db`, with no protocol in it.
//! Record layout: `docs/format/redis-keys.md` (keys in `keys.rs`, values here).
//!
//! **Where a command runs, and atomicity.** Redis runs one command at a time; read-modify-write
//! commands (INCR, APPEND, SET NX/XX/GET, lazy expiry) rely on it. A command whose keys all
//! live in one shard runs on that shard's worker (`strata::Db::exec`, see `exec.rs` in the
//! server): while it runs nothing else reads or writes the shard, and its reads and writes go
//! through the worker's [`ShardTxn`], installed in a thread-local for the command's duration
//! ([`with_txn`]), so the same `Store` methods serve both places. Other commands (keys in
//! several shards, whole-database commands) run on the connection's thread through the
//! front, holding the stripes of their keys exclusively (taken by the dispatcher from the
//! command's key specs, [`Store::lock_for_command`]; 1024 reader-writer
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

use crate::access::AccessTable;
use crate::expire::{Due, ExpiryIndex};
use crate::keys::{db_range, meta_key, user_key_of_meta, SERVER_PREFIX};
use crate::notify::Class;
use crate::txn::{merge_scan, FrontTxn};
use crate::watch::Watches;
use parking_lot::{Mutex, RwLock, RwLockWriteGuard};
use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};
use strata::{Db, EngineIter, IterOptions, ShardTxn, StrataEngine, WriteBatch, WriteOptions};
use strata_engine::Result;
use xxhash_rust::xxh3::xxh3_64;

const STRIPES: usize = 1024;

thread_local! {
    /// The transaction of the command running on this thread, if any: a shard worker's
    /// group, or an EXEC's buffered writes on the connection's thread.
    static TXN: RefCell<Option<Txn>> = const { RefCell::new(None) };
    /// Keys with blocked clients that the running command wrote (Redis's `ready_keys`);
    /// `None` outside a command (`blocking.rs` serves them when the command ends).
    static READY: RefCell<Option<Vec<DbKey>>> = const { RefCell::new(None) };
}

/// What the `Store`'s reads and writes go through on this thread.
enum Txn {
    /// A command on a shard's worker (or in place under its lock).
    Shard(ShardTxn<StrataEngine>),
    /// The queued commands of an EXEC, with the stripes the EXEC holds.
    Front(FrontTxn, ExecLocks),
}

/// A Redis key with its database.
pub(crate) type DbKey = (u8, Vec<u8>);

/// Starts collecting the keys with blocked clients that this thread's command writes.
pub(crate) fn begin_ready() {
    READY.with(|r| *r.borrow_mut() = Some(Vec::new()));
}

/// The keys noted ready since the last call (collecting goes on).
pub(crate) fn take_ready() -> Vec<(u8, Vec<u8>)> {
    READY.with(|r| {
        r.borrow_mut()
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    })
}

/// Stops collecting (the command's blocked clients are served).
pub(crate) fn end_ready() {
    READY.with(|r| *r.borrow_mut() = None);
}

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

/// Runs `f` with `txn` as the current thread's shard transaction: `Store` methods called by
/// `f` read and write through it. The transaction is put back even if `f` panics.
pub fn with_txn<R>(txn: &mut ShardTxn<StrataEngine>, f: impl FnOnce() -> R) -> R {
    struct Restore<'a>(&'a mut ShardTxn<StrataEngine>);
    impl Drop for Restore<'_> {
        fn drop(&mut self) {
            if let Some(Txn::Shard(t)) = TXN.with(|c| c.borrow_mut().take()) {
                *self.0 = t;
            }
        }
    }
    TXN.with(|c| *c.borrow_mut() = Some(Txn::Shard(txn.take())));
    let _restore = Restore(txn);
    f()
}

/// Runs `f` on the current shard transaction, if a command is running on a worker.
fn in_txn<R>(f: impl FnOnce(&mut ShardTxn<StrataEngine>) -> R) -> Option<R> {
    TXN.with(|c| match c.borrow_mut().as_mut() {
        Some(Txn::Shard(t)) => Some(f(t)),
        _ => None,
    })
}

/// Runs `f` on the current EXEC's transaction, if one runs on this thread.
fn in_front<R>(f: impl FnOnce(&mut FrontTxn, &mut ExecLocks) -> R) -> Option<R> {
    TXN.with(|c| match c.borrow_mut().as_mut() {
        Some(Txn::Front(t, l)) => Some(f(t, l)),
        _ => None,
    })
}

/// On a worker, a point in the shard transaction's writes to roll back to
/// ([`rollback_shard_txn`]); `None` off the workers.
pub(crate) fn shard_savepoint() -> Option<usize> {
    in_txn(|t| t.savepoint())
}

/// Drops the writes the running command buffered in its shard transaction since
/// `savepoint` (a script that must run again elsewhere: `cmd/scripting.rs`).
pub(crate) fn rollback_shard_txn(savepoint: usize) {
    in_txn(|t| t.rollback_to(savepoint));
}

/// Whether a command is running on a worker (its keys' stripes are held for it).
pub(crate) fn on_worker() -> bool {
    TXN.with(|c| matches!(*c.borrow(), Some(Txn::Shard(_))))
}

/// Version of the record layout in `docs/format/redis-keys.md`.
const FORMAT_VERSION: u8 = 1;
/// Fixed part of a metadata value: type, expiry, version, size.
const META_HEADER_BYTES: usize = 1 + 8 + 8 + 8;

/// A key's type. On-disk: do not renumber.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum RType {
    String = 0,
    Hash = 1,
    List = 2,
    Set = 3,
    ZSet = 4,
    Stream = 5,
}

impl RType {
    fn from_byte(b: u8) -> Option<RType> {
        match b {
            0 => Some(RType::String),
            1 => Some(RType::Hash),
            2 => Some(RType::List),
            3 => Some(RType::Set),
            4 => Some(RType::ZSet),
            5 => Some(RType::Stream),
            _ => None,
        }
    }

    /// The name TYPE replies with.
    pub fn name(self) -> &'static str {
        match self {
            RType::String => "string",
            RType::Hash => "hash",
            RType::List => "list",
            RType::Set => "set",
            RType::ZSet => "zset",
            RType::Stream => "stream",
        }
    }

    /// Whether the type keeps its members in member records (everything but strings).
    pub fn is_collection(self) -> bool {
        self != RType::String
    }
}

/// A key's metadata record (for strings, with the value inline).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Meta {
    pub rtype: RType,
    /// Absolute expiry in Unix milliseconds; 0: none.
    pub expire_ms: u64,
    /// Distinguishes this incarnation of the key from earlier ones (subkeys of collections
    /// live under it, so deleting a collection needs only its metadata record deleted).
    pub version: u64,
    /// Strings: the value's length; collections: their element count.
    pub size: u64,
    /// Strings: the value; collections: their type's own fields (lists: head and tail
    /// indexes), empty for types that have none.
    pub value: Vec<u8>,
}

/// A hash, set or sorted set is rewritten under a new version once it has this many deleted
/// members more than twice its live ones ([`Store::rewrite_if_sparse`]).
const REWRITE_SLACK: u64 = 64;

impl Meta {
    /// Whether this type keeps a deleted-member count in its extras (the member-keyed
    /// collections; a list's deletes are at its ends, which its indexes skip).
    fn counts_dead(&self) -> bool {
        matches!(self.rtype, RType::Hash | RType::Set | RType::ZSet)
    }

    /// Members deleted from this incarnation of a hash, set or sorted set: their records are
    /// tombstones that a seek into the members must step over (extras bytes 1..9, big-endian;
    /// absent: 0).
    pub fn dead_members(&self) -> u64 {
        match self.value.get(1..9) {
            Some(b) if self.counts_dead() => u64::from_be_bytes(b.try_into().unwrap_or([0; 8])),
            _ => 0,
        }
    }

    pub fn set_dead_members(&mut self, n: u64) {
        if !self.counts_dead() {
            return;
        }
        if self.value.is_empty() {
            self.value.push(0);
        }
        self.value.resize(9, 0);
        self.value[1..9].copy_from_slice(&n.to_be_bytes());
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(META_HEADER_BYTES + self.value.len());
        v.push(self.rtype as u8);
        v.extend_from_slice(&self.expire_ms.to_be_bytes());
        v.extend_from_slice(&self.version.to_be_bytes());
        v.extend_from_slice(&self.size.to_be_bytes());
        v.extend_from_slice(&self.value);
        v
    }

    /// `None` for bytes that are not a metadata record of a known type.
    pub fn decode(b: &[u8]) -> Option<Meta> {
        if b.len() < META_HEADER_BYTES {
            return None;
        }
        let u = |i: usize| u64::from_be_bytes(b[i..i + 8].try_into().unwrap_or([0; 8]));
        Some(Meta {
            rtype: RType::from_byte(b[0])?,
            expire_ms: u(1),
            version: u(9),
            size: u(17),
            value: b[META_HEADER_BYTES..].to_vec(),
        })
    }

    pub fn expired_at(&self, now_ms: u64) -> bool {
        self.expire_ms != 0 && self.expire_ms <= now_ms
    }

    /// The metadata of a new, empty collection of type `rtype` with incarnation `version`
    /// (the caller sets `size` and `value` as it adds members).
    pub fn collection(rtype: RType, version: u64) -> Meta {
        Meta {
            rtype,
            expire_ms: 0,
            version,
            size: 0,
            value: Vec::new(),
        }
    }
}

/// The writes of one command, applied atomically by [`Store::apply`]: metadata records (with
/// the expiry index kept in step) and member records, each naming the Redis key it belongs
/// to so that the store knows which keys the command modified (WATCH, blocked clients).
#[derive(Default)]
pub struct Writes {
    batch: WriteBatch,
    metas: Vec<(u8, Vec<u8>, Option<Meta>)>,
    touched: Vec<(u8, Vec<u8>)>,
    /// Member records deleted, per collection (consecutive deletes of one key counted once).
    deleted: Vec<(u8, Vec<u8>, u64)>,
}

impl Writes {
    pub fn new() -> Writes {
        Writes::default()
    }

    /// Writes (`Some`) or deletes (`None`) the metadata record of `key`.
    pub fn meta(&mut self, db: u8, key: &[u8], meta: Option<&Meta>) -> &mut Self {
        let mk = meta_key(db, key);
        match meta {
            Some(m) => self.batch.put(&mk, &m.encode()),
            None => self.batch.delete(&mk),
        };
        self.metas.push((db, key.to_vec(), meta.cloned()));
        self
    }

    /// Writes member record `record` (a full store key from `keys::sub_key` or
    /// `keys::sub_prefix`) of collection `key`.
    pub fn put_member(&mut self, db: u8, key: &[u8], record: &[u8], value: &[u8]) -> &mut Self {
        self.batch.put(record, value);
        self.touch(db, key);
        self
    }

    /// Deletes member record `record` of collection `key`.
    pub fn delete_member(&mut self, db: u8, key: &[u8], record: &[u8]) -> &mut Self {
        self.batch.delete(record);
        self.touch(db, key);
        match self.deleted.last_mut() {
            Some((d, k, n)) if *d == db && k == key => *n += 1,
            _ => self.deleted.push((db, key.to_vec(), 1)),
        }
        self
    }

    fn touch(&mut self, db: u8, key: &[u8]) {
        if self
            .touched
            .last()
            .is_none_or(|(d, k)| *d != db || k != key)
        {
            self.touched.push((db, key.to_vec()));
        }
    }

    #[allow(dead_code)] // for the collection families
    pub fn is_empty(&self) -> bool {
        self.batch.is_empty()
    }
}

/// A metadata record that could not be decoded: data corruption, reported to the client.
fn corrupt(key: &[u8]) -> strata_engine::Error {
    strata_engine::Error::Corruption {
        file: "<redis metadata record>".into(),
        offset: 0,
        reason: format!(
            "the record of key {:?} does not decode",
            String::from_utf8_lossy(key)
        ),
    }
}

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

/// Stripe locks held for the duration of one command: exclusively, or shared by a blind
/// write ([`Store::lock_for_command`]).
#[derive(Default)]
pub struct KeyGuard<'a> {
    _guards: Vec<RwLockWriteGuard<'a, ()>>,
    _shared: Vec<parking_lot::RwLockReadGuard<'a, ()>>,
}

/// Stripe locks held shared for a command queued to a worker, released when it is dropped
/// there (after its group's write).
pub struct OwnedKeyGuard {
    _guards: Vec<parking_lot::ArcRwLockReadGuard<parking_lot::RawRwLock, ()>>,
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
    (xxh3_64(&meta_key(db, key)) % STRIPES as u64) as usize
}

/// The stripes of `keys` in database `db`, ascending, without repeats.
fn stripes_of<K: AsRef<[u8]>>(db: u8, keys: &[K]) -> Vec<usize> {
    stripes(keys.iter().map(|k| (db, k.as_ref())))
}

/// The stripes of `(database, key)`s, ascending (the order locks are taken in), without
/// repeats.
fn stripes<'a>(keys: impl Iterator<Item = (u8, &'a [u8])>) -> Vec<usize> {
    let mut idx: Vec<usize> = keys.map(|(db, k)| stripe_of(db, k)).collect();
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
    fn note_write(&self, db: u8, key: &[u8], meta: Option<&Meta>) {
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
        self.note_ready(db, key);
    }

    /// Notes that a command modified `key` (Redis's `signalModifiedKey`; `deleted`: its
    /// metadata record was deleted): the hook for WATCH and for clients blocked on the key.
    /// Called once the write is applied (on a worker or in an EXEC: buffered in its
    /// transaction), while the writer still holds the key's stripe.
    fn note_touched(&self, db: u8, key: &[u8], deleted: bool) {
        self.watches.touch(db, key, deleted);
        self.tracking.touch(key);
    }

    /// Notes that a command wrote `key`, which clients may be blocked on (Redis's
    /// `signalKeyAsReady`): they are served when the command ends (`blocking.rs`).
    /// Marks `key` of `db` ready for its blocked clients as a write would (SWAPDB brought
    /// another database under them); served when the running command ends.
    pub(crate) fn mark_ready(&self, db: u8, key: &[u8]) {
        self.note_ready(db, key)
    }

    fn note_ready(&self, db: u8, key: &[u8]) {
        if !self.waited.contains(db, key) {
            return;
        }
        READY.with(|r| {
            if let Some(v) = r.borrow_mut().as_mut() {
                if !v.iter().any(|(d, k)| *d == db && k == key) {
                    v.push((db, key.to_vec()));
                }
            }
        });
    }

    /// Active expiry of one indexed key: under the key's stripe, deletes it if its record
    /// is expired now (not merely its index entry: a concurrent write may have replaced it),
    /// and fixes a stale index entry.
    pub(crate) fn expire_if_due(&self, db: u8, key: &[u8]) -> Result<Due> {
        let _g = self.lock_for_command(std::iter::once((db, key)), false);
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
        self.note_write(db, key, Some(&m));
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
        self.dirty.store(true, Ordering::Relaxed);
        self.writes.fetch_add(1, Ordering::Relaxed);
        WriteOptions {
            sync: self.sync_writes.load(Ordering::Relaxed),
        }
    }

    // ---- the store's reads and writes: through the worker's transaction when a command
    // runs on a worker, through the front otherwise -------------------------------------

    fn raw_get(&self, k: &[u8]) -> Result<Option<Vec<u8>>> {
        if let Some(r) = in_txn(|t| t.get(k)) {
            return r;
        }
        match in_front(|t, _| t.get(k)) {
            Some(Some(v)) => Ok(v),
            _ => self.db.get(k),
        }
    }

    fn raw_multi_get(&self, ks: &[Vec<u8>]) -> Vec<Result<Option<Vec<u8>>>> {
        if let Some(r) = in_txn(|t| t.multi_get(ks)) {
            return r;
        }
        let Some(mine) = in_front(|t, _| ks.iter().map(|k| t.get(k)).collect::<Vec<_>>()) else {
            return self.front_multi_get(ks);
        };
        let missing: Vec<&Vec<u8>> = ks
            .iter()
            .zip(&mine)
            .filter(|(_, m)| m.is_none())
            .map(|(k, _)| k)
            .collect();
        let mut read = self.db.multi_get(&missing).into_iter();
        mine.into_iter()
            .map(|m| match m {
                Some(v) => Ok(v),
                None => read.next().unwrap_or_else(|| {
                    Err(strata_engine::Error::Poisoned(
                        "multi_get returned fewer results than keys".to_string(),
                    ))
                }),
            })
            .collect()
    }

    /// Reads through the front: keys of several shards at one snapshot, so that a reader
    /// sees an EXEC's (or any cross-shard batch's) writes entirely or not at all.
    fn front_multi_get(&self, ks: &[Vec<u8>]) -> Vec<Result<Option<Vec<u8>>>> {
        let first = ks.first().map(|k| self.db.shard_of(k));
        if ks.iter().all(|k| Some(self.db.shard_of(k)) == first) {
            return self.db.multi_get(ks);
        }
        match self.db.snapshot() {
            Ok(snap) => snap.multi_get(ks),
            Err(e) => ks.iter().map(|_| Err(e.clone())).collect(),
        }
    }

    /// Applies `b` atomically (one engine write on a worker; the front's batch otherwise),
    /// counted as a change the running command made (`effects.rs`: it then propagates).
    fn raw_write(&self, b: WriteBatch) -> Result<()> {
        crate::effects::note_write();
        self.write_uncounted(b)
    }

    /// [`Store::raw_write`] not counted as the running command's change (lazy expiry:
    /// propagated as the expired key's deletion instead).
    fn write_uncounted(&self, mut b: WriteBatch) -> Result<()> {
        let wo = self.wo();
        let on = in_txn(|t| {
            if wo.sync {
                t.sync();
            }
            b.ops().try_for_each(|(k, v)| match v {
                Some(v) => t.put(k, v),
                None => t.delete(k),
            })
        });
        if let Some(r) = on {
            return r;
        }
        let buffered = in_front(|t, _| {
            if wo.sync {
                t.sync();
            }
            for (k, v) in b.ops() {
                match v {
                    Some(v) => t.put(k, v),
                    None => t.delete(k),
                }
            }
        });
        match buffered {
            Some(()) => Ok(()),
            None => {
                // A replica's link thread: the stream position rides the same batch.
                crate::position::stamp(&self.db, &mut b);
                self.db.write_opt(&wo, b)?;
                if wo.sync {
                    self.note_sync();
                }
                Ok(())
            }
        }
    }

    /// Visits the records of `[lo, hi)` in key order (descending when `reverse`) until `f`
    /// returns false, seeing the running command's own earlier writes. Collection members:
    /// a collection lives in one shard, so on a worker this reads only that shard.
    pub fn scan_range(
        &self,
        lo: &[u8],
        hi: &[u8],
        reverse: bool,
        mut f: impl FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<()> {
        if let Some(r) = in_txn(|t| t.scan(lo, hi, reverse, &mut f)) {
            return r;
        }
        // In an EXEC: its own writes over the database's records.
        let mine = in_front(|t, _| t.range(lo, hi)).unwrap_or_default();
        let mut it = self.db.iter_opt(&IterOptions {
            lower_bound: Some(lo.to_vec()),
            upper_bound: Some(hi.to_vec()),
        })?;
        if reverse {
            it.seek_to_last();
        } else {
            it.seek(lo);
        }
        merge_scan(&mut it, mine, reverse, f)
    }

    /// [`Store::scan_range`] over every record that starts with `prefix`.
    pub fn scan_prefix(
        &self,
        prefix: &[u8],
        reverse: bool,
        f: impl FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<()> {
        self.scan_range(prefix, &crate::keys::prefix_end(prefix), reverse, f)
    }

    /// The value of member record `record` (a full store key), seeing the running
    /// command's own earlier writes.
    pub fn get_member(&self, record: &[u8]) -> Result<Option<Vec<u8>>> {
        self.raw_get(record)
    }

    /// Values of member records, in order, in one batched read.
    #[allow(dead_code)] // for the collection families
    pub fn get_members(&self, records: &[Vec<u8>]) -> Vec<Result<Option<Vec<u8>>>> {
        self.raw_multi_get(records)
    }

    /// Applies one command's writes atomically, then updates the expiry index and notes
    /// the keys it modified.
    pub fn apply(&self, mut w: Writes) -> Result<()> {
        if w.batch.is_empty() {
            return Ok(());
        }
        // The deleted members join the count of the metadata this write leaves (written
        // again, counted: the later put of a key in one batch wins).
        for (db, key, n) in std::mem::take(&mut w.deleted) {
            let last = w
                .metas
                .iter_mut()
                .rev()
                .find(|(d, k, _)| *d == db && *k == key);
            if let Some((_, _, Some(m))) = last {
                if m.counts_dead() {
                    m.set_dead_members(m.dead_members().saturating_add(n));
                    w.batch.put(&meta_key(db, &key), &m.encode());
                }
            }
        }
        let puts: Vec<(u8, &[u8])> = w
            .metas
            .iter()
            .filter(|(_, _, m)| m.is_some())
            .map(|(d, k, _)| (*d, &k[..]))
            .collect();
        let new = self.absent_if_notified(&puts)?;
        self.raw_write(w.batch)?;
        self.notify_new(&new);
        for (db, key, m) in &w.metas {
            self.note_write(*db, key, m.as_ref());
        }
        for (db, key) in &w.touched {
            self.note_touched(*db, key, false);
            self.note_ready(*db, key);
        }
        Ok(())
    }

    /// The metadata of hash, set or sorted set `key` for a write command, first rewritten
    /// under a new version when its deleted members outnumber twice its live ones (plus
    /// [`REWRITE_SLACK`]). Deleted members stay as tombstones until compaction, and every
    /// seek into the members steps over those in its way: SPOP draining a large set, each
    /// pop seeking to a random member, slowed to 61 pops/s near the end. Copying the live
    /// members to a fresh version leaves the tombstones (and the old records) behind for the
    /// compaction filter; the copy costs at most half a record per member deleted since the
    /// last one. An HSCAN, SSCAN or ZSCAN in progress then restarts from the first member
    /// (its cursor names the old version): it may return members again, never miss one.
    pub fn rewrite_if_sparse(&self, db: u8, key: &[u8], m: Meta) -> Result<Meta> {
        let dead = m.dead_members();
        if dead < m.size.saturating_mul(2).saturating_add(REWRITE_SLACK) {
            return Ok(m);
        }
        let mut w = Writes::new();
        let mut fresh = m.clone();
        fresh.version = self.next_version();
        fresh.set_dead_members(0);
        self.copy_members(&mut w, (db, key), &m, (db, key), fresh.version)?;
        w.meta(db, key, Some(&fresh));
        self.apply(w)?;
        Ok(fresh)
    }

    /// Adds to `w` the member records of collection `src` (incarnation `meta.version`) of
    /// database `src_db`, rewritten as members of incarnation `new_version` of `dst` in
    /// `dst_db` (RENAME, COPY, MOVE: member records hold their key's name). The source's
    /// records are left for the compaction filter: no metadata names their version any
    /// more once the source is gone.
    pub fn copy_members(
        &self,
        w: &mut Writes,
        (src_db, src): (u8, &[u8]),
        meta: &Meta,
        (dst_db, dst): (u8, &[u8]),
        new_version: u64,
    ) -> Result<()> {
        if !meta.rtype.is_collection() {
            return Ok(());
        }
        for kind in [crate::keys::KIND_SUBKEY, crate::keys::KIND_SCORE] {
            let from = crate::keys::sub_prefix(kind, src_db, src, meta.version);
            let to = crate::keys::sub_prefix(kind, dst_db, dst, new_version);
            self.scan_prefix(&from, false, |k, v| {
                let mut nk = to.clone();
                nk.extend_from_slice(&k[from.len()..]);
                w.put_member(dst_db, dst, &nk, v);
                true
            })?;
        }
        Ok(())
    }

    fn raw_put(&self, k: &[u8], v: &[u8]) -> Result<()> {
        let mut b = WriteBatch::new();
        b.put(k, v);
        self.raw_write(b)
    }

    fn raw_delete(&self, k: &[u8]) -> Result<()> {
        let mut b = WriteBatch::new();
        b.delete(k);
        self.raw_write(b)
    }

    /// Takes the stripes of the keys a command names (`(database, key)`s) for the command's
    /// run: exclusively, or `shared` for a blind write (see below). Only the dispatcher
    /// (`cmd::run`, from the command's key specs) and the services that write outside a
    /// command (blocking's serve, active expiry) call it: a handler never takes a stripe.
    /// On a worker the command's stripes are already held for its group: nothing to take.
    /// In an EXEC or a script's transaction they are held by it (planned from the same key
    /// specs); a key beyond the plan is added to it ([`ExecLocks::ensure`]).
    ///
    /// Shared stripes are for a command that writes without reading (MSET, flagged
    /// `BLIND_WRITE` in the command table), as a command queued to a worker takes them: it
    /// must still not run between the read and the write of a command holding them
    /// exclusively, but two blind writers need not exclude each other: their writes reach
    /// every shard in one order (cross-shard batches in GSN order, single-shard ones through
    /// the shard's queue), so every shard ends with the later one's values. With exclusive
    /// stripes, concurrent MSETs of ten random keys each waited on each other's commits.
    pub(crate) fn lock_for_command<'k>(
        &self,
        keys: impl Iterator<Item = (u8, &'k [u8])>,
        shared: bool,
    ) -> KeyGuard<'_> {
        if on_worker() {
            return KeyGuard::default();
        }
        let idx = stripes(keys);
        if in_front(|_, l| l.ensure(&self.stripes, &idx)).is_some() {
            return KeyGuard::default();
        }
        let mut g = KeyGuard::default();
        for i in idx {
            if shared {
                g._shared.push(self.stripes[i].read());
            } else {
                g._guards.push(self.stripes[i].write());
            }
        }
        g
    }

    /// [`Store::lock_for_command`] for a command whose keys its key specs cannot find in its
    /// arguments: every stripe, exclusively (as EXEC takes them for such a command).
    pub(crate) fn lock_every_stripe_for_command(&self) -> KeyGuard<'_> {
        if on_worker() || in_front(|_, _| ()).is_some() {
            return KeyGuard::default();
        }
        KeyGuard {
            _guards: self.stripes.iter().map(|s| s.write()).collect(),
            _shared: Vec::new(),
        }
    }

    /// Takes the stripes of `keys` shared for a command queued to a worker, as a guard that may
    /// move to the worker. `None` if a front command holds one or waits for one (a waiting
    /// exclusive taker blocks new shared ones, so it is never starved): the caller waits for
    /// its own earlier commands, which may be what it waits for, then calls
    /// [`Store::lock_owned_blocking`].
    pub fn try_lock_owned<K: AsRef<[u8]>>(&self, db: u8, keys: &[K]) -> Option<OwnedKeyGuard> {
        let mut guards = Vec::new();
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

    /// The live metadata of `key` (the caller holds its stripe). An expired key is deleted
    /// and reads as absent, as Redis's lazy expiry. A key found counts as accessed (Redis's
    /// `lookupKey`: OBJECT FREQ and IDLETIME).
    pub fn get(&self, db: u8, key: &[u8]) -> Result<Option<Meta>> {
        self.get_with(db, key, true)
    }

    /// [`Store::get`] without counting an access (Redis's `LOOKUP_NOTOUCH`: OBJECT, TYPE,
    /// EXISTS, TTL, MEMORY USAGE).
    pub fn peek(&self, db: u8, key: &[u8]) -> Result<Option<Meta>> {
        self.get_with(db, key, false)
    }

    fn get_with(&self, db: u8, key: &[u8], touch: bool) -> Result<Option<Meta>> {
        let mk = meta_key(db, key);
        let Some(raw) = self.raw_get(&mk)? else {
            return Ok(None);
        };
        let meta = Meta::decode(&raw).ok_or_else(|| corrupt(key))?;
        let now = now_ms();
        if meta.expired_at(now) {
            if self.keeps_expired() {
                return Ok(None);
            }
            let mut b = WriteBatch::new();
            b.delete(&mk);
            self.write_uncounted(b)?;
            let unlink = self.unlink_expired.load(Ordering::Relaxed);
            let deletion = crate::effects::deletion(key, unlink);
            crate::effects::note_expired(self.dbs.logical(db), deletion);
            self.note_write(db, key, None);
            self.stats.expired_keys.fetch_add(1, Ordering::Relaxed);
            self.notify_expired(db, key, meta.version);
            return Ok(None);
        }
        if touch {
            self.access.touch(db, key, now);
        }
        Ok(Some(meta))
    }

    /// Whether `key` exists but is expired now (WATCH, EXEC), without deleting it.
    pub fn is_expired(&self, db: u8, key: &[u8]) -> Result<bool> {
        let Some(raw) = self.raw_get(&meta_key(db, key))? else {
            return Ok(false);
        };
        let meta = Meta::decode(&raw).ok_or_else(|| corrupt(key))?;
        Ok(meta.expired_at(now_ms()))
    }

    /// Like [`Store::get`], counting a keyspace hit or miss.
    pub fn lookup_read(&self, db: u8, key: &[u8]) -> Result<Option<Meta>> {
        self.lookup_read_with(db, key, true)
    }

    /// Like [`Store::peek`], counting a keyspace hit or miss (EXISTS, TTL).
    pub fn peek_read(&self, db: u8, key: &[u8]) -> Result<Option<Meta>> {
        self.lookup_read_with(db, key, false)
    }

    fn lookup_read_with(&self, db: u8, key: &[u8], touch: bool) -> Result<Option<Meta>> {
        let m = self.get_with(db, key, touch)?;
        let c = if m.is_some() {
            &self.stats.hits
        } else {
            self.notify.event(Class::KeyMiss, "keymiss", db, key);
            &self.stats.misses
        };
        c.fetch_add(1, Ordering::Relaxed);
        Ok(m)
    }

    /// Metadata of many keys in one batched read (MGET). Expired keys read as absent (and
    /// are left for their next single-key access to delete).
    pub fn multi_get(&self, db: u8, keys: &[&[u8]]) -> Result<Vec<Option<Meta>>> {
        let mks: Vec<Vec<u8>> = keys.iter().map(|k| meta_key(db, k)).collect();
        let now = now_ms();
        let mut out = Vec::with_capacity(keys.len());
        for (r, k) in self.raw_multi_get(&mks).into_iter().zip(keys) {
            let m = match r? {
                Some(raw) => Some(Meta::decode(&raw).ok_or_else(|| corrupt(k))?),
                None => None,
            };
            let m = m.filter(|m| !m.expired_at(now));
            if m.is_some() {
                self.access.touch(db, k, now);
            }
            let c = if m.is_some() {
                &self.stats.hits
            } else {
                self.notify.event(Class::KeyMiss, "keymiss", db, k);
                &self.stats.misses
            };
            c.fetch_add(1, Ordering::Relaxed);
            out.push(m);
        }
        Ok(out)
    }

    pub fn put(&self, db: u8, key: &[u8], meta: &Meta) -> Result<()> {
        let new = self.absent_if_notified(&[(db, key)])?;
        self.raw_put(&meta_key(db, key), &meta.encode())?;
        self.note_write(db, key, Some(meta));
        self.notify_new(&new);
        Ok(())
    }

    /// Of the keys about to be written, those with no record now, if `new` events are on
    /// (Redis's `dbAdd` notifies them); nothing is read otherwise.
    fn absent_if_notified(&self, keys: &[(u8, &[u8])]) -> Result<Vec<(u8, Vec<u8>)>> {
        if !self.notify.wants(Class::New) {
            return Ok(Vec::new());
        }
        let mut out: Vec<(u8, Vec<u8>)> = Vec::new();
        for &(db, k) in keys {
            let seen = out.iter().any(|(d, o)| *d == db && o == k);
            if !seen && self.raw_get(&meta_key(db, k))?.is_none() {
                out.push((db, k.to_vec()));
            }
        }
        Ok(out)
    }

    fn notify_new(&self, keys: &[(u8, Vec<u8>)]) {
        for (db, k) in keys {
            self.notify.event(Class::New, "new", *db, k);
        }
    }

    pub fn delete(&self, db: u8, key: &[u8]) -> Result<()> {
        self.raw_delete(&meta_key(db, key))?;
        self.note_write(db, key, None);
        Ok(())
    }

    /// Applies puts (`Some`) and deletes (`None`) of several keys atomically.
    pub fn write_many(&self, db: u8, ops: &[(&[u8], Option<&Meta>)]) -> Result<()> {
        let puts: Vec<(u8, &[u8])> = ops
            .iter()
            .filter(|(_, m)| m.is_some())
            .map(|(k, _)| (db, *k))
            .collect();
        let new = self.absent_if_notified(&puts)?;
        let mut b = WriteBatch::new();
        for (k, m) in ops {
            let mk = meta_key(db, k);
            match m {
                Some(m) => b.put(&mk, &m.encode()),
                None => b.delete(&mk),
            };
        }
        self.raw_write(b)?;
        for (k, m) in ops {
            self.note_write(db, k, *m);
        }
        self.notify_new(&new);
        Ok(())
    }

    /// Calls `f(slot, user_key, meta)` for the metadata records of database `db` from the
    /// first key of hash slot `slot` that is not below `from` onwards, in store order (slot,
    /// then key bytes), until `f` returns false. Expired keys are passed as `None` (and not
    /// deleted). SCAN and RANDOMKEY.
    pub fn scan_from(
        &self,
        db: u8,
        slot: u16,
        from: &[u8],
        mut f: impl FnMut(u16, &[u8], Option<&Meta>) -> bool,
    ) -> Result<()> {
        let mut lo = vec![db];
        lo.extend_from_slice(&slot.to_be_bytes());
        lo.push(crate::keys::KIND_META);
        lo.extend_from_slice(from);
        let now = now_ms();
        self.scan_metas(db, &lo, |sk, k, m| {
            let slot = u16::from_be_bytes([sk[1], sk[2]]);
            f(slot, k, (!m.expired_at(now)).then_some(m))
        })
    }

    /// Calls `f(store_key, user_key, meta)` for the metadata records of database `db` from
    /// `lo` on, in store order, until `f` returns false (seeing an EXEC's own writes).
    fn scan_metas(
        &self,
        db: u8,
        lo: &[u8],
        mut f: impl FnMut(&[u8], &[u8], &Meta) -> bool,
    ) -> Result<()> {
        let (_, hi) = db_range(db);
        let mut bad = None;
        self.scan_range(lo, &hi, false, |sk, v| {
            let Some(k) = user_key_of_meta(sk) else {
                return true;
            };
            match Meta::decode(v) {
                Some(m) => f(sk, k, &m),
                None => {
                    bad = Some(corrupt(k));
                    false
                }
            }
        })?;
        bad.map_or(Ok(()), Err)
    }

    /// A live key of `db` chosen at random (RANDOMKEY): the first live key at or after a
    /// random hash slot, wrapping around once. Keys in sparsely filled slots are likelier
    /// than others (Redis's choice is not uniform either: it picks a random bucket).
    pub fn random_key(&self, db: u8) -> Result<Option<Vec<u8>>> {
        let start = (crate::random::next_u64() % u64::from(crate::keys::SLOTS)) as u16;
        let mut found = None;
        for (from, below) in [(start, u32::MAX), (0, u32::from(start))] {
            self.scan_from(db, from, b"", |s, k, m| {
                if u32::from(s) >= below {
                    return false;
                }
                if m.is_some() {
                    found = Some(k.to_vec());
                }
                found.is_none()
            })?;
            if found.is_some() {
                break;
            }
        }
        Ok(found)
    }

    /// Calls `f(user_key, meta)` for every live key of database `db`, in store order, at
    /// one snapshot. Reads the whole database: DBSIZE, KEYS, INFO keyspace.
    pub fn scan_db(&self, db: u8, mut f: impl FnMut(&[u8], &Meta)) -> Result<()> {
        let (lo, _) = db_range(db);
        let now = now_ms();
        self.scan_metas(db, &lo, |_, k, m| {
            if !m.expired_at(now) {
                f(k, m);
            }
            true
        })
    }

    /// Deletes every record of database `db`, in batches of 1000 (in an EXEC: all in its
    /// one write). Not atomic with commands running at the same time (a key written during
    /// the flush may survive it).
    pub fn flush_db(&self, db: u8) -> Result<()> {
        let (lo, hi) = db_range(db);
        let mut b = WriteBatch::new();
        let mut metas: Vec<Vec<u8>> = Vec::new();
        let mut failed = Ok(());
        self.scan_range(&lo, &hi, false, |k, _| {
            b.delete(k);
            if let Some(k) = user_key_of_meta(k) {
                metas.push(k.to_vec());
            }
            if b.len() >= 1000 {
                failed = self.flush_batch(db, std::mem::take(&mut b), std::mem::take(&mut metas));
                return failed.is_ok();
            }
            true
        })?;
        failed?;
        if !b.is_empty() {
            self.flush_batch(db, b, metas)?;
        }
        Ok(())
    }

    /// Deletes up to `limit` records of database `db` in one batch (a dropped generation of
    /// the keyspace, cleaned in the background between checks for shutdown); returns how
    /// many it deleted (0: the database is empty).
    pub fn delete_some(&self, db: u8, limit: usize) -> Result<usize> {
        let (lo, hi) = db_range(db);
        let mut b = WriteBatch::new();
        let mut metas: Vec<Vec<u8>> = Vec::new();
        self.scan_range(&lo, &hi, false, |k, _| {
            b.delete(k);
            if let Some(k) = user_key_of_meta(k) {
                metas.push(k.to_vec());
            }
            b.len() < limit
        })?;
        let n = b.len();
        if n > 0 {
            self.flush_batch(db, b, metas)?;
        }
        Ok(n)
    }

    /// One batch of FLUSHDB: the deletes and the expiry index entries of the deleted keys,
    /// under their stripes so that a key rewritten concurrently keeps its index entry.
    fn flush_batch(&self, db: u8, b: WriteBatch, keys: Vec<Vec<u8>>) -> Result<()> {
        let _g = self.lock_for_command(keys.iter().map(|k| (db, &k[..])), false);
        self.raw_write(b)?;
        for k in &keys {
            self.note_write(db, k, None);
        }
        Ok(())
    }

    /// Takes the stripes for an EXEC: those of `keys` (database, key), or every stripe
    /// (`None`: the transaction has a command whose keys the command table does not name).
    /// Waits for held ones, in ascending order as every other taker.
    pub fn lock_for_exec(&self, keys: Option<&[(u8, &[u8])]>) -> ExecLocks {
        let idx: Vec<usize> = match keys {
            Some(k) => stripes(k.iter().copied()),
            None => (0..STRIPES).collect(),
        };
        let guards = idx.iter().map(|&i| self.stripes[i].write_arc()).collect();
        ExecLocks {
            held: keys.map(|_| idx),
            guards,
        }
    }

    /// Runs `f` (an EXEC's queued commands) with a front transaction (`txn.rs`) on this
    /// thread: the `Store`'s reads in `f` see the writes made earlier in `f`, which are
    /// buffered; then applies them as one write (atomic across shards) and releases
    /// `locks`. Returns `f`'s result and the write's.
    #[cfg(test)]
    pub fn run_exec<R>(&self, locks: ExecLocks, f: impl FnOnce() -> R) -> (R, Result<()>) {
        self.run_exec_then(locks, || (f(), true), |_| {})
    }

    /// Runs `f` (an EXEC's queued commands, a script) with a front transaction (`txn.rs`) on
    /// this thread, then applies its buffered writes as one write (atomic across shards) if
    /// `f` says so (a script that must run again under more stripes drops them), and runs
    /// `after` with the write's outcome before the stripes are released (the replication
    /// log's append, `repl/sequencer.rs`).
    pub fn run_exec_then<R>(
        &self,
        locks: ExecLocks,
        f: impl FnOnce() -> (R, bool),
        after: impl FnOnce(&Result<()>),
    ) -> (R, Result<()>) {
        struct Clear;
        impl Drop for Clear {
            fn drop(&mut self) {
                TXN.with(|c| c.borrow_mut().take());
            }
        }
        let prev = TXN.with(|c| c.borrow_mut().replace(Txn::Front(FrontTxn::new(), locks)));
        debug_assert!(prev.is_none(), "EXEC inside a transaction");
        let _clear = Clear;
        let (r, apply) = f();
        let Some(Txn::Front(txn, locks)) = TXN.with(|c| c.borrow_mut().take()) else {
            let e = strata_engine::Error::Poisoned("EXEC lost its transaction".to_string());
            return (r, Err(e));
        };
        let (mut batch, sync) = txn.into_batch();
        let written = if batch.is_empty() || !apply {
            Ok(())
        } else {
            // A replica's link thread: the stream position rides the EXEC's batch.
            crate::position::stamp(&self.db, &mut batch);
            let wo = WriteOptions {
                sync: self.wo().sync || sync,
            };
            let w = self.db.write_opt(&wo, batch);
            if w.is_ok() && wo.sync {
                self.note_sync();
            }
            w
        };
        after(&written);
        drop(locks);
        (r, written)
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

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn meta_round_trip() {
        let m = Meta {
            rtype: RType::String,
            expire_ms: 1_700_000_000_000,
            version: 42,
            size: 3,
            value: b"abc".to_vec(),
        };
        let e = m.encode();
        assert_eq!(e.len(), META_HEADER_BYTES + 3);
        assert_eq!(e[0], 0);
        assert_eq!(Meta::decode(&e), Some(m));
        assert_eq!(Meta::decode(&e[..10]), None);
        let mut bad = e.clone();
        bad[0] = 0x7f;
        assert_eq!(Meta::decode(&bad), None);
    }

    /// A store over a new slot-routed database of `shards` shards in `dir` (or the one there):
    /// the unit tests' store, here and in the other modules.
    pub(crate) fn open_store(dir: &std::path::Path, shards: usize) -> Store {
        let opts = strata::DbOptions {
            shards: Some(shards),
            routing: Some(strata::Routing::Slot),
            ..Default::default()
        };
        Store::open(Db::open(dir, opts).unwrap(), false).unwrap()
    }

    #[test]
    fn sparse_collections_are_rewritten_with_their_live_members() {
        use crate::keys::{sub_key, sub_prefix, KIND_SUBKEY};
        let dir = tempfile::tempdir().unwrap();
        let s = open_store(dir.path(), 2);
        let (db, key) = (0u8, &b"set"[..]);
        let mut m = Meta::collection(RType::Set, s.next_version());
        m.value = vec![1];
        m.size = 200;
        let mut w = Writes::new();
        for i in 0..200u32 {
            w.put_member(db, key, &sub_key(db, key, m.version, &i.to_be_bytes()), b"");
        }
        w.meta(db, key, Some(&m));
        s.apply(w).unwrap();
        // Delete 190 members, ten per command: each apply adds its deletes to the count.
        for i in (0..190u32).step_by(10) {
            let mut w = Writes::new();
            for j in i..i + 10 {
                w.delete_member(db, key, &sub_key(db, key, m.version, &j.to_be_bytes()));
            }
            m = s.get(db, key).unwrap().unwrap();
            m.size -= 10;
            w.meta(db, key, Some(&m));
            s.apply(w).unwrap();
            let now = s.get(db, key).unwrap().unwrap();
            assert_eq!(now.dead_members(), u64::from(i + 10));
            assert_eq!(now.value[0], 1, "the flags byte is kept");
            // Not sparse yet: no rewrite below twice the live members plus the slack.
            if now.dead_members() < 2 * now.size + REWRITE_SLACK {
                assert_eq!(s.rewrite_if_sparse(db, key, now.clone()).unwrap(), now);
            }
        }
        let m = s.get(db, key).unwrap().unwrap();
        assert_eq!((m.size, m.dead_members()), (10, 190));
        let fresh = s.rewrite_if_sparse(db, key, m.clone()).unwrap();
        assert!(fresh.version > m.version);
        assert_eq!(
            (fresh.size, fresh.dead_members(), fresh.value[0]),
            (10, 0, 1)
        );
        assert_eq!(s.get(db, key).unwrap().unwrap(), fresh);
        let mut live = Vec::new();
        let p = sub_prefix(KIND_SUBKEY, db, key, fresh.version);
        s.scan_prefix(&p, false, |k, _| {
            live.push(u32::from_be_bytes(k[p.len()..].try_into().unwrap()));
            true
        })
        .unwrap();
        assert_eq!(live, (190..200).collect::<Vec<u32>>());
        // A list keeps no count: its deletes are at its ends.
        let mut l = Meta::collection(RType::List, 1);
        l.value = vec![0; 16];
        l.set_dead_members(5);
        assert_eq!((l.dead_members(), l.value.len()), (0, 16));
    }

    #[test]
    fn expiry_and_versions() {
        let dir = tempfile::tempdir().unwrap();
        let s = open_store(dir.path(), 2);
        let (a, b) = (s.next_version(), s.next_version());
        assert!(b > a);
        let m = Meta {
            rtype: RType::String,
            expire_ms: now_ms() - 1,
            version: a,
            size: 1,
            value: b"v".to_vec(),
        };
        s.put(0, b"k", &m).unwrap();
        assert_eq!(s.get(0, b"k").unwrap(), None);
        assert_eq!(s.stats.expired_keys.load(Ordering::Relaxed), 1);
        assert_eq!(s.db().get(&meta_key(0, b"k")).unwrap(), None);
        s.sync_if_dirty().unwrap();
        s.into_db().close().unwrap();
    }

    #[test]
    fn collections_apply_copy_and_versions_survive_reopen() {
        use crate::keys::{sub_key, sub_prefix, KIND_SUBKEY};
        let dir = tempfile::tempdir().unwrap();
        let s = open_store(dir.path(), 2);
        let mut m = Meta::collection(RType::Hash, s.next_version());
        let mut w = Writes::new();
        for f in [&b"f1"[..], b"f2"] {
            w.put_member(0, b"h", &sub_key(0, b"h", m.version, f), b"v");
            m.size += 1;
        }
        w.meta(0, b"h", Some(&m));
        s.apply(w).unwrap();
        let members = |db: u8, key: &[u8], version: u64| {
            let p = sub_prefix(KIND_SUBKEY, db, key, version);
            let mut out = Vec::new();
            s.scan_prefix(&p, false, |k, v| {
                out.push((k[p.len()..].to_vec(), v.to_vec()));
                true
            })
            .unwrap();
            out
        };
        assert_eq!(members(0, b"h", m.version).len(), 2);
        // Copy to another database under another name and a new version.
        let v2 = s.next_version();
        let mut w = Writes::new();
        s.copy_members(&mut w, (0, b"h"), &m, (5, b"copy"), v2)
            .unwrap();
        let mut c = m.clone();
        c.version = v2;
        w.meta(5, b"copy", Some(&c));
        s.apply(w).unwrap();
        assert_eq!(members(5, b"copy", v2), members(0, b"h", m.version));
        assert_eq!(s.get(5, b"copy").unwrap().unwrap().rtype, RType::Hash);
        // Members outlive their deleted key (for the compaction filter to drop); a new
        // incarnation after a reopen gets a version above theirs even so.
        let mut w = Writes::new();
        w.meta(5, b"copy", None);
        s.apply(w).unwrap();
        s.into_db().close().unwrap();
        let s = open_store(dir.path(), 2);
        assert!(
            s.next_version_at(0) > v2,
            "as if the clock went back to 1970"
        );
        s.into_db().close().unwrap();
    }

    #[test]
    fn exec_reads_its_own_writes_and_applies_them_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let s = open_store(dir.path(), 4);
        s.put(0, b"old", &string(0, b"1")).unwrap();
        s.put(0, b"gone", &string(0, b"1")).unwrap();
        let keys: Vec<Vec<u8>> = (0..8).map(|i| format!("k{{{i}}}").into_bytes()).collect();
        let mks: Vec<Vec<u8>> = keys.iter().map(|k| meta_key(0, k)).collect();
        assert!(mks
            .iter()
            .any(|k| s.db.shard_of(k) != s.db.shard_of(&mks[0])));
        let dirty = Arc::new(AtomicBool::new(false));
        s.watches.watch(7, &dirty, 0, b"gone", false);
        let locks = s.lock_for_exec(None);
        let ((), written) = s.run_exec(locks, || {
            for k in &keys {
                s.put(0, k, &string(0, b"v")).unwrap();
            }
            s.delete(0, b"gone").unwrap();
            // Not applied yet: other readers see nothing of it.
            assert_eq!(s.db.get(&mks[0]).unwrap(), None);
            // The transaction's reads see its writes: point reads, batched reads, scans.
            assert_eq!(s.get(0, &keys[3]).unwrap(), Some(string(0, b"v")));
            assert_eq!(s.get(0, b"gone").unwrap(), None);
            let got = s.multi_get(0, &[&keys[0][..], b"old", b"gone"]).unwrap();
            assert_eq!(got.iter().filter(|m| m.is_some()).count(), 2);
            let mut n = 0;
            s.scan_db(0, |_, _| n += 1).unwrap();
            assert_eq!(n, keys.len() + 1);
            // FLUSHDB inside sees them too, and a write after it survives.
            s.flush_db(0).unwrap();
            s.scan_db(0, |_, _| panic!("flushed")).unwrap();
            s.put(0, b"after", &string(0, b"2")).unwrap();
        });
        written.unwrap();
        assert!(dirty.load(Ordering::SeqCst), "the watched key was deleted");
        assert_eq!(s.db.get(&mks[0]).unwrap(), None);
        assert_eq!(s.get(0, b"old").unwrap(), None);
        assert_eq!(s.get(0, b"after").unwrap(), Some(string(0, b"2")));
        // The thread is back to plain front writes.
        s.put(0, b"x", &string(0, b"3")).unwrap();
        assert!(s.db.get(&meta_key(0, b"x")).unwrap().is_some());
        s.into_db().close().unwrap();
    }

    fn string(expire_ms: u64, v: &[u8]) -> Meta {
        Meta {
            rtype: RType::String,
            expire_ms,
            version: 1,
            size: v.len() as u64,
            value: v.to_vec(),
        }
    }

    #[test]
    fn active_expiry_rechecks_the_record_and_survives_reopen() {
        use crate::expire::active_expire_cycle;
        use std::time::Duration;
        let dir = tempfile::tempdir().unwrap();
        let s = open_store(dir.path(), 2);
        let past = now_ms() - 1;
        s.put(0, b"due", &string(past, b"v")).unwrap();
        s.put(0, b"replaced", &string(past, b"v")).unwrap();
        s.put(1, b"later", &string(now_ms() + 3_600_000, b"v"))
            .unwrap();
        s.put(0, b"cleared", &string(now_ms() + 3_600_000, b"v"))
            .unwrap();
        s.put(0, b"cleared", &string(0, b"v")).unwrap();
        // A write the index does not see (as a SET racing with the cycle): the cycle must
        // read the record, not trust the index.
        s.db.put(&meta_key(0, b"replaced"), &string(0, b"new").encode())
            .unwrap();
        assert_eq!(s.expires.len(0), 2);
        assert_eq!(active_expire_cycle(&s, Duration::from_secs(1)).unwrap(), 1);
        assert_eq!(s.stats.expired_keys.load(Ordering::Relaxed), 1);
        assert_eq!(s.db().get(&meta_key(0, b"due")).unwrap(), None);
        assert_eq!(s.get(0, b"replaced").unwrap(), Some(string(0, b"new")));
        assert_eq!((s.expires.len(0), s.expires.len(1)), (0, 1));

        // Reopen: the index is rebuilt from the records, expired keys included.
        s.put(2, b"due2", &string(now_ms() + 50, b"v")).unwrap();
        s.into_db().close().unwrap();
        std::thread::sleep(Duration::from_millis(60));
        let s = open_store(dir.path(), 2);
        assert_eq!(
            (s.expires.len(0), s.expires.len(1), s.expires.len(2)),
            (0, 1, 1)
        );
        assert_eq!(active_expire_cycle(&s, Duration::from_secs(1)).unwrap(), 1);
        assert_eq!(s.db().get(&meta_key(2, b"due2")).unwrap(), None);
        s.flush_db(1).unwrap();
        assert_eq!(s.expires.len(1), 0, "FLUSHDB empties the index");
        s.into_db().close().unwrap();
    }
}
