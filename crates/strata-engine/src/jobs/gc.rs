//! Value-log garbage collection, the job: the GC thread's loop, a manual `Db::gc`, one pass
//! (pick a file with [`crate::vlog::gc::pick`], or measure files by verification scans when the
//! figures may understate garbage), collecting one file (copy the current entries through the
//! write queue, sync, record the file obsolete) and retiring collected files once no snapshot
//! needs them. The bookkeeping and the picker are the value log's (`vlog/gc.rs`). Steps, what
//! a crash after each leaves, snapshots, verification scans and lock order: `docs/design.md`
//! §9; MANIFEST fields: `docs/format/vlog.md` §5, §7.

use crate::error::{Error, Result};
use crate::get::Found;
use crate::sst::ReadParams;
use crate::state::DbInner;
use crate::stats::Counters;
use crate::version::VersionEdit;
use crate::vlog::format::{Entry, EntryKind};
use crate::vlog::gc::{pick, FileGarbage, GcReport};
use crate::vlog::FrameReader;
use crate::vlog::ValuePointer;
use crate::write::Relocation;
use std::collections::BTreeSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Bytes of live entries gathered before they are rewritten as one conditional write.
const RELOCATE_BATCH_BYTES: usize = 1 << 20;

/// One step of [`DbInner::walk_separated`].
enum Walked<'a> {
    /// A separated entry of the file, and the pointer that names it.
    Entry(ValuePointer, Entry<'a>),
    /// The end of a frame of this many bytes (to count as read and to pace).
    FrameEnd(u64),
}

/// Paces GC to `per_sec` bytes per second (0: unlimited).
struct Pace {
    start: Instant,
    bytes: u64,
    per_sec: u64,
}

impl Pace {
    fn new(per_sec: u64) -> Self {
        Pace {
            start: Instant::now(),
            bytes: 0,
            per_sec,
        }
    }

    fn consume(&mut self, n: u64) {
        self.bytes += n;
        if self.per_sec == 0 {
            return;
        }
        let due = Duration::from_secs_f64(self.bytes as f64 / self.per_sec as f64);
        let elapsed = self.start.elapsed();
        if due > elapsed {
            std::thread::sleep((due - elapsed).min(Duration::from_millis(200)));
        }
    }
}

impl DbInner {
    /// The GC thread: every `gc_interval_ms`, or when a compaction made garbage, collect one
    /// file and retire what snapshots no longer hold.
    pub(crate) fn gc_loop(self: Arc<Self>) {
        let period = Duration::from_millis(self.opts.gc_interval_ms.max(1));
        loop {
            {
                let mut st = self.state.lock();
                if self.shutting_down.load(Ordering::Acquire) {
                    return;
                }
                self.gc_cv.wait_for(&mut st, period);
                if self.shutting_down.load(Ordering::Acquire) {
                    return;
                }
            }
            if self.has_bg_error.load(Ordering::Acquire) {
                continue;
            }
            let _g = self.gc_lock.lock();
            let mut report = GcReport::default();
            let mut pace = Pace::new(self.opts.gc_bytes_per_sec);
            let r = self.retire_pending(&mut report).and_then(|()| {
                self.gc_pass(self.opts.gc_garbage_ratio, true, &mut pace, &mut report)
            });
            match r {
                Ok(()) | Err(Error::Closed) => {}
                Err(e) => self.state.lock().gc.last_error = Some(e.to_string()),
            }
        }
    }

    /// `Db::gc`: collect every qualifying file, unpaced, then retire what can go.
    pub(crate) fn gc_manual(&self, min_ratio: f64) -> Result<GcReport> {
        let _g = self.gc_lock.lock();
        self.check_bg_error()?;
        let mut report = GcReport::default();
        let mut pace = Pace::new(0);
        let start = self.sealed_files();
        self.gc_pass(min_ratio, false, &mut pace, &mut report)?;
        // Then measure every other file of those the call started with (not the files its
        // own rewrites filled): what the figures missed is collected too.
        for n in start.intersection(&self.sealed_files()) {
            self.verify_file(*n, min_ratio, &mut pace, &mut report)?;
        }
        self.retire_pending(&mut report)?;
        report.files_pending = self.state.lock().gc.pending.len() as u64;
        Ok(report)
    }

    /// The files GC may collect now: those below the durable head's file.
    fn sealed_files(&self) -> BTreeSet<u64> {
        match self.gc_candidates() {
            Some((files, head_file)) => files
                .iter()
                .filter(|f| f.number < head_file)
                .map(|f| f.number)
                .collect(),
            None => BTreeSet::new(),
        }
    }

