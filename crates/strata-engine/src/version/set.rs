//! [`VersionSet`]: the current [`Version`], the MANIFEST that persists it, and the file
//! number and sequence counters. Format: `docs/format/manifest.md`.
//!
//! Every change is a [`VersionEdit`] appended to the MANIFEST and synced before the new
//! version is installed ([`VersionSet::log_and_apply`]); a new MANIFEST (every open, and past
//! 64 MiB) starts with a snapshot and becomes live by an atomic rename of `CURRENT`. Why, and
//! what it means for deleting files: `docs/design.md` §2.3, §2.4, §7.1. The caller serializes
//! calls (the set lives inside the database's state lock).

use super::{Version, VersionEdit};
use crate::error::{Error, Result};
use crate::filename;
use crate::io::Fs;
use crate::log::{LogReader, LogWriter};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};

/// A MANIFEST larger than this is replaced by a fresh one holding a snapshot.
const MAX_MANIFEST_BYTES: u64 = 64 << 20;

pub struct VersionSet {
    dir: PathBuf,
    fs: Arc<dyn Fs>,
    current: Arc<Version>,
    /// Versions handed out to readers; their tables must not be deleted while they live.
    handed_out: Vec<Weak<Version>>,
    manifest: Option<LogWriter>,
    manifest_number: u64,
    next_file_number: u64,
    /// Last sequence number recorded in the MANIFEST (the live one is in the database).
    pub last_sequence: u64,
    /// WALs numbered below this are fully flushed.
    pub log_number: u64,
    /// Per level: where the next size-triggered compaction starts (round robin).
    pub compact_pointers: Vec<Vec<u8>>,
    /// Edits read at recovery (for `check` and stats).
    pub recovered_records: u64,
    /// What reading the MANIFEST found (records, an unsynced tail dropped), for the
    /// recovery report.
    pub recovered_log: Option<crate::log::LogRecovery>,
    /// The value log's durable head, live bytes and obsolete files.
    pub vlog: crate::vlog::VlogManifest,
}

impl VersionSet {
    /// Creates the files of a new, empty database: MANIFEST-000001 and CURRENT.
    pub fn create_new(fs: &Arc<dyn Fs>, dir: &Path) -> Result<()> {
        let edit = VersionEdit {
            log_number: Some(0),
            next_file_number: Some(2),
            last_sequence: Some(0),
            ..Default::default()
        };
        let path = filename::manifest(dir, 1);
        let mut w = LogWriter::new(fs.create(&path)?)?;
        let mut rec = Vec::new();
        edit.encode(&mut rec);
        w.add_record(&rec)?;
        w.sync()?;
        set_current(fs, dir, 1)
    }

