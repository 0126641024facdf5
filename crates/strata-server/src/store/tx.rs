//! The explicit transaction: where a command's reads and writes go, as a value the command
//! is given ([`Tx`]), chosen once when it starts, never looked up in thread-local state.
//!
//! A command on a shard's worker (or run in place under the shard's lock) reads and writes
//! through the worker's group ([`Store::with_shard_txn`]); the queued commands of an EXEC,
//! and a script's calls, through the EXEC's buffered writes with the stripes it holds
//! ([`Tx::run_exec_then`]); every other command and service through the front
//! ([`Store::front`]: the engine directly, under the stripes the dispatcher took). The
//! transaction also collects the keys with blocked clients that its command wrote (Redis's
//! `ready_keys`), which the dispatcher serves when the command ends (`blocking.rs`).
//!
//! A `Tx` is used by one thread at a time (it is not `Sync`): its state sits in `RefCell`s,
//! borrowed for the length of one engine call. A scan's callback may read through the same
//! `Tx` but not write (the group is borrowed for the scan).
//!
//! Layer: store and types.

use super::meta::{corrupt, REWRITE_SLACK};
use super::{now_ms, stripes, DbKey, ExecLocks, KeyGuard, Meta, RType, Store, TypeError, Writes};
use crate::keys::meta_key;
use crate::notify::Class;
use crate::txn::{merge_scan, FrontTxn};
use std::cell::RefCell;
use std::sync::atomic::Ordering;
use strata::{EngineIter, IterOptions, ShardTxn, StrataEngine, WriteBatch, WriteOptions};
use strata_engine::Result;

/// Where a [`Tx`]'s reads and writes go: chosen once, when the command starts.
enum Route {
    /// The engine, directly (a command on the connection's thread, a service).
    Front,
    /// A command on a shard's worker (or in place under its lock): the group's transaction,
    /// moved in for the command's run and back out after it.
    Shard(ShardTxn<StrataEngine>),
    /// The queued commands of an EXEC (or a script's calls), with the stripes it holds.
    Exec(FrontTxn, ExecLocks),
}

/// The keyspace as one command sees it: the store, read and written through the
/// command's transaction. Dereferences to the [`Store`] for what does not depend on it
/// (configuration, counters, versions, the services' registries).
pub struct Tx<'s> {
    store: &'s Store,
    route: RefCell<Route>,
    /// Keys with blocked clients that the command wrote (Redis's `ready_keys`); `None`
    /// while nobody collects them (outside a command: a service's write wakes nobody).
    ready: RefCell<Option<Vec<DbKey>>>,
}

impl std::ops::Deref for Tx<'_> {
    type Target = Store;

    fn deref(&self) -> &Store {
        self.store
    }
}

impl Store {
    /// The front transaction: reads and writes go to the engine directly.
    pub fn front(&self) -> Tx<'_> {
        Tx::new(self, Route::Front)
    }

    /// Runs `f` with the transaction of a worker's group (`txn`): reads and writes in `f`
    /// go through it. The group's transaction is put back even if `f` panics.
    pub fn with_shard_txn<R>(
        &self,
        txn: &mut ShardTxn<StrataEngine>,
        f: impl FnOnce(&Tx<'_>) -> R,
    ) -> R {
        struct Restore<'a, 's> {
            txn: &'a mut ShardTxn<StrataEngine>,
            tx: Tx<'s>,
        }
        impl Drop for Restore<'_, '_> {
            fn drop(&mut self) {
                let route = std::mem::replace(self.tx.route.get_mut(), Route::Front);
                if let Route::Shard(t) = route {
                    *self.txn = t;
                }
            }
        }
        let taken = txn.take();
        let r = Restore {
            txn,
            tx: Tx::new(self, Route::Shard(taken)),
        };
        f(&r.tx)
    }
}