    /// The picker's view of the value-log files; `None` if there is no durable head.
    fn gc_candidates(&self) -> Option<(Vec<FileGarbage>, u64)> {
        let st = self.state.lock();
        let head_file = st.versions.vlog.head?.0;
        let files = st
            .vlog_files
            .values()
            .filter(|f| {
                !st.versions.vlog.obsolete.contains(&f.number)
                    && !st.gc.failed.contains(&f.number)
                    && !st.gc.pending.iter().any(|(n, _)| *n == f.number)
            })
            .map(|f| FileGarbage {
                number: f.number,
                size: f.size(),
                live: st.versions.vlog.live_bytes(f.number),
            })
            .collect();
        Some((files, head_file))
    }

    /// Collects files while one qualifies by its figures; then, with `verify_one`, measures
    /// one more file. A pass collects only files that qualified when it started: GC's own
    /// rewrites fill new files that the moving durable head soon puts below it, and with a
    /// low ratio they would qualify in turn, so an unbounded pass chases its own output
    /// for ever.
    fn gc_pass(
        &self,
        min_ratio: f64,
        verify_one: bool,
        pace: &mut Pace,
        report: &mut GcReport,
    ) -> Result<()> {
        let mut eligible = self.sealed_files();
        loop {
            let Some((files, head_file)) = self.gc_candidates() else {
                return Ok(());
            };
            Counters::add(&self.counters.gc_runs, 1);
            let files: Vec<FileGarbage> = files
                .into_iter()
                .filter(|f| eligible.contains(&f.number))
                .collect();
            let Some(number) = pick(&files, head_file, min_ratio) else {
                if verify_one {
                    // Nothing by the figures: if they may understate garbage, measure one
                    // more file of the round.
                    let next = {
                        let mut st = self.state.lock();
                        if !st.gc.needs_verify {
                            return Ok(());
                        }
                        let next = files
                            .iter()
                            .filter(|f| f.number < head_file && !st.gc.verified.contains(&f.number))
                            .map(|f| f.number)
                            .min();
                        if next.is_none() {
                            st.gc.verified.clear();
                            st.gc.needs_verify = false;
                        }
                        next
                    };
                    if let Some(n) = next {
                        self.verify_file(n, min_ratio, pace, report)?;
                    }
                }
                return Ok(());
            };
            eligible.remove(&number);
            self.gc_file(number, pace, report)?;
            // Retire as we go: under a steady stream of overwrites a pass can run for as long
            // as the writes last, and files collected early must not wait for its end (they
            // did: 54 collected files, 3.4 GiB, still on disk after 3 overwrites of 1 GiB).
            self.retire_pending(report)?;
        }
    }

    /// Measures the live bytes of `number` by looking up every separated entry in the
    /// tables, corrects the MANIFEST's figure if it was too high, and collects the file if
    /// the measured garbage reaches `min_ratio`.
    fn verify_file(
        &self,
        number: u64,
        min_ratio: f64,
        pace: &mut Pace,
        report: &mut GcReport,
    ) -> Result<()> {
        // A handed-out version: its tables stay on disk while the scan reads them.
        let (entry, version) = {
            let mut st = self.state.lock();
            match st.vlog_files.get(&number) {
                Some(e) => (e.clone(), st.versions.hand_out()),
                None => return Ok(()),
            }
        };
        let size = self.fs.file_size(&entry.path)?;
        let mut live = 0u64;
        self.walk_separated(number, &entry, size, |step| {
            match step {
                Walked::Entry(here, e) => {
                    if let Some((_, crate::key::ValueKind::Pointer, raw)) =
                        self.table_entry(&version, e.key)?
                    {
                        if ValuePointer::decode(&raw) == Some(here) {
                            live += e.len as u64;
                        }
                    }
                }
                Walked::FrameEnd(bytes) => self.count_read(bytes, pace, report),
            }
            Ok(())
        })?;
        drop(version);
        let recorded = {
            let mut st = self.state.lock();
            st.gc.verified.insert(number);
            st.versions.vlog.live_bytes(number)
        };
        if size.saturating_sub(live) as f64 >= min_ratio * size as f64 {
            return self.gc_file(number, pace, report);
        }
        if recorded > live {
            let mut st = self.state.lock();
            let edit = VersionEdit {
                vlog_garbage: vec![(number, recorded - live)],
                ..VersionEdit::default()
            };
            st.versions.last_sequence = st.versions.last_sequence.max(self.visible_seq());
            if let Err(e) = st.versions.log_and_apply(edit) {
                self.set_bg_error(&e);
                return Err(e);
            }
        }
        Ok(())
    }