    /// Reads CURRENT and replays the MANIFEST it names. `tier_dir` is where the L0 tier's
    /// tables are (`Options::l0_tier_dir`); a version that holds some needs it.
    pub fn recover(
        fs: Arc<dyn Fs>,
        dir: &Path,
        num_levels: usize,
        tier_dir: Option<&Path>,
    ) -> Result<VersionSet> {
        let cur_path = filename::current(dir);
        let cur = fs.read_all(&cur_path)?;
        let name = std::str::from_utf8(&cur)
            .ok()
            .and_then(|s| s.strip_suffix('\n'))
            .filter(|s| filename::parse(s).is_some_and(|(k, _)| k == filename::FileKind::Manifest))
            .ok_or_else(|| Error::corruption(&cur_path, 0, "CURRENT does not name a MANIFEST"))?;
        let manifest_number = filename::parse(name).map(|(_, n)| n).unwrap_or(0);
        let mpath = dir.join(name);
        let mut reader = LogReader::new(fs.open(&mpath)?);
        let mut version = Version::new(num_levels);
        let mut next_file = None;
        let mut last_seq = None;
        let mut log_number = None;
        let mut pointers = vec![Vec::new(); num_levels];
        let mut records = 0;
        let mut vlog = crate::vlog::VlogManifest::default();
        while let Some((offset, rec)) = reader.read_record()? {
            let edit = VersionEdit::decode(&rec, &mpath, offset)?;
            let levels = edit.new_files.iter().map(|(l, _)| *l);
            if let Some(level) = levels
                .chain(edit.deleted_files.iter().map(|(l, _)| *l))
                .chain(edit.compact_pointers.iter().map(|(l, _)| *l))
                .find(|l| *l as usize >= num_levels)
            {
                return Err(Error::InvalidArgument(format!(
                    "the database has level {level} but num_levels is {num_levels}"
                )));
            }
            version = version.apply(&edit);
            next_file = edit.next_file_number.or(next_file);
            last_seq = edit.last_sequence.or(last_seq);
            log_number = edit.log_number.or(log_number);
            vlog.apply(&edit);
            for (level, key) in edit.compact_pointers {
                pointers[level as usize] = key;
            }
            records += 1;
        }
        let torn = reader.truncated_tail();
        let missing = |what: &str| Error::corruption(&mpath, 0, format!("no {what} recorded"));
        let next_file_number = next_file.ok_or_else(|| missing("next file number"))?;
        let vs = VersionSet {
            dir: dir.to_path_buf(),
            fs,
            current: Arc::new(version),
            handed_out: Vec::new(),
            manifest: None,
            manifest_number,
            next_file_number,
            last_sequence: last_seq.ok_or_else(|| missing("last sequence"))?,
            log_number: log_number.ok_or_else(|| missing("log number"))?,
            compact_pointers: pointers,
            recovered_records: records,
            recovered_log: Some(crate::log::LogRecovery::new(
                &mpath,
                records,
                reader.file_len(),
                torn.clone(),
            )),
            vlog,
        };
        vs.current
            .check_invariants()
            .map_err(|r| Error::corruption(&mpath, 0, r))?;
        // A torn last record is a MANIFEST write that crashed before its sync, so nothing
        // acted on it: no WAL or table it made obsolete was deleted. Every file the recovered
        // state needs must therefore exist; if one is gone, the last record was a complete,
        // used edit damaged afterwards (or files were lost): refuse rather than serve
        // stale data.
        let on_disk: std::collections::HashSet<(crate::filename::FileKind, u64)> = vs
            .fs
            .list(dir)?
            .iter()
            .filter_map(|n| crate::filename::parse(n))
            .collect();
        let damaged = torn.map(|(o, r)| format!(" (last record damaged at offset {o}: {r})"));
        let tier_files: Vec<u64> = vs.current.levels[0]
            .iter()
            .filter(|f| f.tier)
            .map(|f| f.number)
            .collect();
        let in_tier = match (tier_dir, tier_files.is_empty()) {
            (_, true) => std::collections::HashSet::new(),
            (None, false) => {
                return Err(Error::InvalidArgument(format!(
                    "the database's L0 holds {} tables of the L0 tier (first: {:06}.l0t); \
                     open it with l0_tier_dir set to the directory that holds them",
                    tier_files.len(),
                    tier_files[0]
                )))
            }
            (Some(t), false) => crate::l0tier::list_tables(t)?,
        };
        if let Some(missing) = vs.current.levels.iter().flatten().find(|f| {
            if f.tier {
                !in_tier.contains(&f.number)
            } else {
                !on_disk.contains(&(crate::filename::FileKind::Table, f.number))
            }
        }) {
            let missing = match tier_dir.filter(|_| missing.tier) {
                Some(t) => crate::filename::l0_table(t, missing.number)
                    .display()
                    .to_string(),
                None => missing.number.to_string(),
            };
            return Err(Error::corruption(
                &mpath,
                0,
                format!(
                    "table {missing} of the recovered version is missing{}",
                    damaged.unwrap_or_default()
                ),
            ));
        }
        if let Some(d) = damaged {
            // With key-value separation the log is the value log, from its durable head.
            let (kind, number, needed) = match vs.vlog.head {
                Some((file, offset)) if offset > 0 => (crate::filename::FileKind::Vlog, file, true),
                _ => (
                    crate::filename::FileKind::Wal,
                    vs.log_number,
                    vs.log_number > 0,
                ),
            };
            if needed && !on_disk.contains(&(kind, number)) {
                return Err(Error::corruption(
                    &mpath,
                    0,
                    format!(
                        "log {number} ({kind:?}) that the recovered state needs is missing{d}: \
                         a used edit was lost"
                    ),
                ));
            }
        }
        if let Some(max) = vs.current.file_numbers().max() {
            if max >= next_file_number {
                return Err(Error::corruption(
                    &mpath,
                    0,
                    format!("table {max} is not below the next file number {next_file_number}"),
                ));
            }
        }
        Ok(vs)
    }

    /// The current version.
    pub fn current(&self) -> Arc<Version> {
        self.current.clone()
    }

