//! The compaction filter: a user hook ([`Options::compaction_filter`]) that may remove records
//! as flushes and compactions write them and as value-log GC relocates them.
//!
//! Which records it is shown, why a removed record becomes a tombstone, and why the result
//! never changes what a snapshot reads nor brings an older version back:
//! `docs/design.md` §6.4. In short:
//!
//! * only the newest version of a key in a job's input, only if it is a value (tombstones are
//!   never shown), and only if no snapshot registered when the job started can see it (its
//!   sequence is above every snapshot);
//! * a removed record is replaced by a tombstone of the same sequence number, which the job's
//!   ordinary rules then drop when nothing older can exist below it;
//! * before a job that removed something is installed, the log is synced (the filter may have
//!   read the database) and the snapshots are checked again: a snapshot taken while the job ran
//!   could see a removed record, and then the job is redone without the filter.
//!
//! [`Options::compaction_filter`]: crate::Options::compaction_filter

use crate::error::Result;
use crate::key::{SeqNo, ValueKind};
use std::collections::BTreeMap;

/// What the filter decides for one record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    Keep,
    /// Remove the record: readers that start after the job is installed no longer see it,
    /// nor any older version of its key.
    Remove,
}

/// Where the filter is called from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FilterReason {
    /// A memtable is being written as an L0 table.
    Flush,
    /// A compaction writes into `FilterContext::level`.
    Compaction,
    /// Value-log GC is about to rewrite the key's current value.
    Relocation,
}

/// Reads the filter may make of the database that runs it.
pub(crate) trait FilterReads: Sync {
    /// The current value of `key` (as `Db::get`).
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>>;
    /// The value a stored pointer of `key` points at.
    fn resolve(&self, key: &[u8], pointer: &[u8]) -> Result<Vec<u8>>;
}

/// What a filter call knows besides the record.
pub struct FilterContext<'a> {
    pub reason: FilterReason,
    /// The level the record is written to: 0 for a flush and for a GC relocation (it goes to
    /// the memtable), the output level for a compaction.
    pub level: usize,
    reads: &'a dyn FilterReads,
}

impl FilterContext<'_> {
    /// The current value of `key` in this database, as `Db::get` would return it now. A
    /// filter may decide from other records (the Redis server removes a collection's member
    /// records once its metadata record is gone). Reading goes around the write queue and
    /// takes no lock a flush or compaction holds, so it cannot deadlock; the log is synced
    /// before the job that called it is installed, so a logged write the filter saw outlives
    /// a crash (a `disable_wal` write may not: do not remove records on the strength of one).
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.reads.get(key)
    }
}

/// The value of the record shown to the filter, read only if asked for: a separated value
/// costs a value-log read, so a filter that decides from keys alone should not call
/// [`FilterValue::get`].
pub struct FilterValue<'a> {
    key: &'a [u8],
    stored: &'a [u8],
    kind: ValueKind,
    reads: &'a dyn FilterReads,
    resolved: Option<Result<Vec<u8>>>,
    /// Whether a value-log read was made (for the tests of the key-only path).
    pub(crate) reads_made: usize,
}

impl<'a> FilterValue<'a> {
    pub(crate) fn new(
        key: &'a [u8],
        stored: &'a [u8],
        kind: ValueKind,
        reads: &'a dyn FilterReads,
    ) -> Self {
        FilterValue {
            key,
            stored,
            kind,
            reads,
            resolved: None,
            reads_made: 0,
        }
    }

    /// The user value (read from the value log on the first call if it is separated). An
    /// error means the value could not be read; the filter should then keep the record.
    pub fn get(&mut self) -> Result<&[u8]> {
        if self.kind != ValueKind::Pointer {
            return Ok(self.stored);
        }
        if self.resolved.is_none() {
            self.reads_made += 1;
            self.resolved = Some(self.reads.resolve(self.key, self.stored));
        }
        match self.resolved.as_ref().expect("just set") {
            Ok(v) => Ok(v),
            Err(e) => Err(e.clone()),
        }
    }