    /// Reads file `number`'s frames in order (`size` bytes of it), handing `step` each
    /// separated entry and then the end of its frame. A damaged frame marks the file failed
    /// (kept until reopen) and ends the walk with the error. Returns where the last whole
    /// frame ends.
    fn walk_separated(
        &self,
        number: u64,
        entry: &crate::vlog::VlogFile,
        size: u64,
        mut step: impl FnMut(Walked<'_>) -> Result<()>,
    ) -> Result<u64> {
        let handle = entry.handle(&self.fs, self.opts.direct_io)?;
        let mut reader = FrameReader::new(handle, &entry.path, size, 0);
        let mut read = 0u64;
        loop {
            if self.shutting_down.load(Ordering::Acquire) {
                return Err(Error::Closed);
            }
            let frame = match reader.next_frame() {
                Ok(Some(f)) => f,
                Ok(None) => return Ok(reader.position()),
                Err(e) => {
                    if e.is_corruption() {
                        self.state.lock().gc.failed.insert(number);
                    }
                    return Err(e);
                }
            };
            for (offset, e) in frame.entries() {
                if e.kind == EntryKind::Separated {
                    let here = ValuePointer {
                        file: number,
                        offset,
                        len: e.len as u32,
                    };
                    step(Walked::Entry(here, e))?;
                }
            }
            let now = reader.bytes_read();
            step(Walked::FrameEnd(now - read))?;
            read = now;
        }
    }

    /// Counts `bytes` of a file as read by GC and paces them.
    fn count_read(&self, bytes: u64, pace: &mut Pace, report: &mut GcReport) {
        Counters::add(&self.counters.gc_bytes_read, bytes);
        report.bytes_read += bytes;
        pace.consume(bytes);
    }

    /// Collects one file (steps 1-3 of `docs/design.md` §9.2).
    fn gc_file(&self, number: u64, pace: &mut Pace, report: &mut GcReport) -> Result<()> {
        let Some(entry) = self.state.lock().vlog_files.get(&number).cloned() else {
            return Ok(());
        };
        let size = self.fs.file_size(&entry.path)?;
        let mut batch: Vec<Relocation> = Vec::new();
        let mut batch_bytes = 0usize;
        let end = self.walk_separated(number, &entry, size, |step| {
            match step {
                Walked::Entry(old, e) => {
                    batch_bytes += e.len;
                    batch.push(Relocation {
                        key: e.key.to_vec(),
                        value: e.value.to_vec(),
                        old,
                        remove: false,
                    });
                }
                Walked::FrameEnd(bytes) => {
                    self.count_read(bytes, pace, report);
                    if batch_bytes >= RELOCATE_BATCH_BYTES {
                        self.relocate(std::mem::take(&mut batch), pace, report)?;
                        batch_bytes = 0;
                    }
                }
            }
            Ok(())
        })?;
        if end < size {
            let known = self.state.lock().versions.vlog.tails.get(&number).copied();
            if known != Some(end) {
                // Frames end early in a file no crash tore: its last frames are damaged and
                // may hold live values. Keep the file.
                self.state.lock().gc.failed.insert(number);
                return Err(Error::corruption(
                    &entry.path,
                    end,
                    "damaged frames at the end of a sealed value-log file",
                ));
            }
        }
        self.relocate(batch, pace, report)?;
        // Step 2: the rewrites are durable once the log is.
        self.sync_log()?;
        // A value skipped because a newer write of its key exists is garbage only if that
        // write outlives a crash: one made without the log (`disable_wal`) must reach a table
        // first, or a crash would bring back the old pointer into a deleted file.
        self.flush_unlogged()?;
        // Step 3.
        let mut st = self.state.lock();
        let seq = self.visible_seq();
        let edit = VersionEdit {
            vlog_obsolete: vec![number],
            ..VersionEdit::default()
        };
        st.versions.last_sequence = st.versions.last_sequence.max(seq);
        if let Err(e) = st.versions.log_and_apply(edit) {
            self.set_bg_error(&e);
            return Err(e);
        }
        st.gc.pending.push((number, seq));
        Counters::add(&self.counters.gc_files_collected, 1);
        report.files_collected += 1;
        Ok(())
    }

    /// Rewrites the entries of `batch` that are still current.
    fn relocate(
        &self,
        batch: Vec<Relocation>,
        pace: &mut Pace,
        report: &mut GcReport,
    ) -> Result<()> {
        if batch.is_empty() {
            return Ok(());
        }
        // A first filter outside the write queue, so the leader re-checks only survivors.
        let (sv, seq) = self.read_view(&crate::options::ReadOptions::default());
        let params = ReadParams {
            verify_checksums: true,
            fill_cache: false,
            readahead: 0,
        };
        let mut live = Vec::with_capacity(batch.len());
        for r in batch {
            if let Some(Found::Pointer(p)) = self.get_entry(&sv, &r.key, seq, params)? {
                if ValuePointer::decode(&p) == Some(r.old) {
                    live.push(r);
                }
            }
        }
        drop(sv);
        // The compaction filter sees each current value GC is about to rewrite; one it removes
        // is rewritten as a tombstone (`docs/design.md` §6.4): the key's current entry points
        // into the file being collected, so something newer must shadow it.
        if let Some(f) = self.opts.compaction_filter.as_deref() {
            let mut removed = 0u64;
            for r in &mut live {
                r.remove = crate::compaction::filter::relocation_removes(f, self, &r.key, &r.value);
                removed += u64::from(r.remove);
            }
            Counters::add(&self.counters.filter_removed, removed);
        }
        if live.is_empty() {
            return Ok(());
        }
        let bytes: u64 = live
            .iter()
            .map(|r| (r.key.len() + r.value.len()) as u64)
            .sum();
        let n = self.write_relocations(live)?;
        Counters::add(&self.counters.gc_bytes_written, bytes);
        Counters::add(&self.counters.gc_values_relocated, n as u64);
        report.bytes_written += bytes;
        report.values_relocated += n as u64;
        pace.consume(bytes);
        Ok(())
    }

    /// Step 4 for every pending file no snapshot can read any more.
    fn retire_pending(&self, report: &mut GcReport) -> Result<()> {
        let min_snapshot = self.smallest_snapshot();
        let mut unopened = None;
        let ready: Vec<u64> = {
            let mut st = self.state.lock();
            let mut ready: Vec<u64> = st
                .gc
                .pending
                .iter()
                .filter(|(_, seq)| *seq <= min_snapshot)
                .map(|(n, _)| *n)
                .collect();
            // Readers holding an older file set read through this handle after the removal:
            // a file whose handle cannot be opened stays (pending, in the set) until it can.
            ready.retain(|n| match st.vlog_files.get(n) {
                Some(f) => match f.handle(&self.fs, self.opts.direct_io) {
                    Ok(_) => true,
                    Err(e) => {
                        unopened.get_or_insert(e);
                        false
                    }
                },
                None => true,
            });
            if ready.is_empty() {
                return unopened.map_or(Ok(()), Err);
            }
            let mut files = (*st.vlog_files).clone();
            for n in &ready {
                files.remove(n);
            }
            st.vlog_files = Arc::new(files);
            st.gc.pending.retain(|(n, _)| !ready.contains(n));
            self.install_super_version(&mut st);
            ready
        };
        // A file that cannot be removed stays obsolete in the MANIFEST (only the removed ones
        // are recorded deleted): the next open removes it.
        let mut removed = Vec::with_capacity(ready.len());
        for n in &ready {
            if self
                .fs
                .remove(&crate::filename::vlog(&self.dir, *n))
                .is_ok()
            {
                report.files_deleted += 1;
                removed.push(*n);
            }
        }
        self.fs.sync_dir(&self.dir)?;
        let mut st = self.state.lock();
        let edit = VersionEdit {
            vlog_deleted: removed,
            ..VersionEdit::default()
        };
        st.versions.last_sequence = st.versions.last_sequence.max(self.visible_seq());
        if let Err(e) = st.versions.log_and_apply(edit) {
            self.set_bg_error(&e);
            return Err(e);
        }
        unopened.map_or(Ok(()), Err)
    }
}

#[cfg(test)]
mod pass_tests {
    use super::*;
    use crate::io::{Fs, MemFs};
    use crate::{Db, Options};

