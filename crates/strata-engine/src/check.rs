//! `check`: verify every checksum of a database without changing it (`strata check`).
//! Reads the MANIFEST, every live table (every block, key order across the table) and the
//! WALs still needed and every value-log file (every frame and entry checksum); then
//! follows every value pointer of the tables into the value log (see [`check_pointers`]);
//! goes on after a problem so that one run lists all of them (`docs/design.md` §7.4).

use crate::batch::WriteBatch;
use crate::error::{Error, Result};
use crate::filename::{self, FileKind};
use crate::io::{Fs, RandomAccessFile};
use crate::iter::{InternalIterator, MergingIterator};
use crate::key::{self, ValueKind};
use crate::l0tier::{L0VerifyStats, TierDir};
use crate::log::LogReader;
use crate::options::Options;
use crate::recovery::Unfinished;
use crate::sst::{ReadParams, Table};
use crate::table_cache::TableCache;
use crate::version::VersionSet;
use crate::vlog::{FrameReader, ValuePointer};
use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;

/// What `check` found.
#[derive(Clone, Debug, Default)]
pub struct CheckReport {
    pub tables: u64,
    pub blocks: u64,
    pub entries: u64,
    pub wal_files: u64,
    pub wal_records: u64,
    pub vlog_files: u64,
    pub vlog_frames: u64,
    pub manifest_records: u64,
    /// Value pointers of the tables followed into the value log and verified.
    pub pointers: u64,
    /// Every problem found (check goes on after the first).
    pub problems: Vec<Error>,
    /// Facts worth knowing that are not damage (e.g. a torn WAL tail that recovery drops).
    pub notes: Vec<String>,
    /// Per log file read (MANIFEST, WALs, value-log files): records read and the unsynced
    /// tail an open would drop, in bytes.
    pub logs: Vec<crate::log::LogRecovery>,
}

impl CheckReport {
    pub fn is_ok(&self) -> bool {
        self.problems.is_empty()
    }
}

impl std::fmt::Display for CheckReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "checked {} tables ({} blocks, {} entries), {} MANIFEST records, {} WAL files ({} records), {} value-log files ({} frames), {} value pointers",
            self.tables,
            self.blocks,
            self.entries,
            self.manifest_records,
            self.wal_files,
            self.wal_records,
            self.vlog_files,
            self.vlog_frames,
            self.pointers
        )?;
        for l in &self.logs {
            writeln!(f, "log: {l}")?;
        }
        for n in &self.notes {
            writeln!(f, "note: {n}")?;
        }
        if self.problems.is_empty() {
            writeln!(f, "OK: every checksum verified")
        } else {
            for p in &self.problems {
                writeln!(f, "PROBLEM: {p}")?;
            }
            writeln!(f, "{} problem(s) found", self.problems.len())
        }
    }
}

