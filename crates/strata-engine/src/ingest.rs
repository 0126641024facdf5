//! Ingestion: sorted runs of entries written straight into tables, outside the write path
//! (no log, no memtable), and added to the tree in one MANIFEST edit — an external-file
//! ingestion done inside the engine. For bulk loads into a key range that nothing else
//! reads or writes until the load is installed (a replica's full sync loads its new
//! generation of the keyspace this way). Protocol and invariants: `docs/design.md` §6.5.
//!
//! 1. [`Db::ingest`] starts one. Each [`Ingest::add_run`] takes a sequence number of its
//!    own in an exclusive turn of the commit pipeline, published at once (every write
//!    committed before has a smaller one, every write after a larger one), and writes the
//!    run's entries, all at that number, into tables of about `target_file_size_bytes`,
//!    each synced. Their numbers are pending outputs, so obsolete-file deletion leaves them
//!    alone. A later run shadows an earlier one where their keys meet, as a later write
//!    would.
//! 2. [`Ingest::finish`] installs every run. Each table is opened again first (footer,
//!    filter and index checksums verified, entries and size as written: the pair assertion
//!    of what step 1 wrote). Memtables holding a key of a run's range are flushed: readers
//!    consult memtables before any table, and recovery would replay those older records
//!    into one. Compaction picking is paused and running compactions are waited for (a
//!    compaction's outputs could otherwise land across a run placed in its output level).
//!    Then, under the state lock, each run in order goes to the deepest level above every
//!    level holding a key of its range (its entries are newer than everything in that
//!    range, so they must be found first) whose own tables' ranges miss the run's (a
//!    level's tables never overlap). A run placed in L0 is renamed to new file numbers,
//!    above every L0 table's, since L0 is read newest number first. The directory is
//!    synced, then one synced edit adds every table and carries the last sequence number,
//!    so that recovery never hands a run's number out again.
//! 3. Dropped without `finish` (an error, a stopped load), the written tables are removed.
//!    A crash before the edit leaves them unreferenced: the next open deletes them. Nothing
//!    is visible before the edit; everything is, durably, after it.
//!
//! The caller's part: from [`Db::ingest`] until `finish` returns, no other write of a key
//! in the ingested range (one that reached a memtable is refused at `finish`), and no read
//! of the range that expects the ingestion's all-or-nothing (a snapshot taken meanwhile
//! sees the runs once they are installed).

use crate::db::Db;
use crate::error::{Error, Result};
use crate::filename;
use crate::iter::InternalIterator;
use crate::key::{self, SeqNo, ValueKind};
use crate::memtable::MemTable;
use crate::sst::TableBuilder;
use crate::state::{DbInner, DONE_RECHECK};
use crate::version::{FileMeta, Version, VersionEdit};
use std::sync::Arc;

/// An ingestion in progress; see the module docs.
pub struct Ingest<'a> {
    inner: &'a DbInner,
    runs: Vec<Run>,
    /// Numbers of the tables written and not yet installed (removed if not installed).
    written: Vec<u64>,
    /// The first run's sequence number: a memtable entry of the range at or above it is a
    /// write that came during the ingestion.
    first_seq: Option<SeqNo>,
    /// A run failed half-written: `finish` refuses.
    failed: bool,
    /// Installed, or the edit's fate is unknown: the files are left alone on drop.
    keep_files: bool,
}

/// One sorted run, written (all its entries carry one sequence number).
struct Run {
    /// Its tables, in key order (they do not overlap).
    files: Vec<FileMeta>,
}

impl Run {
    /// The run's user-key range.
    fn range(&self) -> (&[u8], &[u8]) {
        let lo = key::user_key(&self.files[0].smallest);
        let hi = key::user_key(&self.files[self.files.len() - 1].largest);
        (lo, hi)
    }
}

/// What [`Ingest::finish`] installed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IngestSummary {
    /// Tables added, with the level each went to.
    pub tables: Vec<(u32, u64)>,
    /// Entries in them.
    pub entries: u64,
    /// Bytes of them.
    pub bytes: u64,
}