    /// A pass that collects several files retires each one as it goes: under a steady
    /// stream of overwrites the background pass may not end for as long as the writes last,
    /// and collected files used to stay on disk until it did.
    #[test]
    fn a_long_pass_retires_the_files_it_collects() {
        let fs: Arc<dyn Fs> = Arc::new(MemFs::new());
        let opts = Options {
            fs: fs.clone(),
            sep_threshold_bytes: 0,
            vlog_file_bytes: 4 << 10,
            vlog_buffer_bytes: 1 << 10,
            gc_interval_ms: 0,
            gc_bytes_per_sec: 0,
            ..Options::default()
        };
        let dir = std::path::Path::new("/db");
        let db = Db::open(dir, opts).unwrap();
        for round in 0..4u8 {
            for i in 0..100u32 {
                db.put(format!("key{i:03}").as_bytes(), &[round; 200])
                    .unwrap();
            }
            // Flushes account the overwritten values as garbage and move the durable head.
            db.flush().unwrap();
        }
        let inner = db.inner.clone();
        let mut report = GcReport::default();
        inner
            .gc_pass(0.5, false, &mut Pace::new(0), &mut report)
            .unwrap();
        assert!(report.files_collected >= 2, "{report:?}");
        assert!(
            inner.state.lock().gc.pending.is_empty(),
            "collected files wait for the end of the pass"
        );
        assert_eq!(report.files_deleted, report.files_collected, "{report:?}");
        for i in 0..100u32 {
            let v = db.get(format!("key{i:03}").as_bytes()).unwrap().unwrap();
            assert_eq!(v, vec![3u8; 200]);
        }
        db.close().unwrap();
    }
}
