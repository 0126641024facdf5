//! Opening a database: replay the WALs the MANIFEST does not cover, flush what they held to
//! L0, start a fresh WAL and a fresh MANIFEST. Rules in `docs/format/wal.md`:
//! - WALs numbered at or above the MANIFEST's log number are replayed in number order;
//! - a torn tail (a damaged last record with nothing valid after it) is the end of the log:
//!   those writes were never acknowledged as synced; it is reported in [`RecoveryInfo`];
//! - a damaged record followed by valid ones is corruption: open fails rather than silently
//!   dropping acknowledged writes;
//! - sequence numbers resume after the largest one found.

use crate::batch::WriteBatch;
use crate::compaction::job::{JobEnv, OutputWriter};
use crate::db::RecoveryInfo;
use crate::error::Result;
use crate::filename::{self, FileKind};
use crate::io::Fs;
use crate::iter::InternalIterator;
use crate::log::{LogReader, LogWriter};
use crate::memtable::MemTable;
use crate::options::Options;
use crate::sst::TableOptions;
use crate::table_cache::TableCache;
use crate::version::{FileMeta, Version, VersionEdit, VersionSet};
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

pub(crate) fn recover(
    dir: &Path,
    fs: &Arc<dyn Fs>,
    opts: &Options,
    tables: &Arc<TableCache>,
    table_opts: &TableOptions,
    mut versions: VersionSet,
) -> Result<(VersionSet, Arc<MemTable>, LogWriter, RecoveryInfo)> {
    let files: Vec<(FileKind, u64)> = fs
        .list(dir)?
        .iter()
        .filter_map(|n| filename::parse(n))
        .collect();
    // Numbers of files on disk may be above the MANIFEST's next file number (it is only
    // persisted with the next edit): never reuse one, or recovery could truncate a WAL it is
    // replaying before the data is safe elsewhere (LevelDB's MarkFileNumberUsed).
    for (_, n) in &files {
        versions.mark_file_number_used(*n);
    }
    let mut wals: Vec<u64> = files
        .iter()
        .filter(|(k, n)| *k == FileKind::Wal && *n >= versions.log_number)
        .map(|(_, n)| *n)
        .collect();
    wals.sort_unstable();
    let mut info = RecoveryInfo::default();
    let mut edit = VersionEdit::default();
    let mut mem = Arc::new(MemTable::new(0));
    let mut max_seq = versions.last_sequence;
    for &number in &wals {
        let path = filename::wal(dir, number);
        let mut reader = LogReader::new(fs.open(&path)?);
        info.wal_files += 1;
        while let Some((offset, rec)) = reader.read_record()? {
            let batch = WriteBatch::from_data(rec, &path, offset)?;
            let mut seq = batch.seq();
            for r in batch.iter() {
                // from_data checked every record.
                let Ok(r) = r else { break };
                mem.add(seq, r.kind, r.key, r.value.unwrap_or_default());
                seq += 1;
            }
            if batch.count() > 0 {
                max_seq = max_seq.max(seq - 1);
            }
            info.wal_records += 1;
            if mem.approximate_bytes() >= opts.write_buffer_bytes {
                if let Some(m) =
                    flush_recovered(dir, fs, opts, tables, table_opts, &mut versions, &mem)?
                {
                    edit.new_files.push((0, m));
                }
                mem = Arc::new(MemTable::new(0));
            }
        }
        if let Some((offset, reason)) = reader.truncated_tail() {
            info.truncated_tail = Some((path.clone(), offset, reason));
        }
    }
    if let Some(m) = flush_recovered(dir, fs, opts, tables, table_opts, &mut versions, &mem)? {
        edit.new_files.push((0, m));
    }
    let wal_number = versions.new_file_number();
    let wal = LogWriter::new(fs.create(&filename::wal(dir, wal_number))?)?;
    fs.sync_dir(dir)?;
    edit.log_number = Some(wal_number);
    versions.last_sequence = max_seq;
    versions.log_and_apply(edit)?;
    Ok((versions, Arc::new(MemTable::new(wal_number)), wal, info))
}

/// Writes a recovered memtable as an L0 table.
fn flush_recovered(
    dir: &Path,
    fs: &Arc<dyn Fs>,
    opts: &Options,
    tables: &Arc<TableCache>,
    table_opts: &TableOptions,
    versions: &mut VersionSet,
    mem: &Arc<MemTable>,
) -> Result<Option<FileMeta>> {
    if mem.is_empty() {
        return Ok(None);
    }
    let v = Version::default();
    let stop = AtomicBool::new(false);
    // Table numbers are allocated before the job; the job asks through a closure that must be
    // `Sync`, so hand it a pre-allocated number.
    let number = versions.new_file_number();
    let alloc = move || number;
    let env = JobEnv {
        dir,
        fs,
        tables,
        table_opts: *table_opts,
        target_file_size: u64::MAX,
        readahead: 0,
        verify_checksums: opts.paranoid_checks,
        smallest_snapshot: 0,
        version: &v,
        new_file_number: &alloc,
        shutting_down: &stop,
    };
    let mut out = OutputWriter::new(&env);
    let mut it = mem.iter();
    it.seek_to_first();
    while it.valid() {
        if let Err(e) = out.add(it.key(), it.value()) {
            out.abandon();
            return Err(e);
        }
        it.next();
    }
    let mut o = out.finish()?;
    Ok(o.files.pop())
}
