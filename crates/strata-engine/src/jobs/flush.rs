//! Flush: an immutable memtable becomes an L0 table (or an L0 tier table), with the value-log
//! garbage its newer versions reveal; and the waits for it (`flush_and_wait`,
//! `flush_unlogged`). Protocol: `docs/design.md` §6.

use crate::compaction::filter::{FilterReason, FilterStats};
use crate::compaction::{self};
use crate::error::{Error, Result};
use crate::iter::InternalIterator;
use crate::key::{SeqNo, ValueKind};
use crate::memtable::MemTable;
use crate::options::WriteOptions;
use crate::state::{DbInner, DONE_RECHECK};
use crate::stats::Counters;
use crate::version::{Version, VersionEdit};
use std::sync::Arc;

impl DbInner {
    /// Freezes the memtable and waits until every frozen memtable is flushed.
    pub(crate) fn flush_and_wait(&self) -> Result<()> {
        self.write(&WriteOptions::default(), None, true)?;
        let mut st = self.state.lock();
        loop {
            self.check_bg_error()?;
            if st.imms.is_empty() {
                return Ok(());
            }
            self.done_cv.wait_for(&mut st, DONE_RECHECK);
        }
    }

    /// Makes the writes no log replays (`WriteOptions::disable_wal`) durable by flushing
    /// the memtables that hold them, and waits. Called before GC records a file obsolete
    /// (GC let such a write decide that an older value was garbage, so the write must
    /// outlive a crash), and by a clean close.
    pub(crate) fn flush_unlogged(&self) -> Result<()> {
        let sv = self.super_version.load_full();
        let targets: Vec<Arc<MemTable>> = std::iter::once(&sv.mem)
            .chain(sv.imms.iter())
            .filter(|m| m.has_unlogged())
            .cloned()
            .collect();
        if targets.is_empty() {
            return Ok(());
        }
        if sv.mem.has_unlogged() {
            self.write(&WriteOptions::default(), None, true)?;
        }
        let mut st = self.state.lock();
        loop {
            self.check_bg_error()?;
            let pending = std::iter::once(&st.mem)
                .chain(st.imms.iter())
                .any(|m| targets.iter().any(|t| Arc::ptr_eq(m, t)));
            if !pending {
                return Ok(());
            }
            self.done_cv.wait_for(&mut st, DONE_RECHECK);
        }
    }

    /// Flushes the oldest immutable memtable to an L0 table. `state.flushing` is set.
    pub(super) fn flush_one(&self) -> Result<()> {
        let imm = {
            let st = self.state.lock();
            st.imms.first().cloned()
        };
        let Some(imm) = imm else {
            self.state.lock().flushing = false;
            return Ok(());
        };
        let mut use_filter = self.opts.compaction_filter.is_some();
        let (mut st, _snapshots, meta, mut garbage, filtered) = loop {
            let version = self.state.lock().versions.hand_out();
            let result = self
                .write_l0_table(&imm, &version, use_filter)
                .and_then(|(m, f)| Ok((m, f, self.flush_garbage(&imm, &version)?)))
                .and_then(|r| self.sync_if_filtered(&r.1).map(|()| r));
            drop(version);
            let mut st = self.state.lock();
            let (meta, filtered, garbage) = match result {
                Ok(r) => r,
                Err(e) => {
                    st.flushing = false;
                    return Err(e);
                }
            };
            match self.snapshots_allow(&filtered) {
                Some(guard) => break (st, guard, meta, garbage, filtered),
                None => {
                    // A snapshot taken while the flush ran could read what the filter
                    // removed: write the memtable again without the filter.
                    if let Some(m) = &meta {
                        st.pending_outputs.remove(&m.number);
                        self.delete_files(vec![(m.kind(), m.number)]);
                    }
                    Counters::add(&self.counters.filter_retries, 1);
                    use_filter = false;
                }
            }
        };
        st.flushing = false;
        // The filter removed pointers of this memtable, whose bytes the edit adds as live.
        for (file, bytes) in &filtered.removed_pointers {
            match garbage.iter_mut().find(|(f, _)| f == file) {
                Some((_, b)) => *b += bytes,
                None => garbage.push((*file, *bytes)),
            }
        }
        Counters::add(&self.counters.filter_removed, filtered.removed);
        Counters::add(&self.counters.filter_value_reads, filtered.value_reads);
        let mut edit = VersionEdit {
            vlog_garbage: garbage,
            ..VersionEdit::default()
        };
        let bytes = meta.as_ref().map_or(0, |m| m.size);
        if meta.as_ref().is_some_and(|m| m.tier) {
            Counters::add(&self.counters.l0_tier_flushes, 1);
        }
        if let Some(m) = meta {
            st.pending_outputs.remove(&m.number);
            edit.new_files.push((0, m));
        }
        let next = st.imms.get(1).unwrap_or(&st.mem);
        edit.log_number = Some(next.wal_number());
        if let Some(head) = next.vlog_start() {
            edit.vlog_head = Some(head);
        }
        edit.vlog_live_added = imm.vlog_refs();
        let found_garbage = !edit.vlog_garbage.is_empty();
        st.versions.last_sequence = st.versions.last_sequence.max(self.visible_seq());
        st.versions.log_and_apply(edit)?;
        st.imms.remove(0);
        self.install_super_version(&mut st);
        drop(_snapshots);
        if found_garbage {
            self.gc_cv.notify_all();
        }
        Counters::add(&self.counters.flush_bytes, bytes);
        Counters::add(&self.counters.flushes, 1);
        let obsolete = self.collect_obsolete(&st);
        drop(st);
        self.delete_files(obsolete);
        Ok(())
    }

