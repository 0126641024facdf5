//! The compaction filter of the Redis server: reclaims the space of deleted and expired keys.
//!
//! Deleting a collection writes one tombstone, on its metadata record; its member and score
//! records (`keys::sub_key`) stay behind, unreachable, because every read goes through the
//! metadata's version. This filter, installed in every shard's engine
//! (`strata_engine::Options::compaction_filter`), removes them as flushes and compactions
//! write them (and as value-log GC relocates them):
//!
//! * a member or score record whose key's **current** metadata record is missing, expired,
//!   or of another version. The metadata is looked up with a point read of the same shard's
//!   engine, through the filter's context (`FilterContext::get`): the filter holds no handle
//!   to the database, so there is no reference cycle, and the read goes around the shard's
//!   worker and write queue, so a compaction that a stalled writer waits for never waits for
//!   that writer. A key's members always live in its shard (they share its slot). Such a
//!   record can never become reachable again: versions are never reused (`Store::next_version`
//!   starts above every version on disk, and a removed record is no longer on disk because
//!   nothing of its version is reachable either);
//! * a metadata record whose expiry has passed. Redis treats such a key as gone already
//!   (lazy expiry deletes it on access, active expiry on its next sample); the engine writes
//!   a tombstone in its place where an older record could be below, so an older incarnation
//!   never reappears (`docs/design.md` §6.4). The expiry index keeps its entry until active
//!   expiry samples it, finds no record, and drops it (the cycle re-reads every record before
//!   it deletes one, `Store::expire_if_due`); only the `expired_keys` counter misses keys the
//!   filter removed first.
//!
//! What keeps this safe beyond the engine's own rules (snapshots, tombstones): the engine
//! syncs the log before it installs a job that removed records, so a deletion the filter saw
//! outlives any crash that keeps the removal; and the sharded front keeps everything while a
//! cross-shard part that a crash would roll back is applied in the shard
//! (`strata::PartsInDoubt`).
//!
//! Consecutive records of one collection ask about the same metadata: the last answer is
//! cached. A cached "remove" stays true for ever (the version never comes back); a cached
//! "keep" may turn stale, which only keeps a record until a later compaction.

use crate::keys::{meta_key, parse_sub_key, user_key_of_meta};
use crate::store::{now_ms, Meta};
use parking_lot::Mutex;
use std::sync::Arc;
use strata_engine::compaction::{CompactionFilter, Decision, FilterContext, FilterValue};

/// See the module documentation.
#[derive(Default)]
pub struct RedisFilter {
    /// The last metadata lookup: (metadata key, version asked about, whether it is live).
    last: Mutex<Option<(Vec<u8>, u64, bool)>>,
}

impl RedisFilter {
    pub fn new() -> Arc<RedisFilter> {
        Arc::new(RedisFilter::default())
    }

    /// Whether incarnation `version` of the key whose metadata record is `mk` is live now.
    fn live(&self, cx: &FilterContext<'_>, mk: Vec<u8>, version: u64) -> bool {
        if let Some((k, v, live)) = &*self.last.lock() {
            if *k == mk && *v == version {
                return *live;
            }
        }
        let live = match cx.get(&mk) {
            Ok(Some(raw)) => match Meta::decode(&raw) {
                Some(m) => m.version == version && !m.expired_at(now_ms()),
                // A record that does not decode is corruption: keep everything it may own.
                None => true,
            },
            Ok(None) => false,
            Err(_) => true,
        };
        *self.last.lock() = Some((mk, version, live));
        live
    }
}

impl CompactionFilter for RedisFilter {
    fn filter(&self, cx: &FilterContext<'_>, key: &[u8], value: &mut FilterValue<'_>) -> Decision {
        if let Some((_, db, user_key, version, _)) = parse_sub_key(key) {
            // Decided from the key and a metadata read: the member's value is never read.
            return if self.live(cx, meta_key(db, user_key), version) {
                Decision::Keep
            } else {
                Decision::Remove
            };
        }
        if user_key_of_meta(key).is_some() {
            return match value.get().ok().and_then(Meta::decode) {
                Some(m) if m.expired_at(now_ms()) => Decision::Remove,
                _ => Decision::Keep,
            };
        }
        Decision::Keep
    }
}

/// `opts` with the server's compaction filter in every shard's engine.
pub fn with_filter(mut opts: strata::DbOptions) -> strata::DbOptions {
    opts.engine.compaction_filter = Some(RedisFilter::new());
    opts
}
