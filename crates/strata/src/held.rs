//! Several shards held on the calling thread at once, for a run of direct executions that
//! spans them (the Redis server's pipeline of single-shard commands of several shards: one
//! engine write per shard for the whole run instead of one per stretch of one shard's
//! commands).
//!
//! **Protocol.** [`HeldShards::txn`] takes a shard's latch exclusively the first time the
//! run needs it, under the conditions of a single direct execution
//! ([`crate::ShardedDb::try_exec_here`]: the shard idle, the database healthy, not a worker
//! thread), and never waits: a busy shard is `None`, and the caller ends the run there
//! (commits what it ran and sends the rest the ordinary way). Nothing else reads or writes
//! a held shard: its worker waits for the latch, direct reads and writes of other threads
//! take it shared. Each shard's transaction buffers its writes, so the run's later
//! executions read its earlier ones'. [`HeldShards::commit`] applies each shard's writes
//! with one engine write, in the order the run first took the shards, all inside one hold
//! of the write epoch (a snapshot sees all of the run's writes or none), then releases
//! every latch: no reader sees one shard's part of the run without the others'. Dropped
//! without a commit, the buffered writes are discarded (a panic in a run writes nothing).
//!
//! Taking latches only by trying means a holder never waits for anything while it holds
//! one, so holding several cannot deadlock. See `docs/design.md` §11.4.

use crate::db::ShardedDb;
use crate::engine::Engine;
use crate::exec::ShardTxn;
use parking_lot::RwLockWriteGuard;
use smallvec::SmallVec;
use strata_engine::Result;

/// What [`HeldShards::commit`] returns: each held shard and the outcome of its write, in
/// the order they were taken (inline for the usual one or two shards: no allocation).
pub type Committed = SmallVec<[(usize, Result<()>); 2]>;

/// Shards held by the calling thread, each with its transaction (see the module comment).
pub struct HeldShards<'a, E: Engine> {
    db: &'a ShardedDb<E>,
    /// In the order the run first took them.
    held: SmallVec<[(RwLockWriteGuard<'a, ()>, ShardTxn<E>); 2]>,
}

impl<'a, E: Engine> HeldShards<'a, E> {
    pub(crate) fn new(db: &'a ShardedDb<E>) -> Self {
        HeldShards {
            db,
            held: SmallVec::new(),
        }
    }

    /// The transaction of shard `shard`, taking the shard if this does not hold it yet;
    /// `None` (without waiting) if the shard is busy, the database failed, or this is a
    /// worker thread.
    pub fn txn(&mut self, shard: usize) -> Option<&mut ShardTxn<E>> {
        let at = match self.held.iter().position(|(_, t)| t.shard() == shard) {
            Some(at) => at,
            None => {
                let taken = self.db.try_latch(shard)?;
                self.held.push(taken);
                self.held.len() - 1
            }
        };
        Some(&mut self.held[at].1)
    }

    /// Applies each held shard's writes with one engine write and releases every shard;
    /// the outcome of each shard's write, in the order the shards were taken (a shard
    /// with nothing to write is `Ok`). Once one write fails, the database refuses the
    /// later ones (the error of each).
    pub fn commit(self) -> Committed {
        self.commit_then(|_| ())
    }

    /// [`HeldShards::commit`], running `before_release` on the outcomes while every shard
    /// is still held: what it does (a replication log's append of the run's effects) is
    /// ordered with the shards' writes, as a worker does its completions before it takes
    /// the next group. Released after, a later writer of the same key could append first.
    pub fn commit_then(self, before_release: impl FnOnce(&Committed)) -> Committed {
        let HeldShards { db, held } = self;
        let mut latches: SmallVec<[RwLockWriteGuard<'a, ()>; 2]> = SmallVec::new();
        let mut out = Committed::new();
        {
            let _epoch = held
                .iter()
                .any(|(_, t)| t.has_writes())
                .then(|| db.write_epoch());
            for (latch, txn) in held {
                out.push((txn.shard(), db.apply_held(txn)));
                latches.push(latch);
            }
        }
        before_release(&out);
        drop(latches);
        out
    }
}