pub(crate) fn check(dir: &Path, opts: Options) -> Result<CheckReport> {
    let fs = opts.fs.clone();
    if !fs.exists(&filename::current(dir))? {
        return Err(Error::InvalidArgument(format!(
            "no database at {}",
            dir.display()
        )));
    }
    let _lock = fs.lock(&filename::lock(dir))?;
    let mut report = CheckReport::default();
    // The L0 tier's directory, if the options name one that exists (not created here).
    let tier = match opts.l0_tier_dir.as_deref().filter(|t| t.is_dir()) {
        Some(t) => Some(Arc::new(TierDir::open(t, opts.l0_table_options())?)),
        None => None,
    };
    let versions = match VersionSet::recover(
        fs.clone(),
        dir,
        opts.num_levels,
        tier.as_ref().map(|t| t.dir()),
    ) {
        Ok(v) => v,
        Err(e) if e.is_corruption() => {
            report.problems.push(e);
            return Ok(report);
        }
        Err(e) => return Err(e),
    };
    report.manifest_records = versions.recovered_records;
    report.logs.extend(versions.recovered_log.clone());
    let version = versions.current();
    for f in version.levels.iter().flatten() {
        if let Some(t) = tier.as_ref().filter(|_| f.tier) {
            match check_tier_table(t, f) {
                Ok(s) => {
                    report.tables += 1;
                    report.blocks += s.blocks;
                    report.entries += s.entries;
                }
                Err(e) => report.problems.push(e),
            }
            continue;
        }
        let path = filename::table(dir, f.number);
        let r = fs.open(&path).and_then(|file| {
            if file.size() != f.size {
                return Err(Error::corruption(
                    &path,
                    0,
                    format!("size {} but the MANIFEST says {}", file.size(), f.size),
                ));
            }
            Table::open(file, f.number, None)?.verify()
        });
        match r {
            Ok(s) => {
                report.tables += 1;
                report.blocks += s.blocks;
                report.entries += s.entries;
            }
            Err(e) => report.problems.push(e),
        }
    }
    let tables_ok = report.problems.is_empty();
    // Keys written by log records that recovery replays: newer than anything in the tables.
    let mut replayed: HashSet<Vec<u8>> = HashSet::new();
    let mut wals: Vec<u64> = fs
        .list(dir)?
        .iter()
        .filter_map(|n| filename::parse(n))
        .filter(|(k, n)| *k == FileKind::Wal && *n >= versions.log_number)
        .map(|(_, n)| n)
        .collect();
    wals.sort_unstable();
    // As recovery: records after a WAL that ended torn or (format 2) without its seal.
    let mut unfinished: Option<Unfinished> = None;
    for n in wals {
        let path = filename::wal(dir, n);
        report.wal_files += 1;
        let mut reader = match fs.open(&path) {
            Ok(f) => LogReader::new(f),
            Err(e) => {
                report.problems.push(e);
                continue;
            }
        };
        let mut records = 0;
        loop {
            match reader.read_record() {
                Ok(Some((offset, rec))) => match WriteBatch::from_data(rec, &path, offset) {
                    Ok(b) => {
                        if let Some(u) = unfinished.take() {
                            report.problems.push(u.refuse(&path, offset, "records"));
                        }
                        report.wal_records += 1;
                        records += 1;
                        replayed.extend(b.iter().flatten().map(|r| r.key.to_vec()));
                    }
                    Err(e) => {
                        report.problems.push(e);
                        break;
                    }
                },
                Ok(None) => break,
                Err(e) => {
                    report.problems.push(e);
                    break;
                }
            }
        }
        let tail = reader.truncated_tail();
        let v1 = reader.version() == Some(crate::log::FORMAT_VERSION_NO_WATERMARK);
        unfinished = Unfinished::after(
            &path,
            tail.is_some(),
            reader.sealed(),
            v1,
            reader.file_len(),
        );
        let log = crate::log::LogRecovery::new(&path, records, reader.file_len(), tail);
        if let Some((offset, reason)) = &log.tail {
            report.notes.push(format!(
                "{}: unsynced tail at offset {offset} ({reason}); recovery drops its {} bytes",
                path.display(),
                log.truncated_bytes
            ));
        }
        report.logs.push(log);
    }
    check_vlog(dir, &fs, &versions, &mut replayed, &mut report)?;
    if tables_ok {
        check_pointers(dir, &fs, &versions, tier, &replayed, &mut report)?;
    } else {
        report
            .notes
            .push("value pointers not followed: a table is damaged".into());
    }
    Ok(report)
}

/// Maps L0 tier table `f`, checks its size against the MANIFEST and verifies every block.
fn check_tier_table(tier: &TierDir, f: &crate::version::FileMeta) -> Result<L0VerifyStats> {
    let t = tier.table(f.number)?;
    if t.file_size() != f.size {
        return Err(Error::corruption(
            t.path(),
            0,
            format!("size {} but the MANIFEST says {}", t.file_size(), f.size),
        ));
    }
    t.verify()
}

/// Follows every value pointer in the tables into the value log and verifies the entry it
/// names (checksum, kind, key). The newest table entry of a key must resolve unless a log
/// record that recovery replays writes the key again (GC may then have collected its file:
/// that record supersedes it); a pointer into a file that is gone, or that GC recorded
/// obsolete, is then a **dangling pointer**: the key would read as corrupt. Older entries
/// (kept for snapshots that an offline check cannot see, or not yet compacted away) are
/// verified where their file still exists.
fn check_pointers(
    dir: &Path,
    fs: &Arc<dyn Fs>,
    versions: &VersionSet,
    tier: Option<Arc<TierDir>>,
    replayed: &HashSet<Vec<u8>>,
    report: &mut CheckReport,
) -> Result<()> {
    let version = versions.current();
    if version.levels.iter().all(|l| l.is_empty()) {
        return Ok(());
    }
    let present: HashSet<u64> = fs
        .list(dir)?
        .iter()
        .filter_map(|n| filename::parse(n))
        .filter(|(k, n)| *k == FileKind::Vlog && !versions.vlog.obsolete.contains(n))
        .map(|(_, n)| n)
        .collect();
    let tables = Arc::new(TableCache::new(dir.to_path_buf(), fs.clone(), 64, None).with_tier(tier));
    let params = ReadParams {
        verify_checksums: true,
        fill_cache: false,
        readahead: 2 << 20,
    };
    let mut it = MergingIterator::new(crate::iter::table_iters(&tables, &version, params)?);
    let mut handles: HashMap<u64, Arc<dyn RandomAccessFile>> = HashMap::new();
    let mut last_key: Option<Vec<u8>> = None;
    it.seek_to_first();
    while it.valid() {
        let Some(p) = key::parse_internal_key(it.key()) else {
            report.problems.push(Error::corruption(
                dir,
                0,
                "malformed internal key while following value pointers",
            ));
            return Ok(());
        };
        let newest = last_key.as_deref() != Some(p.user_key);
        if newest {
            last_key = Some(p.user_key.to_vec());
        }
        if p.kind == ValueKind::Pointer {
            if let Err(e) = check_pointer(
                dir,
                fs,
                &present,
                &mut handles,
                p.user_key,
                it.value(),
                newest && !replayed.contains(p.user_key),
            ) {
                report.problems.push(e);
            }
            report.pointers += 1;
        }
        it.next();
    }
    if let Err(e) = it.status() {
        report.problems.push(e);
    }
    Ok(())
}