impl<'s> Tx<'s> {
    fn new(store: &'s Store, route: Route) -> Tx<'s> {
        Tx {
            store,
            route: RefCell::new(route),
            ready: RefCell::new(None),
        }
    }

    /// Whether the command runs on a shard's worker (its keys' stripes are held for it).
    pub fn on_worker(&self) -> bool {
        matches!(*self.route.borrow(), Route::Shard(_))
    }

    /// On a worker, a point in the group's writes to roll back to ([`Tx::rollback_to`]);
    /// `None` off the workers.
    pub(crate) fn savepoint(&self) -> Option<usize> {
        match &*self.route.borrow() {
            Route::Shard(t) => Some(t.savepoint()),
            _ => None,
        }
    }

    /// Drops the writes the command buffered in its worker's group since `savepoint` (a
    /// script that must run again elsewhere: `cmd/scripting.rs`).
    pub(crate) fn rollback_to(&self, savepoint: usize) {
        if let Route::Shard(t) = &mut *self.route.borrow_mut() {
            t.rollback_to(savepoint);
        }
    }

    /// Starts collecting the keys with blocked clients that the command writes.
    pub(crate) fn begin_ready(&self) {
        *self.ready.borrow_mut() = Some(Vec::new());
    }

    /// The keys noted ready since the last call (collecting goes on).
    pub(crate) fn take_ready(&self) -> Vec<DbKey> {
        self.ready
            .borrow_mut()
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }

    /// Stops collecting (the command's blocked clients are served).
    pub(crate) fn end_ready(&self) {
        *self.ready.borrow_mut() = None;
    }

    /// Marks `key` of `db` ready for its blocked clients as a write would (SWAPDB brought
    /// another database under them); served when the running command ends.
    pub(crate) fn mark_ready(&self, db: u8, key: &[u8]) {
        self.note_ready(db, key)
    }

    /// Notes that the command wrote `key`, which clients may be blocked on (Redis's
    /// `signalKeyAsReady`): they are served when the command ends (`blocking.rs`).
    fn note_ready(&self, db: u8, key: &[u8]) {
        if !self.waited.contains(db, key) {
            return;
        }
        if let Some(v) = self.ready.borrow_mut().as_mut() {
            if !v.iter().any(|(d, k)| *d == db && k == key) {
                v.push((db, key.to_vec()));
            }
        }
    }

    /// After a successful write of `key` (`None`: deleted): the expiry index, WATCH,
    /// tracking, and the key's blocked clients.
    pub(super) fn note_write(&self, db: u8, key: &[u8], meta: Option<&Meta>) {
        self.store.note_written(db, key, meta);
        self.note_ready(db, key);
    }

    // ---- the store's reads and writes: through the worker's transaction when a command
    // runs on a worker, through the front otherwise -------------------------------------

    fn raw_get(&self, k: &[u8]) -> Result<Option<Vec<u8>>> {
        match &*self.route.borrow() {
            Route::Shard(t) => t.get(k),
            Route::Exec(t, _) => match t.get(k) {
                Some(v) => Ok(v),
                None => self.db.get(k),
            },
            Route::Front => self.db.get(k),
        }
    }

    fn raw_multi_get(&self, ks: &[Vec<u8>]) -> Vec<Result<Option<Vec<u8>>>> {
        let mine = match &*self.route.borrow() {
            Route::Shard(t) => return t.multi_get(ks),
            Route::Front => return self.front_multi_get(ks),
            Route::Exec(t, _) => ks.iter().map(|k| t.get(k)).collect::<Vec<_>>(),
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
    pub(super) fn raw_write(&self, b: WriteBatch) -> Result<()> {
        crate::effects::note_write();
        self.write_uncounted(b)
    }

    /// [`Tx::raw_write`] not counted as the running command's change (lazy expiry:
    /// propagated as the expired key's deletion instead).
    fn write_uncounted(&self, mut b: WriteBatch) -> Result<()> {
        let wo = self.wo();
        match &mut *self.route.borrow_mut() {
            Route::Shard(t) => {
                if wo.sync {
                    t.sync();
                }
                // Moved into the group's transaction: the batch is not needed after.
                std::mem::take(&mut b)
                    .into_ops()
                    .try_for_each(|(k, v)| match v {
                        Some(v) => t.put_owned(k, v),
                        None => t.delete(&k),
                    })
            }
            Route::Exec(t, _) => {
                if wo.sync {
                    t.sync();
                }
                for (k, v) in b.ops() {
                    match v {
                        Some(v) => t.put(k, v),
                        None => t.delete(k),
                    }
                }
                Ok(())
            }
            Route::Front => {
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
        // In an EXEC: its own writes over the database's records.
        let mine = match &*self.route.borrow() {
            Route::Shard(t) => return t.scan(lo, hi, reverse, &mut f),
            Route::Exec(t, _) => t.range(lo, hi),
            Route::Front => Vec::new(),
        };
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

    /// [`Tx::scan_range`] over every record that starts with `prefix`.
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

    /// Tells the expiry index and the access table of a key loaded by a full sync from its
    /// metadata record alone (the snapshot stream's records are written as they come,
    /// `replica/ship.rs`), as [`Tx::take_loaded`] does for a key decoded from an RDB.
    pub fn note_loaded(&self, db: u8, key: &[u8], meta: &Meta) {
        self.note_write(db, key, Some(meta));
    }

    /// The records of `w`, for a bulk load that writes them itself, outside the write path
    /// (a full sync's new generation, `replica/load.rs`): nothing is written here, and it is
    /// not counted as the running command's change. The expiry index, the access table,
    /// WATCH, tracking and blocked clients are told of its keys as [`Tx::apply`] tells them;
    /// keyspace notifications are not sent (the keys are not visible yet).
    pub fn take_loaded(&self, w: Writes) -> WriteBatch {
        for (db, key, m) in &w.metas {
            self.note_write(*db, key, m.as_ref());
        }
        w.batch
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

    /// Writes one record (`None`: deletes it), counted as [`Tx::raw_write`] counts. On a
    /// worker the record goes straight into the group's transaction, moved, not copied:
    /// every single-record write of a command on a shard (SET's, DEL's).
    fn raw_write_one(&self, k: Vec<u8>, v: Option<Vec<u8>>) -> Result<()> {
        if !self.on_worker() {
            let mut b = WriteBatch::new();
            match &v {
                Some(v) => b.put(&k, v),
                None => b.delete(&k),
            };
            return self.raw_write(b);
        }
        crate::effects::note_write();
        let wo = self.wo();
        match &mut *self.route.borrow_mut() {
            Route::Shard(t) => {
                if wo.sync {
                    t.sync();
                }
                match v {
                    Some(v) => t.put_owned(k, v),
                    None => t.delete(&k),
                }
            }
            _ => unreachable!("a worker's transaction stays one while the command runs"),
        }
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
        match &mut *self.route.borrow_mut() {
            Route::Shard(_) => KeyGuard::default(),
            Route::Exec(_, l) => {
                l.ensure(&self.stripes, &stripes(keys));
                KeyGuard::default()
            }
            Route::Front => self.store.lock_stripes(keys, shared),
        }
    }

    /// [`Tx::lock_for_command`] for a command whose keys its key specs cannot find in its
    /// arguments: every stripe, exclusively (as EXEC takes them for such a command).
    pub(crate) fn lock_every_stripe_for_command(&self) -> KeyGuard<'_> {
        match &*self.route.borrow() {
            Route::Front => self.store.lock_every_stripe(),
            Route::Shard(_) | Route::Exec(..) => KeyGuard::default(),
        }
    }

    /// The live metadata of `key` (the caller holds its stripe). An expired key is deleted
    /// and reads as absent, as Redis's lazy expiry. A key found counts as accessed (Redis's
    /// `lookupKey`: OBJECT FREQ and IDLETIME).
    pub fn get(&self, db: u8, key: &[u8]) -> Result<Option<Meta>> {
        self.get_with(db, key, true)
    }

    /// [`Tx::get`] without counting an access (Redis's `LOOKUP_NOTOUCH`: OBJECT, TYPE,
    /// EXISTS, TTL, MEMORY USAGE).
    pub fn peek(&self, db: u8, key: &[u8]) -> Result<Option<Meta>> {
        self.get_with(db, key, false)
    }

    fn get_with(&self, db: u8, key: &[u8], touch: bool) -> Result<Option<Meta>> {
        let mk = meta_key(db, key);
        let Some(raw) = self.raw_get(&mk)? else {
            return Ok(None);
        };
        let meta = Meta::decode_owned(raw).ok_or_else(|| corrupt(key))?;
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

    /// Like [`Tx::get`], counting a keyspace hit or miss.
    pub fn lookup_read(&self, db: u8, key: &[u8]) -> Result<Option<Meta>> {
        self.lookup_read_with(db, key, true)
    }

    /// Like [`Tx::peek`], counting a keyspace hit or miss (EXISTS, TTL).
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

    /// [`Tx::lookup_read`] of a key that must hold type `t` (a typed handle's read):
    /// `WrongType` if it holds another.
    pub fn lookup_read_typed(
        &self,
        db: u8,
        key: &[u8],
        t: RType,
    ) -> std::result::Result<Option<Meta>, TypeError> {
        self.lookup_read(db, key)?.map(|m| m.of_type(t)).transpose()
    }

    /// [`Tx::get`] of a key that must hold type `t` (a typed handle's write: no keyspace
    /// hit or miss, as Redis's `lookupKeyWrite`): `WrongType` if it holds another.
    pub fn get_typed(
        &self,
        db: u8,
        key: &[u8],
        t: RType,
    ) -> std::result::Result<Option<Meta>, TypeError> {
        self.get(db, key)?.map(|m| m.of_type(t)).transpose()
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
        self.raw_write_one(meta_key(db, key), Some(meta.encode()))?;
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
        self.raw_write_one(meta_key(db, key), None)?;
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

    /// Runs `f` (an EXEC's queued commands) with a transaction of buffered writes: reads
    /// in `f` see the writes made earlier in `f`; then applies them as one write (atomic
    /// across shards) and releases `locks`. Returns `f`'s result and the write's.
    #[cfg(test)]
    pub fn run_exec<R>(&self, locks: ExecLocks, f: impl FnOnce(&Tx<'_>) -> R) -> (R, Result<()>) {
        self.run_exec_then(locks, |tx| (f(tx), true), |_| {})
    }

    /// Runs `f` (an EXEC's queued commands, a script) with a transaction of buffered
    /// writes (`txn.rs`), then applies them as one write (atomic across shards) if `f` says
    /// so (a script that must run again under more stripes drops them), and runs `after`
    /// with the write's outcome before the stripes are released (the replication log's
    /// append, `repl/sequencer.rs`). The keys with blocked clients that `f` writes are
    /// collected by this transaction, served when its command ends.
    pub fn run_exec_then<R>(
        &self,
        locks: ExecLocks,
        f: impl FnOnce(&Tx<'_>) -> (R, bool),
        after: impl FnOnce(&Result<()>),
    ) -> (R, Result<()>) {
        debug_assert!(
            matches!(*self.route.borrow(), Route::Front),
            "EXEC inside a transaction"
        );
        let inner = Tx {
            store: self.store,
            route: RefCell::new(Route::Exec(FrontTxn::new(), locks)),
            ready: RefCell::new(self.ready.borrow_mut().take()),
        };
        let (r, apply) = f(&inner);
        *self.ready.borrow_mut() = inner.ready.into_inner();
        let Route::Exec(txn, locks) = inner.route.into_inner() else {
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
}
