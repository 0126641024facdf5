//! Opening a database: replay the logs the MANIFEST does not cover (WALs at or above its log
//! number, then the value log from its durable head), sync what was replayed, flush it to L0,
//! start a fresh log and a fresh MANIFEST. Protocol, the torn-tail rule and why each step is
//! there: `docs/design.md` §7 (bytes and rules per log: `docs/format/wal.md`,
//! `docs/format/vlog.md`).

use crate::batch::WriteBatch;
use crate::compaction::job::{JobEnv, OutputWriter};
use crate::error::{Error, Result};
use crate::filename::{self, FileKind};
use crate::io::Fs;
use crate::iter::InternalIterator;
use crate::key::ValueKind;
use crate::log::{LogReader, LogRecovery, LogWriter};
use crate::memtable::MemTable;
use crate::options::Options;
use crate::sst::TableOptions;
use crate::table_cache::TableCache;
use crate::version::{FileMeta, Version, VersionEdit, VersionSet};
use crate::vlog::format::{self, EntryKind, FRAME_NO_REPLAY};
use crate::vlog::{FrameReader, HeadShared, ValuePointer, VlogFile, VlogFileSet, VlogWriter};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// What the last open found in the logs it read.
#[derive(Clone, Debug, Default)]
pub struct RecoveryInfo {
    /// Per log file read (the MANIFEST, then WALs, then value-log files from the durable
    /// head): records replayed and the unsynced tail dropped, if any.
    pub logs: Vec<LogRecovery>,
    pub wal_files: u64,
    pub wal_records: u64,
    /// Value-log files read from the durable head on.
    pub vlog_files: u64,
    /// Value-log frames (commit groups) replayed.
    pub vlog_frames: u64,
    /// A torn log tail (WAL or value log) that was dropped: (file, offset, reason).
    pub truncated_tail: Option<(PathBuf, u64, String)>,
}

impl RecoveryInfo {
    /// Bytes dropped as unsynced tails, over every log file read.
    pub fn truncated_bytes(&self) -> u64 {
        self.logs.iter().map(|l| l.truncated_bytes).sum()
    }

    /// Log records (WAL batches, MANIFEST edits, value-log frames) replayed.
    pub fn records_replayed(&self) -> u64 {
        self.logs.iter().map(|l| l.records).sum()
    }
}

/// The recovery report: one line per log file read, then the totals.
impl std::fmt::Display for RecoveryInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for l in &self.logs {
            writeln!(f, "{l}")?;
        }
        write!(
            f,
            "recovery: {} log files, {} records replayed, {} bytes of unsynced tails dropped",
            self.logs.len(),
            self.records_replayed(),
            self.truncated_bytes()
        )
    }
}

/// What recovery hands to the opened database.
pub(crate) struct Recovered {
    pub versions: VersionSet,
    pub mem: Arc<MemTable>,
    /// The new WAL (separation off).
    pub wal: Option<LogWriter>,
    /// The new head value-log file (separation on).
    pub vlog_head: Option<VlogWriter>,
    /// Every value-log file readers may need.
    pub vlog_files: VlogFileSet,
    pub info: RecoveryInfo,
}

/// Replay state shared by the WAL and value-log passes.
struct Replay<'a> {
    dir: &'a Path,
    fs: &'a Arc<dyn Fs>,
    opts: &'a Options,
    tables: &'a Arc<TableCache>,
    table_opts: &'a TableOptions,
    edit: VersionEdit,
    mem: Arc<MemTable>,
    max_seq: u64,
}

impl Replay<'_> {
    /// Flushes the memtable to L0 when it is full (or when `force`).
    fn maybe_flush(&mut self, versions: &mut VersionSet, force: bool) -> Result<()> {
        if !force && self.mem.approximate_bytes() < self.opts.write_buffer_bytes {
            return Ok(());
        }
        let m = flush_recovered(
            self.dir,
            self.fs,
            self.opts,
            self.tables,
            self.table_opts,
            versions,
            &self.mem,
        )?;
        if let Some(m) = m {
            self.edit.new_files.push((0, m));
            self.edit.vlog_live_added.extend(self.mem.vlog_refs());
        }
        self.mem = Arc::new(MemTable::new(0, self.opts.write_buffer_bytes));
        Ok(())
    }
}