    /// Value-log garbage that flushing `mem` reveals (`docs/design.md` §6.2):
    /// every separated value that a newer version of its key in `mem` shadows, whether that
    /// value is in `mem` itself or is the key's newest entry in the tables of `version`.
    /// A value that a live snapshot can still see is not counted (GC's verification scans
    /// find it later).
    fn flush_garbage(&self, mem: &Arc<MemTable>, version: &Version) -> Result<Vec<(u64, u64)>> {
        let tree_has_pointers = {
            let st = self.state.lock();
            if st.vlog_files.is_empty() {
                return Ok(Vec::new());
            }
            st.versions.vlog.live.values().any(|n| *n > 0)
        };
        let snaps: Vec<SeqNo> = self.snapshots.lock().keys().copied().collect();
        let skipped = std::cell::Cell::new(false);
        let visible_to_snapshot = |old: SeqNo, new: SeqNo| {
            let v = snaps.iter().any(|s| *s >= old && *s < new);
            skipped.set(skipped.get() | v);
            v
        };
        let mut garbage: std::collections::BTreeMap<u64, u64> = Default::default();
        // The L0 tier's pointers that compaction copies are counted by the compaction that
        // copies or drops them (`docs/design.md` §2.9), never here.
        let below = self.opts.unseparate_below();
        let counted = |key: &[u8], raw: &[u8]| {
            crate::vlog::ValuePointer::decode(raw)
                .filter(|p| !compaction::job::copied(p, key.len(), below))
        };
        let mut count = |p: crate::vlog::ValuePointer| {
            *garbage.entry(p.file).or_insert(0) += u64::from(p.len);
        };
        let mut it = mem.iter();
        it.seek_to_first();
        // (user key, sequence of its oldest version seen so far in `mem`)
        let mut current: Option<(Vec<u8>, SeqNo)> = None;
        let tree_check =
            |key: &[u8], oldest: SeqNo, count: &mut dyn FnMut(crate::vlog::ValuePointer)| {
                if !tree_has_pointers {
                    return Ok(());
                }
                if let Some((seq, ValueKind::Pointer, raw)) = self.table_entry(version, key)? {
                    if let Some(ptr) = counted(key, &raw) {
                        if !visible_to_snapshot(seq, oldest) {
                            count(ptr);
                        }
                    }
                }
                Ok::<(), Error>(())
            };
        while it.valid() {
            let Some(p) = crate::key::parse_internal_key(it.key()) else {
                return Err(Error::corruption("<memtable>", 0, "malformed internal key"));
            };
            match &mut current {
                Some((k, newer)) if k.as_slice() == p.user_key => {
                    if p.kind == ValueKind::Pointer {
                        if let Some(ptr) = counted(p.user_key, it.value()) {
                            if !visible_to_snapshot(p.seq, *newer) {
                                count(ptr);
                            }
                        }
                    }
                    *newer = p.seq;
                }
                _ => {
                    if let Some((k, oldest)) = current.take() {
                        tree_check(&k, oldest, &mut count)?;
                    }
                    current = Some((p.user_key.to_vec(), p.seq));
                }
            }
            it.next();
        }
        if let Some((k, oldest)) = current.take() {
            tree_check(&k, oldest, &mut count)?;
        }
        if skipped.get() {
            self.state.lock().gc.needs_verify = true;
        }
        Ok(garbage.into_iter().collect())
    }

    /// Writes a memtable as a table (synced, directory synced). `None` if it is empty. With
    /// the filter, the newest entry of each key it removes is written as a tombstone (older
    /// versions may live in deeper levels; `docs/design.md` §6.4).
    fn write_l0_table(
        &self,
        mem: &Arc<MemTable>,
        version: &Version,
        use_filter: bool,
    ) -> Result<(Option<crate::version::FileMeta>, FilterStats)> {
        if mem.is_empty() {
            return Ok((None, FilterStats::default()));
        }
        let alloc = || self.allocate_output();
        let env = self.job_env(version, &alloc, use_filter);
        let mut filter = env.filter.map(|f| f.run(FilterReason::Flush, 0));
        let mut out = compaction::job::OutputWriter::for_flush(&env);
        let mut it = mem.iter();
        it.seek_to_first();
        let r = (|| {
            let mut current: Vec<u8> = Vec::new();
            let mut first = true;
            let mut tombstone = Vec::new();
            while it.valid() {
                if let Some(f) = filter.as_mut() {
                    let p = crate::key::parse_internal_key(it.key()).ok_or_else(|| {
                        Error::corruption("<memtable>", 0, "malformed internal key")
                    })?;
                    let newest = first || p.user_key != current.as_slice();
                    first = false;
                    if newest {
                        current.clear();
                        current.extend_from_slice(p.user_key);
                        if f.eligible(p.seq, p.kind)
                            && f.removes(p.user_key, p.seq, p.kind, it.value())
                        {
                            tombstone.clear();
                            crate::key::encode_internal_key(
                                &mut tombstone,
                                p.user_key,
                                p.seq,
                                ValueKind::Delete,
                            );
                            out.add(&tombstone, &[])?;
                            it.next();
                            continue;
                        }
                    }
                }
                out.add(it.key(), it.value())?;
                it.next();
            }
            Ok(())
        })();
        if let Err(e) = r {
            out.abandon();
            return Err(e);
        }
        let mut o = out.finish()?;
        Ok((o.files.pop(), filter.map(|f| f.stats).unwrap_or_default()))
    }
}