    /// The current version, remembered so its tables stay until the returned Arc is dropped.
    pub fn hand_out(&mut self) -> Arc<Version> {
        self.handed_out.retain(|w| w.strong_count() > 0);
        self.handed_out.push(Arc::downgrade(&self.current));
        self.current.clone()
    }

    /// Every table referenced by the current version or a version still in use.
    pub fn live_tables(&self) -> std::collections::HashSet<u64> {
        let mut live: std::collections::HashSet<u64> = self.current.file_numbers().collect();
        for w in &self.handed_out {
            if let Some(v) = w.upgrade() {
                live.extend(v.file_numbers());
            }
        }
        live
    }

    /// Allocates a file number.
    pub fn new_file_number(&mut self) -> u64 {
        let n = self.next_file_number;
        self.next_file_number += 1;
        n
    }

    /// Makes sure `n` is never allocated again (a file with that number exists on disk: a
    /// WAL made by a memtable switch, or a table of an uncommitted flush, may be numbered
    /// above what the MANIFEST recorded).
    pub fn mark_file_number_used(&mut self, n: u64) {
        if n >= self.next_file_number {
            self.next_file_number = n + 1;
        }
    }

    pub fn manifest_number(&self) -> u64 {
        self.manifest_number
    }

    /// Persists `edit` (sync) and installs the resulting version. On error nothing is
    /// installed; the caller must treat the database as failed (the MANIFEST's state is
    /// unknown).
    pub fn log_and_apply(&mut self, mut edit: VersionEdit) -> Result<Arc<Version>> {
        if let Some(n) = edit.log_number {
            debug_assert!(n >= self.log_number);
        }
        let new_version = Arc::new(self.current.apply(&edit));
        new_version
            .check_invariants()
            .map_err(|r| Error::InvalidArgument(format!("internal error: {r}")))?;
        let log_number = edit.log_number.unwrap_or(self.log_number);
        edit.next_file_number = Some(self.next_file_number);
        edit.last_sequence = Some(self.last_sequence);
        edit.log_number = Some(log_number);
        let mut rec = Vec::new();
        if self.manifest.is_none() {
            let number = self.new_file_number();
            edit.next_file_number = Some(self.next_file_number);
            let path = filename::manifest(&self.dir, number);
            let mut w = LogWriter::new(self.fs.create(&path)?)?;
            let snap = self.snapshot_edit();
            snap.encode(&mut rec);
            w.add_record(&rec)?;
            rec.clear();
            edit.encode(&mut rec);
            w.add_record(&rec)?;
            w.sync()?;
            set_current(&self.fs, &self.dir, number)?;
            self.manifest = Some(w);
            self.manifest_number = number;
        } else {
            edit.encode(&mut rec);
            let w = self.manifest.as_mut().expect("manifest open");
            w.add_record(&rec)?;
            w.sync()?;
            if w.size() > MAX_MANIFEST_BYTES {
                // The next edit starts a new MANIFEST with a snapshot; the old one becomes
                // obsolete once CURRENT names the new one.
                self.manifest = None;
            }
        }
        for (level, key) in &edit.compact_pointers {
            self.compact_pointers[*level as usize] = key.clone();
        }
        self.vlog.apply(&edit);
        self.log_number = log_number;
        self.current = new_version.clone();
        Ok(new_version)
    }

    /// An edit that recreates the current state from nothing.
    fn snapshot_edit(&self) -> VersionEdit {
        let mut e = VersionEdit {
            log_number: Some(self.log_number),
            next_file_number: Some(self.next_file_number),
            last_sequence: Some(self.last_sequence),
            ..Default::default()
        };
        for (level, files) in self.current.levels.iter().enumerate() {
            for f in files {
                e.new_files.push((level as u32, (**f).clone()));
            }
        }
        for (level, key) in self.compact_pointers.iter().enumerate() {
            if !key.is_empty() {
                e.compact_pointers.push((level as u32, key.clone()));
            }
        }
        self.vlog.snapshot_into(&mut e);
        e
    }
}

/// Points CURRENT at MANIFEST-`number`: write a temp file, sync it, rename, sync the dir.
fn set_current(fs: &Arc<dyn Fs>, dir: &Path, number: u64) -> Result<()> {
    let tmp = filename::temp(dir, number);
    let name = filename::manifest(dir, number);
    let name = name
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    fs.write_all_synced(&tmp, format!("{name}\n").as_bytes())?;
    fs.rename(&tmp, &filename::current(dir))?;
    fs.sync_dir(dir)
}