pub(crate) fn recover(
    dir: &Path,
    fs: &Arc<dyn Fs>,
    opts: &Options,
    tables: &Arc<TableCache>,
    table_opts: &TableOptions,
    mut versions: VersionSet,
    head_shared: &Arc<HeadShared>,
) -> Result<Recovered> {
    let names = fs.list(dir)?;
    let mut wals: Vec<u64> = Vec::new();
    let mut vlogs: Vec<u64> = Vec::new();
    for (kind, n) in names.iter().filter_map(|n| filename::parse(n)) {
        // A log created after the last MANIFEST edit has a number the MANIFEST does not
        // know is taken: never hand it out again (a new log would truncate it).
        versions.mark_file_number_used(n);
        match kind {
            FileKind::Wal if n >= versions.log_number => wals.push(n),
            FileKind::Vlog => vlogs.push(n),
            _ => {}
        }
    }
    wals.sort_unstable();
    vlogs.sort_unstable();
    let mut info = RecoveryInfo::default();
    info.logs.extend(versions.recovered_log.take());
    let mut r = Replay {
        dir,
        fs,
        opts,
        tables,
        table_opts,
        edit: VersionEdit::default(),
        mem: Arc::new(MemTable::new(0, opts.write_buffer_bytes)),
        max_seq: versions.last_sequence,
    };
    // A WAL is synced and sealed before the next one is written (a WAL switch), so only the
    // newest can end in an unsynced tail or without its seal: either followed by records in
    // a newer WAL is corruption.
    let mut unfinished: Option<Unfinished> = None;
    for &number in &wals {
        replay_wal(&mut r, &mut versions, &mut info, number, &mut unfinished)?;
    }
    if let Some(head) = versions.vlog.head {
        replay_vlog(&mut r, &mut versions, &mut info, &vlogs, head)?;
    }
    r.maybe_flush(&mut versions, true)?;

    // Obsolete value-log files (GC emptied them before a crash) go now; the rest stay
    // readable.
    let mut vlog_files = VlogFileSet::new();
    for &n in &vlogs {
        let path = filename::vlog(dir, n);
        if versions.vlog.obsolete.contains(&n) {
            // Best effort: a file that stays is removed at the next open.
            if fs.remove(&path).is_ok() {
                r.edit.vlog_deleted.push(n);
            }
            continue;
        }
        vlog_files.insert(n, VlogFile::new(dir, n, fs.file_size(&path)?));
    }
    for n in versions.vlog.obsolete.iter() {
        if !vlogs.contains(n) {
            r.edit.vlog_deleted.push(*n);
        }
    }

    let number = versions.new_file_number();
    let separation = opts.separation();
    let (wal, vlog_head) = if separation {
        let entry = VlogFile::new(dir, number, 0);
        let mut w = VlogWriter::new(
            crate::vlog::writer::create_head_file(&**fs, &entry.path, opts.vlog_head_mmap)?,
            entry.clone(),
            head_shared.clone(),
            opts.vlog_buffer_bytes,
        );
        w.sync()?;
        vlog_files.insert(number, entry);
        r.edit.vlog_head = Some((number, format::FILE_HEADER_LEN as u64));
        (None, Some(w))
    } else {
        let wal = LogWriter::new(crate::io::create_append_file(
            &**fs,
            &filename::wal(dir, number),
            opts.wal_mmap,
        )?)?;
        if versions.vlog.head.is_some() {
            // Everything in the value log is in tables now; a later open with separation on
            // starts its log at a higher number.
            r.edit.vlog_head = Some((number, 0));
        }
        (Some(wal), None)
    };
    fs.sync_dir(dir)?;
    r.edit.log_number = Some(number);
    versions.last_sequence = r.max_seq;
    versions.log_and_apply(r.edit)?;
    Ok(Recovered {
        versions,
        mem: Arc::new(MemTable::with_vlog_start(
            number,
            separation.then_some((number, format::FILE_HEADER_LEN as u64)),
            opts.write_buffer_bytes,
        )),
        wal,
        vlog_head,
        vlog_files,
        info,
    })
}

/// A log file that no later file of its log may follow with records: it ended in an
/// unsynced tail, or (format 2) without the sync mark that seals a switched WAL or a rotated
/// value-log file. The file was synced and sealed before its successor was written, so
/// records in a later file prove that what it lost had been durable (`docs/design.md` §7.6).
pub(crate) enum Unfinished {
    /// Ended in an unsynced tail.
    Torn(PathBuf),
    /// Ended cleanly at `end` (a record or frame boundary) without a sync mark.
    Unsealed { path: PathBuf, end: u64 },
}

impl Unfinished {
    /// How a replay pass records the end of a file: `tail` if it had one, else unsealed
    /// unless `sealed` or the file is in format 1 (`v1`: no sync marks; the old rule).
    pub(crate) fn after(
        path: &Path,
        tail: bool,
        sealed: bool,
        v1: bool,
        end: u64,
    ) -> Option<Unfinished> {
        if tail {
            Some(Unfinished::Torn(path.to_path_buf()))
        } else if sealed || v1 {
            None
        } else {
            Some(Unfinished::Unsealed {
                path: path.to_path_buf(),
                end,
            })
        }
    }

    /// The corruption a record (`what`: "records" or "frames") found at `at` of the later
    /// file `later` proves.
    pub(crate) fn refuse(&self, later: &Path, at: u64, what: &str) -> Error {
        match self {
            Unfinished::Torn(t) => Error::corruption(
                later,
                at,
                format!(
                    "valid {what} after the unsynced tail of {} (a log file is synced before \
                     the next one is written)",
                    t.display()
                ),
            ),
            Unfinished::Unsealed { path, end } => Error::corruption(
                path,
                *end,
                format!(
                    "the file ends at offset {end} without the sync mark that seals it, but \
                     the later file {} holds {what} (from offset {at}): a log file is synced \
                     and sealed before the next one is written, so {what} from offset {end} \
                     on were lost (expected them or a sync mark at offset {end})",
                    later.display()
                ),
            ),
        }
    }
}

