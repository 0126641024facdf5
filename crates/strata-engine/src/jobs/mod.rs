//! Background work on the tree: the background thread's loop ([`DbInner::background_loop`]),
//! flush (`flush.rs`), compaction (`compact.rs`), obsolete-file deletion (`obsolete.rs`) and
//! value-log GC (`gc.rs`); and what flush and compaction jobs share (their environment, the
//! compaction filter's reads and snapshot checks).

mod compact;
mod flush;
mod gc;
mod obsolete;

use crate::compaction::filter::{FilterReads, FilterStats};
use crate::compaction::job::LogValues;
use crate::compaction::{self, JobEnv, Shape};
use crate::error::{Error, Result};
use crate::key::SeqNo;
use crate::options::ReadOptions;
use crate::state::DbInner;
use crate::version::Version;
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

impl DbInner {
    fn job_env<'a>(
        &'a self,
        version: &'a Version,
        new_file_number: &'a (dyn Fn() -> u64 + Sync),
        use_filter: bool,
    ) -> JobEnv<'a> {
        JobEnv {
            dir: &self.dir,
            fs: &self.fs,
            tables: &self.tables,
            table_opts: self.table_opts,
            target_file_size: self.opts.target_file_size_bytes,
            readahead: self.opts.compaction_readahead_bytes,
            verify_checksums: self.opts.paranoid_checks,
            smallest_snapshot: self.smallest_snapshot(),
            version,
            new_file_number,
            shutting_down: &self.shutting_down,
            filter: self.job_filter(use_filter),
            log_values: Some(self.opts.unseparate_below())
                .filter(|below| *below > 0)
                .map(|below| LogValues {
                    below,
                    source: Some((&*self.vlog, self.super_version.load().vlog_files.clone())),
                }),
        }
    }

    pub(crate) fn allocate_output(&self) -> u64 {
        let mut st = self.state.lock();
        let n = st.versions.new_file_number();
        st.pending_outputs.insert(n);
        n
    }

    /// Background thread: flushes first, then compactions, until shutdown.
    pub(crate) fn background_loop(self: Arc<Self>) {
        let shape = Shape::from_options(&self.opts);
        let max_compactions = self.opts.background_threads.saturating_sub(1).max(1);
        loop {
            let mut st = self.state.lock();
            let task = loop {
                if self.shutting_down.load(Ordering::Acquire) {
                    return;
                }
                if !self.has_bg_error.load(Ordering::Acquire) {
                    if !st.flushing && !st.imms.is_empty() {
                        st.flushing = true;
                        break None;
                    }
                    if !st.manual_compaction && st.running_compactions < max_compactions {
                        let v = st.versions.current();
                        if let Some(p) = compaction::picker::pick(
                            &v,
                            &shape,
                            &st.busy,
                            &st.versions.compact_pointers,
                        ) {
                            self.mark_busy(&mut st, &p);
                            break Some((p, v));
                        }
                    }
                }
                self.bg_cv.wait(&mut st);
            };
            drop(st);
            let r = match task {
                None => self.flush_one(),
                Some((plan, v)) => self.compact(&plan, v),
            };
            if let Err(e) = r {
                if !matches!(e, Error::Closed) {
                    self.set_bg_error(&e);
                }
            }
            let _st = self.state.lock();
            self.done_cv.notify_all();
            self.bg_cv.notify_all();
        }
    }

    /// The largest registered snapshot, if any.
    fn largest_snapshot(&self) -> Option<SeqNo> {
        self.snapshots.lock().keys().next_back().copied()
    }

    /// The compaction filter a job started now uses (`use_filter`: a retry runs without).
    fn job_filter(&self, use_filter: bool) -> Option<compaction::job::JobFilter<'_>> {
        let filter = self
            .opts
            .compaction_filter
            .as_deref()
            .filter(|_| use_filter)?;
        Some(compaction::job::JobFilter {
            filter,
            reads: self,
            largest_snapshot: self.largest_snapshot(),
        })
    }

    /// The filter may have decided from reads of the database (`FilterContext::get`): every
    /// logged write it could have seen is made durable before its removals are installed,
    /// so no crash can keep a removal and lose the write that justified it.
    fn sync_if_filtered(&self, f: &FilterStats) -> Result<()> {
        if f.removed == 0 {
            return Ok(());
        }
        self.sync_logs()
    }

    /// Called with `state` held, before installing a job whose filter removed records:
    /// `None` if a snapshot registered since the job started could read one of them (every
    /// snapshot at or above the smallest removed sequence number; those registered when the
    /// job started were all below every removed record). Otherwise the snapshot registry's
    /// guard, held until the new super version is installed, so that no snapshot is taken
    /// in between that would read the old tables first and the filtered ones after.
    fn snapshots_allow(
        &self,
        f: &FilterStats,
    ) -> Option<Option<parking_lot::MutexGuard<'_, BTreeMap<SeqNo, usize>>>> {
        let Some(min) = f.min_removed_seq else {
            return Some(None);
        };
        let g = self.snapshots.lock();
        if g.range(min..).next().is_some() {
            return None;
        }
        Some(Some(g))
    }
}

impl FilterReads for DbInner {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        DbInner::get(self, &ReadOptions::default(), key)
    }

    fn resolve(&self, key: &[u8], pointer: &[u8]) -> Result<Vec<u8>> {
        let ptr = crate::vlog::ValuePointer::decode_or_corrupt(pointer, "<lsm value pointer>")?;
        let files = self.super_version.load().vlog_files.clone();
        self.vlog.read(&files, key, &ptr)
    }
}