    /// Whether the value is stored in the value log (reading it costs a random read).
    pub fn is_separated(&self) -> bool {
        self.kind == ValueKind::Pointer
    }
}

/// A user hook deciding which records flushes, compactions and GC keep. Called from
/// background threads, concurrently: it must be `Send + Sync` and should be quick.
pub trait CompactionFilter: Send + Sync {
    /// Decides for `key`, whose value `value` yields on demand.
    fn filter(&self, cx: &FilterContext<'_>, key: &[u8], value: &mut FilterValue<'_>) -> Decision;
}

/// A job's use of the filter: the decision rule and what it removed.
pub(crate) struct FilterRun<'a> {
    filter: &'a dyn CompactionFilter,
    reads: &'a dyn FilterReads,
    reason: FilterReason,
    level: usize,
    /// The largest snapshot registered when the job started: records at or below it are
    /// never shown (a snapshot may read them).
    largest_snapshot: Option<SeqNo>,
    pub stats: FilterStats,
}

/// What a job's filter removed.
#[derive(Debug, Default, Clone)]
pub struct FilterStats {
    pub removed: u64,
    /// The smallest sequence number of a removed record (a snapshot at or above it, taken
    /// while the job ran, could read it).
    pub min_removed_seq: Option<SeqNo>,
    /// Bytes of separated values whose pointer was removed, per value-log file.
    pub removed_pointers: BTreeMap<u64, u64>,
    /// Value-log reads the filter asked for.
    pub value_reads: u64,
}

impl<'a> FilterRun<'a> {
    pub(crate) fn new(
        filter: &'a dyn CompactionFilter,
        reads: &'a dyn FilterReads,
        reason: FilterReason,
        level: usize,
        largest_snapshot: Option<SeqNo>,
    ) -> Self {
        FilterRun {
            filter,
            reads,
            reason,
            level,
            largest_snapshot,
            stats: FilterStats::default(),
        }
    }

    /// Whether the newest entry of a key in the job's input, `(seq, kind)`, may be shown.
    pub(crate) fn eligible(&self, seq: SeqNo, kind: ValueKind) -> bool {
        kind != ValueKind::Delete && self.largest_snapshot.is_none_or(|s| seq > s)
    }

    /// Asks the filter about an eligible entry; records a removal.
    pub(crate) fn removes(
        &mut self,
        user_key: &[u8],
        seq: SeqNo,
        kind: ValueKind,
        stored: &[u8],
    ) -> bool {
        let cx = FilterContext {
            reason: self.reason,
            level: self.level,
            reads: self.reads,
        };
        let mut v = FilterValue::new(user_key, stored, kind, self.reads);
        let d = self.filter.filter(&cx, user_key, &mut v);
        self.stats.value_reads += v.reads_made as u64;
        if d != Decision::Remove {
            return false;
        }
        self.stats.removed += 1;
        self.stats.min_removed_seq = Some(self.stats.min_removed_seq.map_or(seq, |m| m.min(seq)));
        if kind == ValueKind::Pointer {
            if let Some(p) = crate::vlog::ValuePointer::decode(stored) {
                *self.stats.removed_pointers.entry(p.file).or_insert(0) += u64::from(p.len);
            }
        }
        true
    }
}

/// Asks `filter` about one record GC is about to relocate (the key's current value, read
/// from the log: no further read needed).
pub(crate) fn relocation_removes(
    filter: &dyn CompactionFilter,
    reads: &dyn FilterReads,
    key: &[u8],
    value: &[u8],
) -> bool {
    let cx = FilterContext {
        reason: FilterReason::Relocation,
        level: 0,
        reads,
    };
    let mut v = FilterValue::new(key, value, ValueKind::Value, reads);
    filter.filter(&cx, key, &mut v) == Decision::Remove
}