impl Db {
    /// Starts an ingestion: sorted runs written as tables and installed in one edit
    /// (`ingest.rs`).
    pub fn ingest(&self) -> Ingest<'_> {
        Ingest {
            inner: &self.inner,
            runs: Vec::new(),
            written: Vec::new(),
            first_seq: None,
            failed: false,
            keep_files: false,
        }
    }
}

impl Ingest<'_> {
    /// Writes one run: `entries` are puts whose keys must be strictly ascending (a key out
    /// of order or repeated fails the run, and the ingestion with it). Nothing is visible
    /// until [`Ingest::finish`]. An empty run writes nothing.
    pub fn add_run<'k>(
        &mut self,
        entries: impl IntoIterator<Item = (&'k [u8], &'k [u8])>,
    ) -> Result<()> {
        if self.failed {
            return Err(failed());
        }
        self.inner.check_bg_error()?;
        let seq = self.inner.commit.reserve_seq(self.inner)?;
        self.first_seq.get_or_insert(seq);
        let mut files = Vec::new();
        let r = self.write_run(seq, entries, &mut files);
        if r.is_err() {
            self.failed = true;
        }
        r?;
        if !files.is_empty() {
            self.runs.push(Run { files });
        }
        Ok(())
    }

    fn write_run<'k>(
        &mut self,
        seq: SeqNo,
        entries: impl IntoIterator<Item = (&'k [u8], &'k [u8])>,
        files: &mut Vec<FileMeta>,
    ) -> Result<()> {
        let inner = self.inner;
        let target = inner.opts.target_file_size_bytes;
        let mut table: Option<(u64, TableBuilder)> = None;
        let mut ikey = Vec::new();
        let mut last: Option<&[u8]> = None;
        for (k, v) in entries {
            if let Some(prev) = last {
                if k <= prev {
                    return Err(Error::InvalidArgument(format!(
                        "ingested run: key {k:?} does not sort after {prev:?} (keys of a run \
                         must be strictly ascending)"
                    )));
                }
            }
            // Tables are cut only between keys, and every key of a run is distinct.
            if table.as_ref().is_some_and(|(_, b)| b.file_size() >= target) {
                let (n, b) = table.take().expect("checked");
                files.push(self.finish_table(n, b)?);
            }
            if table.is_none() {
                let n = inner.allocate_output();
                self.written.push(n);
                let file = inner.fs.create(&filename::table(&inner.dir, n))?;
                table = Some((n, TableBuilder::new(file, inner.table_opts)));
            }
            let (_, b) = table.as_mut().expect("just set");
            ikey.clear();
            key::encode_internal_key(&mut ikey, k, seq, ValueKind::Value);
            b.add(&ikey, v)?;
            last = Some(k);
        }
        if let Some((n, b)) = table {
            files.push(self.finish_table(n, b)?);
        }
        Ok(())
    }

    /// Finishes (and syncs) table `n`.
    fn finish_table(&self, n: u64, b: TableBuilder) -> Result<FileMeta> {
        let s = b.finish()?;
        Ok(FileMeta {
            number: n,
            size: s.file_size,
            smallest: s.smallest,
            largest: s.largest,
            num_entries: s.num_entries,
            ..Default::default()
        })
    }

    /// Opens every written table again before it is installed: its footer, filter and
    /// index must verify, and it must hold the entries and bytes that were written (the
    /// pair assertion of what `add_run` wrote, after it has been read).
    fn verify(&self) -> Result<()> {
        let inner = self.inner;
        for f in self.runs.iter().flat_map(|r| &r.files) {
            let path = filename::table(&inner.dir, f.number);
            let t = crate::sst::Table::open(inner.fs.open(&path)?, f.number, None)?;
            if t.num_entries() != f.num_entries || t.size() != f.size {
                return Err(Error::corruption(
                    &path,
                    0,
                    format!(
                        "ingested table reads back {} entries in {} bytes; {} in {} were written",
                        t.num_entries(),
                        t.size(),
                        f.num_entries,
                        f.size
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Installs every run in one edit (see the module docs). On success the ingested
    /// entries are visible and durable.
    pub fn finish(mut self) -> Result<IngestSummary> {
        if self.failed {
            return Err(failed());
        }
        if self.runs.is_empty() {
            return Ok(IngestSummary::default());
        }
        let inner = self.inner;
        self.verify()?;
        let first_seq = self.first_seq.expect("a run was written");
        // Each run's own range (not their union: a caller's runs may lie in separate
        // ranges with other data between them).
        let ranges: Vec<(Vec<u8>, Vec<u8>)> = self
            .runs
            .iter()
            .map(|r| (r.range().0.to_vec(), r.range().1.to_vec()))
            .collect();
        // Older records of the range out of the memtables, into tables below the runs.
        let mut flushed = false;
        loop {
            let overlap = {
                let st = inner.state.lock();
                memtables_overlap(&st.mem, &st.imms, &ranges, first_seq)?
            };
            if !overlap {
                break;
            }
            if flushed {
                return Err(Error::InvalidArgument(
                    "a write into the ingested key range came during the ingestion".into(),
                ));
            }
            inner.flush_and_wait()?;
            flushed = true;
        }
        // No compaction picked from here on; wait for those running.
        let mut st = inner.state.lock();
        while st.manual_compaction {
            inner.check_bg_error()?;
            inner.done_cv.wait_for(&mut st, DONE_RECHECK);
        }
        st.manual_compaction = true;
        let r = (|| {
            while st.running_compactions > 0 {
                inner.check_bg_error()?;
                inner.done_cv.wait_for(&mut st, DONE_RECHECK);
            }
            inner.check_bg_error()?;
            if memtables_overlap(&st.mem, &st.imms, &ranges, first_seq)? {
                return Err(Error::InvalidArgument(
                    "a write into the ingested key range came during the ingestion".into(),
                ));
            }
            let edit = self.place(&mut st)?;
            inner.fs.sync_dir(&inner.dir)?;
            let summary = IngestSummary {
                tables: edit.new_files.iter().map(|(l, f)| (*l, f.number)).collect(),
                entries: edit.new_files.iter().map(|(_, f)| f.num_entries).sum(),
                bytes: edit.new_files.iter().map(|(_, f)| f.size).sum(),
            };
            st.versions.last_sequence = st.versions.last_sequence.max(inner.visible_seq());
            // From here the edit may be durable even if the call fails: keep the files.
            self.keep_files = true;
            if let Err(e) = st.versions.log_and_apply(edit) {
                inner.set_bg_error(&e);
                return Err(e);
            }
            inner.install_super_version(&mut st);
            Ok(summary)
        })();
        st.manual_compaction = false;
        // Installed: the version holds the tables. Failed before the edit: `drop` removes
        // them. Failed in the edit: they stay pending (the edit may be durable; the
        // database refuses writes now, and the next open keeps or deletes them).
        if r.is_ok() || !self.keep_files {
            for n in &self.written {
                st.pending_outputs.remove(n);
            }
        }
        inner.bg_cv.notify_all();
        inner.done_cv.notify_all();
        drop(st);
        if r.is_ok() {
            self.written.clear();
        }
        r
    }

    /// The edit adding every run at its level (module docs, step 2); renames the runs that
    /// go to L0. Call with `state` held, no compaction running and none to be picked.
    fn place(&mut self, st: &mut crate::state::DbState) -> Result<VersionEdit> {
        let inner = self.inner;
        let mut v: Version = (*st.versions.current()).clone();
        let mut edit = VersionEdit::default();
        for i in 0..self.runs.len() {
            let level = self.level_for(&v, &self.runs[i])?;
            let mut part = VersionEdit::default();
            for j in 0..self.runs[i].files.len() {
                let mut f = self.runs[i].files[j].clone();
                if level == 0 {
                    let n = st.versions.new_file_number();
                    st.pending_outputs.insert(n);
                    inner.fs.rename(
                        &filename::table(&inner.dir, f.number),
                        &filename::table(&inner.dir, n),
                    )?;
                    if let Some(w) = self.written.iter_mut().find(|w| **w == f.number) {
                        *w = n;
                    }
                    st.pending_outputs.remove(&f.number);
                    f.number = n;
                }
                part.new_files.push((level as u32, f));
            }
            v = v.apply(&part);
            edit.new_files.extend(part.new_files);
        }
        Ok(edit)
    }
}

impl Ingest<'_> {
    /// The level `run` goes to in `v`: the deepest level that has no table whose range
    /// overlaps the run's (a level's tables never overlap) below no level holding a key of
    /// the run's range (those are older, so the run must be read first); 0 if L0 holds one.
    /// A table whose range spans the run's without a key in it (one holding records on both
    /// sides of an empty database, say) does not stop the descent.
    fn level_for(&self, v: &Version, run: &Run) -> Result<usize> {
        let (lo, hi) = run.range();
        let mut deepest = 0;
        for level in 0..v.levels.len() {
            let files = v.overlapping(level, Some(lo), Some(hi));
            if files.is_empty() {
                deepest = level;
                continue;
            }
            for f in &files {
                if self.holds_key_in(f, lo, hi)? {
                    return Ok(deepest);
                }
            }
        }
        Ok(deepest)
    }

    /// Whether table `f` holds an entry (value or tombstone) of a user key in `[lo, hi]`.
    /// An L0 tier table is assumed to (it is only ever in L0, where that costs a rename).
    fn holds_key_in(&self, f: &FileMeta, lo: &[u8], hi: &[u8]) -> Result<bool> {
        if f.tier {
            return Ok(true);
        }
        let t = self.inner.tables.get_for(f)?;
        let mut it = t.iter(crate::sst::ReadParams {
            verify_checksums: true,
            fill_cache: false,
            readahead: 0,
        });
        it.seek(&key::seek_key(lo, key::MAX_SEQ));
        it.status()?;
        Ok(it.valid() && key::user_key(it.key()) <= hi)
    }
}

impl Drop for Ingest<'_> {
    fn drop(&mut self) {
        if self.keep_files || self.written.is_empty() {
            return;
        }
        let inner = self.inner;
        let mut st = inner.state.lock();
        for n in self.written.drain(..) {
            // Best effort: a table left behind is unreferenced, and the next open deletes it.
            let _ = inner.fs.remove(&filename::table(&inner.dir, n));
            st.pending_outputs.remove(&n);
        }
    }
}

fn failed() -> Error {
    Error::InvalidArgument("a run of this ingestion failed; drop it and start again".into())
}

/// Whether a memtable holds an entry whose user key is in one of `ranges` (inclusive); an
/// error if one of them is at or above `since` (a write that came during the ingestion).
fn memtables_overlap(
    mem: &Arc<MemTable>,
    imms: &[Arc<MemTable>],
    ranges: &[(Vec<u8>, Vec<u8>)],
    since: SeqNo,
) -> Result<bool> {
    let mut any = false;
    for m in std::iter::once(mem).chain(imms) {
        if m.is_empty() {
            continue;
        }
        let mut it = m.iter();
        for (lo, hi) in ranges {
            it.seek(&key::seek_key(lo, key::MAX_SEQ));
            while it.valid() {
                let p = key::parse_internal_key(it.key())
                    .ok_or_else(|| Error::corruption("<memtable>", 0, "malformed internal key"))?;
                if p.user_key > hi.as_slice() {
                    break;
                }
                if p.seq >= since {
                    return Err(Error::InvalidArgument(format!(
                        "a write into the ingested key range came during the ingestion \
                         (key {:?})",
                        p.user_key
                    )));
                }
                any = true;
                it.next();
            }
        }
    }
    Ok(any)
}
