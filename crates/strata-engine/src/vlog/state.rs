//! [`VlogManifest`]: what the MANIFEST knows about the value log, rebuilt by applying the
//! value-log fields of each [`VersionEdit`] in order.

use crate::version::VersionEdit;
use std::collections::{BTreeMap, BTreeSet};

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VlogManifest {
    /// The durable head: every log record before `(file, offset)` is reflected in tables.
    /// `None` if the value log was never used.
    pub head: Option<(u64, u64)>,
    /// Per file: bytes of entries that tables point at (garbage found by flushes and GC
    /// verification scans subtracted).
    pub live: BTreeMap<u64, u64>,
    /// Files GC emptied: no reader can need them; removed from disk when seen.
    pub obsolete: BTreeSet<u64>,
    /// Files whose frames end before the file does (a tail torn by a crash): where.
    pub tails: BTreeMap<u64, u64>,
}

impl VlogManifest {
    pub fn apply(&mut self, e: &VersionEdit) {
        if let Some(h) = e.vlog_head {
            self.head = Some(h);
        }
        for (f, n) in &e.vlog_live_added {
            if !self.obsolete.contains(f) {
                *self.live.entry(*f).or_insert(0) += n;
            }
        }
        for (f, n) in &e.vlog_garbage {
            if let Some(l) = self.live.get_mut(f) {
                *l = l.saturating_sub(*n);
            }
        }
        for (f, at) in &e.vlog_tails {
            self.tails.insert(*f, *at);
        }
        for f in &e.vlog_obsolete {
            self.live.remove(f);
            self.tails.remove(f);
            self.obsolete.insert(*f);
        }
        for f in &e.vlog_deleted {
            self.live.remove(f);
            self.tails.remove(f);
            self.obsolete.remove(f);
        }
    }

    /// Adds the fields that recreate this state from nothing to `e`.
    pub fn snapshot_into(&self, e: &mut VersionEdit) {
        e.vlog_head = self.head;
        e.vlog_live_added = self.live.iter().map(|(f, n)| (*f, *n)).collect();
        e.vlog_obsolete = self.obsolete.iter().copied().collect();
        e.vlog_tails = self.tails.iter().map(|(f, n)| (*f, *n)).collect();
    }

    /// Live bytes of `file` as the MANIFEST knows them.
    pub fn live_bytes(&self, file: u64) -> u64 {
        self.live.get(&file).copied().unwrap_or(0)
    }
}