/// Verifies one pointer of `user_key`; `must_resolve`: the pointer is what reads return.
fn check_pointer(
    dir: &Path,
    fs: &Arc<dyn Fs>,
    present: &HashSet<u64>,
    handles: &mut HashMap<u64, Arc<dyn RandomAccessFile>>,
    user_key: &[u8],
    raw: &[u8],
    must_resolve: bool,
) -> Result<()> {
    let ptr = ValuePointer::decode_or_corrupt(raw, "<lsm value pointer>")?;
    let path = filename::vlog(dir, ptr.file);
    if !present.contains(&ptr.file) {
        if !must_resolve {
            return Ok(());
        }
        return Err(Error::corruption(
            &path,
            ptr.offset,
            format!(
                "dangling value pointer: key {} points into a value-log file that does not exist",
                show_key(user_key)
            ),
        ));
    }
    let h = match handles.get(&ptr.file) {
        Some(h) => h.clone(),
        None => {
            let h = fs.open(&path)?;
            handles.insert(ptr.file, h.clone());
            h
        }
    };
    let mut data = vec![0u8; ptr.len as usize];
    h.read_at(ptr.offset, &mut data)?;
    crate::vlog::format::verify_pointed_entry(&data, &ptr, user_key, &path).map(|_| ())
}

fn check_vlog(
    dir: &Path,
    fs: &std::sync::Arc<dyn crate::io::Fs>,
    versions: &VersionSet,
    replayed: &mut HashSet<Vec<u8>>,
    report: &mut CheckReport,
) -> Result<()> {
    let mut files: Vec<u64> = fs
        .list(dir)?
        .iter()
        .filter_map(|n| filename::parse(n))
        .filter(|(k, _)| *k == FileKind::Vlog)
        .map(|(_, n)| n)
        .collect();
    files.sort_unstable();
    let head = versions.vlog.head.unwrap_or((0, 0));
    let head_file = head.0;
    // As recovery, from the head's file on: frames after a file that ended torn or (format 2)
    // without the sync mark that seals a rotated file.
    let mut unfinished: Option<Unfinished> = None;
    for n in files {
        let path = filename::vlog(dir, n);
        if versions.vlog.obsolete.contains(&n) {
            report.notes.push(format!(
                "{}: collected by GC; the next open removes it",
                path.display()
            ));
            continue;
        }
        report.vlog_files += 1;
        let r = fs.file_size(&path).and_then(|size| {
            let mut reader = FrameReader::new(fs.open(&path)?, &path, size, 0);
            let mut frames = 0;
            while let Some(frame) = reader.next_frame()? {
                report.vlog_frames += 1;
                frames += 1;
                if n >= head_file {
                    if let Some(u) = unfinished.take() {
                        report
                            .problems
                            .push(u.refuse(&path, frame.offset, "frames"));
                    }
                }
                let from_head = n > head.0 || (n == head.0 && frame.offset >= head.1);
                if from_head && frame.header.kind == crate::vlog::format::FRAME_REPLAY {
                    replayed.extend(frame.entries().map(|(_, e)| e.key.to_vec()));
                }
            }
            if n >= head_file {
                let tail = reader.truncated_tail();
                let v1 = reader.version() == Some(crate::vlog::format::FORMAT_VERSION_NO_WATERMARK);
                unfinished = Unfinished::after(
                    &path,
                    tail.is_some(),
                    reader.sealed(),
                    v1,
                    reader.position(),
                );
                report
                    .logs
                    .push(crate::log::LogRecovery::new(&path, frames, size, tail));
            }
            Ok((reader.position(), size))
        });
        match r {
            Err(e) => report.problems.push(e),
            Ok((end, size)) if end < size => {
                if versions.vlog.tails.get(&n) == Some(&end) {
                    report.notes.push(format!(
                        "{}: frames end at offset {end}, before a tail a crash tore (recorded at recovery)",
                        path.display()
                    ));
                } else if n >= head_file {
                    report.notes.push(format!(
                        "{}: torn tail at offset {end}; recovery drops it",
                        path.display()
                    ));
                } else {
                    report.problems.push(Error::corruption(
                        &path,
                        end,
                        "damaged frames at the end of a sealed value-log file",
                    ));
                }
            }
            Ok(_) => {}
        }
    }
    Ok(())
}

/// A key for a message: printable ASCII as is, other bytes as `\xNN`, at most 64 bytes.
fn show_key(k: &[u8]) -> String {
    let mut s: String = k
        .iter()
        .take(64)
        .map(|&b| match b {
            b' '..=b'~' if b != b'\\' => (b as char).to_string(),
            _ => format!("\\x{b:02x}"),
        })
        .collect();
    if k.len() > 64 {
        s.push_str("...");
    }
    format!("\"{s}\"")
}
