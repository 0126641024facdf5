//! Compaction: runs a planned job (`compaction/`) and installs its result; manual range
//! compaction; the busy marks that keep concurrent jobs apart. Protocol: `docs/design.md` §7.

use crate::compaction::{self, CompactionPlan};
use crate::error::{Error, Result};
use crate::filename::{self};
use crate::state::{DbInner, DbState, DONE_RECHECK};
use crate::stats::Counters;
use crate::version::{Version, VersionEdit};
use std::sync::Arc;

impl DbInner {
    pub(super) fn mark_busy(&self, st: &mut DbState, p: &CompactionPlan) {
        for f in p.inputs.iter().chain(&p.next_inputs) {
            st.busy.files.insert(f.number);
        }
        let (lo, hi) = p.range();
        st.busy.ranges.push((p.output_level, lo, hi));
        st.running_compactions += 1;
    }

    fn unmark_busy(&self, st: &mut DbState, p: &CompactionPlan) {
        for f in p.inputs.iter().chain(&p.next_inputs) {
            st.busy.files.remove(&f.number);
        }
        let (lo, hi) = p.range();
        if let Some(i) = st
            .busy
            .ranges
            .iter()
            .position(|(l, a, b)| *l == p.output_level && *a == lo && *b == hi)
        {
            st.busy.ranges.remove(i);
        }
        st.running_compactions -= 1;
    }

    /// Runs one planned compaction and installs its result.
    /// Takes the version the plan was made from by value: it is dropped before obsolete
    /// files are collected, or this job's own inputs would look live.
    pub(super) fn compact(&self, plan: &CompactionPlan, v: Arc<Version>) -> Result<()> {
        let mut use_filter = self.opts.compaction_filter.is_some();
        let (mut st, _snapshots, out) = loop {
            let result = if plan.trivial_move {
                Ok(compaction::JobOutput {
                    files: plan.inputs.iter().map(|f| (**f).clone()).collect(),
                    ..Default::default()
                })
            } else {
                let alloc = || self.allocate_output();
                let env = self.job_env(&v, &alloc, use_filter);
                compaction::job::run(plan, &env)
                    .and_then(|o| self.sync_if_filtered(&o.filter).map(|()| o))
            };
            let mut st = self.state.lock();
            let out = match result {
                Ok(out) => out,
                Err(e) => {
                    // On error the job removed its outputs; their numbers stay reserved,
                    // harmlessly.
                    self.unmark_busy(&mut st, plan);
                    return Err(e);
                }
            };
            match self.snapshots_allow(&out.filter) {
                Some(guard) => break (st, guard, out),
                None => {
                    // A snapshot taken while the job ran could read what the filter removed:
                    // run it again without the filter.
                    for f in &out.files {
                        st.pending_outputs.remove(&f.number);
                        let _ = self.fs.remove(&filename::table(&self.dir, f.number));
                    }
                    Counters::add(&self.counters.filter_retries, 1);
                    use_filter = false;
                }
            }
        };
        // The job's version goes before obsolete files are collected.
        drop(v);
        self.unmark_busy(&mut st, plan);
        Counters::add(&self.counters.filter_removed, out.filter.removed);
        Counters::add(&self.counters.filter_value_reads, out.filter.value_reads);
        if !out.filter.removed_pointers.is_empty() {
            // Whether a flush already counted those pointers as garbage is not known here:
            // verification scans measure them (§9.5).
            st.gc.needs_verify = true;
        }
        // The log entries of the tier pointers the job copied into SSTables or dropped are
        // garbage now; each such pointer passes through exactly one compaction (tier tables
        // never move down as they are), and flushes do not count them (§2.9).
        let found_garbage = !out.vlog_garbage.is_empty();
        let mut edit = VersionEdit {
            vlog_garbage: out.vlog_garbage.iter().map(|(f, n)| (*f, *n)).collect(),
            ..VersionEdit::default()
        };
        Counters::add(&self.counters.l0_tier_values_copied, out.values_copied);
        for f in &plan.inputs {
            edit.deleted_files.push((plan.level as u32, f.number));
        }
        for f in &plan.next_inputs {
            edit.deleted_files
                .push((plan.output_level as u32, f.number));
        }
        for f in &out.files {
            st.pending_outputs.remove(&f.number);
            edit.new_files.push((plan.output_level as u32, f.clone()));
        }
        if plan.level > 0 {
            // The largest internal key of the level's inputs (the MANIFEST stores internal
            // keys); the next size-triggered pick starts after it.
            if let Some(hi) = plan
                .inputs
                .iter()
                .map(|f| &f.largest)
                .max_by(|a, b| crate::key::compare_internal(a, b))
            {
                edit.compact_pointers.push((plan.level as u32, hi.clone()));
            }
        }
        st.versions.last_sequence = st.versions.last_sequence.max(self.visible_seq());
        st.versions.log_and_apply(edit)?;
        self.install_super_version(&mut st);
        drop(_snapshots);
        if found_garbage {
            self.gc_cv.notify_all();
        }
        if plan.trivial_move {
            Counters::add(&self.counters.trivial_moves, 1);
        } else {
            Counters::add(&self.counters.compactions, 1);
            Counters::add(&self.counters.compaction_bytes_read, out.bytes_read);
            Counters::add(&self.counters.compaction_bytes_written, out.bytes_written);
        }
        let obsolete = self.collect_obsolete(&st);
        drop(st);
        self.delete_files(obsolete);
        Ok(())
    }

    /// Manual compaction: pauses automatic picking, waits for running compactions, then
    /// compacts `[start, end]` level by level in the caller's thread.
    pub(crate) fn compact_range(&self, start: Option<&[u8]>, end: Option<&[u8]>) -> Result<()> {
        {
            let mut st = self.state.lock();
            while st.manual_compaction || st.running_compactions > 0 {
                self.check_bg_error()?;
                self.done_cv.wait_for(&mut st, DONE_RECHECK);
            }
            st.manual_compaction = true;
        }
        let r = self.compact_range_levels(start, end);
        let mut st = self.state.lock();
        st.manual_compaction = false;
        self.bg_cv.notify_all();
        self.done_cv.notify_all();
        r
    }

    fn compact_range_levels(&self, start: Option<&[u8]>, end: Option<&[u8]>) -> Result<()> {
        let levels = self.opts.num_levels;
        let filter = self.opts.compaction_filter.is_some();
        for level in 0..levels {
            self.check_bg_error()?;
            let (plan, v) = {
                let mut st = self.state.lock();
                let v = st.versions.current();
                let plan = if level + 1 < levels {
                    compaction::picker::manual(&v, level, start, end)
                } else if filter {
                    // Everything in the range is in the last level now: rewrite it there so
                    // that the filter sees the records that only moved down.
                    compaction::picker::manual_bottommost(&v, start, end)
                } else {
                    None
                };
                let Some(plan) = plan else {
                    continue;
                };
                self.mark_busy(&mut st, &plan);
                (plan, v)
            };
            if let Err(e) = self.compact(&plan, v) {
                if !matches!(e, Error::Closed) {
                    self.set_bg_error(&e);
                }
                return Err(e);
            }
        }
        Ok(())
    }
}