fn replay_wal(
    r: &mut Replay,
    versions: &mut VersionSet,
    info: &mut RecoveryInfo,
    number: u64,
    unfinished: &mut Option<Unfinished>,
) -> Result<()> {
    let path = filename::wal(r.dir, number);
    let mut reader = LogReader::new(r.fs.open(&path)?);
    info.wal_files += 1;
    let mut records = 0;
    while let Some((offset, rec)) = reader.read_record()? {
        if let Some(u) = unfinished {
            return Err(u.refuse(&path, offset, "records"));
        }
        let batch = WriteBatch::from_data(rec, &path, offset)?;
        let mut seq = batch.seq();
        for rec in batch.iter() {
            // from_data checked every record.
            let Ok(rec) = rec else { break };
            r.mem
                .add(seq, rec.kind, rec.key, rec.value.unwrap_or_default());
            seq += 1;
        }
        if batch.count() > 0 {
            r.max_seq = r.max_seq.max(seq - 1);
        }
        info.wal_records += 1;
        records += 1;
        r.maybe_flush(versions, false)?;
    }
    let tail = reader.truncated_tail();
    info.logs.push(LogRecovery::new(
        &path,
        records,
        reader.file_len(),
        tail.clone(),
    ));
    let v1 = reader.version() == Some(crate::log::FORMAT_VERSION_NO_WATERMARK);
    *unfinished = Unfinished::after(
        &path,
        tail.is_some(),
        reader.sealed(),
        v1,
        reader.file_len(),
    );
    if let Some((offset, reason)) = tail {
        info.truncated_tail = Some((path, offset, reason));
    }
    Ok(())
}

fn replay_vlog(
    r: &mut Replay,
    versions: &mut VersionSet,
    info: &mut RecoveryInfo,
    vlogs: &[u64],
    (head_file, head_offset): (u64, u64),
) -> Result<()> {
    // A rotated file was synced and sealed before the next one was written: see `Unfinished`.
    let mut unfinished: Option<Unfinished> = None;
    let mut replayed = Vec::new();
    for &n in vlogs.iter().filter(|n| **n >= head_file) {
        let path = filename::vlog(r.dir, n);
        let size = r.fs.file_size(&path)?;
        let file = r.fs.open(&path)?;
        let start = if n == head_file { head_offset } else { 0 };
        if start > size {
            return Err(Error::corruption(
                &path,
                size,
                format!("the MANIFEST's value-log head is at offset {start}, past the end"),
            ));
        }
        let mut reader = FrameReader::new(file, &path, size, start);
        info.vlog_files += 1;
        replayed.push(path.clone());
        let mut frames = 0;
        while let Some(frame) = reader.next_frame()? {
            if let Some(u) = &unfinished {
                return Err(u.refuse(&path, frame.offset, "frames"));
            }
            info.vlog_frames += 1;
            frames += 1;
            let h = frame.header;
            if h.count > 0 {
                r.max_seq = r.max_seq.max(h.first_seq + u64::from(h.count) - 1);
            }
            if h.kind == FRAME_NO_REPLAY {
                continue;
            }
            for (i, (offset, e)) in frame.entries().enumerate() {
                let seq = h.first_seq + i as u64;
                match e.kind {
                    EntryKind::Delete => r.mem.add(seq, ValueKind::Delete, e.key, b""),
                    EntryKind::Inline => r.mem.add(seq, ValueKind::Value, e.key, e.value),
                    EntryKind::Separated => {
                        let ptr = ValuePointer {
                            file: n,
                            offset,
                            len: e.len as u32,
                        };
                        r.mem.add(seq, ValueKind::Pointer, e.key, &ptr.to_vec());
                        r.mem.add_vlog_refs(n, e.len as u64);
                    }
                }
            }
            r.maybe_flush(versions, false)?;
        }
        if reader.position() < size {
            // GC must know that this tail is a crash's, not damage to a sealed file.
            r.edit.vlog_tails.push((n, reader.position()));
        }
        let tail = reader.truncated_tail();
        info.logs
            .push(LogRecovery::new(&path, frames, size, tail.clone()));
        let v1 = reader.version() == Some(format::FORMAT_VERSION_NO_WATERMARK);
        unfinished = Unfinished::after(
            &path,
            tail.is_some(),
            reader.sealed(),
            v1,
            reader.position(),
        );
        if let Some((offset, reason)) = tail {
            info.truncated_tail = Some((path, offset, reason));
        }
    }
    // Tables about to be committed point into these files: make them durable first.
    for p in replayed {
        r.fs.sync_file(&p)?;
    }
    Ok(())
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
        // Recovery writes the log's records as they are: no database to read yet, and
        // keeping everything is always allowed.
        filter: None,
        log_values: Some(crate::compaction::job::LogValues {
            below: opts.unseparate_below(),
            source: None,
        }),
    };
    let mut out = OutputWriter::for_flush(&env);
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
