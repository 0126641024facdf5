//! `check`: verify every checksum of a database without changing it (`strata check`).
//! Reads the MANIFEST, every live table (every block, key order across the table) and the
//! WALs still needed and every value-log file (every frame and entry checksum); goes on
//! after a problem so that one run lists all of them (`docs/design.md` §7.4).

use crate::batch::WriteBatch;
use crate::error::{Error, Result};
use crate::filename::{self, FileKind};
use crate::log::LogReader;
use crate::options::Options;
use crate::sst::Table;
use crate::version::VersionSet;
use crate::vlog::FrameReader;
use std::path::Path;

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
    /// Every problem found (check goes on after the first).
    pub problems: Vec<Error>,
    /// Facts worth knowing that are not damage (e.g. a torn WAL tail that recovery drops).
    pub notes: Vec<String>,
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
            "checked {} tables ({} blocks, {} entries), {} MANIFEST records, {} WAL files ({} records), {} value-log files ({} frames)",
            self.tables,
            self.blocks,
            self.entries,
            self.manifest_records,
            self.wal_files,
            self.wal_records,
            self.vlog_files,
            self.vlog_frames
        )?;
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
    let versions = match VersionSet::recover(fs.clone(), dir, opts.num_levels) {
        Ok(v) => v,
        Err(e) if e.is_corruption() => {
            report.problems.push(e);
            return Ok(report);
        }
        Err(e) => return Err(e),
    };
    report.manifest_records = versions.recovered_records;
    let version = versions.current();
    for f in version.levels.iter().flatten() {
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
    let mut wals: Vec<u64> = fs
        .list(dir)?
        .iter()
        .filter_map(|n| filename::parse(n))
        .filter(|(k, n)| *k == FileKind::Wal && *n >= versions.log_number)
        .map(|(_, n)| n)
        .collect();
    wals.sort_unstable();
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
        loop {
            match reader.read_record() {
                Ok(Some((offset, rec))) => match WriteBatch::from_data(rec, &path, offset) {
                    Ok(_) => report.wal_records += 1,
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
        if let Some((offset, reason)) = reader.truncated_tail() {
            report.notes.push(format!(
                "{}: torn tail at offset {offset} ({reason}); recovery drops it",
                path.display()
            ));
        }
    }
    check_vlog(dir, &fs, &versions, &mut report)?;
    Ok(report)
}

fn check_vlog(
    dir: &Path,
    fs: &std::sync::Arc<dyn crate::io::Fs>,
    versions: &VersionSet,
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
    let head_file = versions.vlog.head.map_or(0, |h| h.0);
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
            while reader.next_frame()?.is_some() {
                report.vlog_frames += 1;
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
