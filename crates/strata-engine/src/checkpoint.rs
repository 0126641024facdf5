//! `Db::checkpoint`: a copy of the database as of one moment, in a new directory, that opens
//! as a database of its own (a backup). Protocol: `docs/design.md` §7.5.
//!
//! Locks, in this order: `gc_lock` (no GC step may retire a value-log file while the file
//! list is taken), the write queue (a pause: no group is written, so the live log stops at a
//! group boundary), `state` (no flush, compaction or GC edit reaches the MANIFEST and no
//! table of the current version is deleted). Under them: sync the live log, then hard-link
//! every file that is never written again (tables, sealed value-log files, full WALs) and
//! copy the files still growing (the live WAL or head value-log file, the MANIFEST) up to
//! their length at that moment. The checkpoint then recovers like a crashed database whose
//! every log was synced: nothing acknowledged before the pause is missing, nothing after it
//! is present.

use crate::error::{Error, Result};
use crate::filename::{self, FileKind};
use crate::io::Fs;
use crate::state::DbInner;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Chunk of a copy.
const COPY_CHUNK_BYTES: u64 = 1 << 20;

/// How one file reaches the checkpoint.
enum Take {
    /// Immutable: hard link (a copy where the file system cannot link).
    Link,
    /// Still growing: copy this many bytes.
    Prefix(u64),
}

impl DbInner {
    pub(crate) fn checkpoint(&self, dest: &Path) -> Result<()> {
        if self.fs.exists(dest)? {
            return Err(Error::InvalidArgument(format!(
                "checkpoint directory {} already exists",
                dest.display()
            )));
        }
        if self.opts.l0_tier_dir.is_some() {
            // Its tables live outside the directory a checkpoint copies; a checkpoint would
            // need them copied and the copy opened with its own tier directory.
            return Err(Error::NotSupported(
                "checkpoint of a database with the L0 tier on (l0_tier_dir)".into(),
            ));
        }
        // Writes made without the log are only in memtables: flush them first, as a clean
        // close does (one made after this call starts may be missing, as after a crash).
        self.flush_unlogged()?;
        self.fs.create_dir_all(dest)?;
        let _gc = self.gc_lock.lock();
        let written = self.with_writes_paused(|| {
            self.check_bg_error()?;
            self.sync_logs()?;
            let st = self.state.lock();
            let mut plan: Vec<(String, Take)> = Vec::new();
            let live: HashSet<u64> = st
                .versions
                .current()
                .levels
                .iter()
                .flatten()
                .map(|f| f.number)
                .collect();
            let live_wal = st.mem.wal_number();
            let min_wal = st
                .imms
                .first()
                .map_or(live_wal, |m| m.wal_number())
                .min(st.versions.log_number);
            let head = self
                .vlog
                .head
                .lock()
                .as_ref()
                .map(|w| (w.number(), w.position()));
            let manifest = st.versions.manifest_number();
            for name in self.fs.list(&self.dir)? {
                let Some((kind, n)) = filename::parse(&name) else {
                    continue;
                };
                let take = match kind {
                    FileKind::Table if live.contains(&n) => Take::Link,
                    FileKind::Wal if n == live_wal => {
                        Take::Prefix(self.fs.file_size(&self.dir.join(&name))?)
                    }
                    FileKind::Wal if n >= min_wal => Take::Link,
                    FileKind::Vlog => match head {
                        Some((h, pos)) if h == n => Take::Prefix(pos),
                        _ if st.vlog_files.contains_key(&n) => Take::Link,
                        // Recorded obsolete: the checkpoint's MANIFEST says so too.
                        _ => continue,
                    },
                    FileKind::Manifest if n == manifest => {
                        Take::Prefix(self.fs.file_size(&self.dir.join(&name))?)
                    }
                    _ => continue,
                };
                plan.push((name, take));
            }
            let mut written = Vec::with_capacity(plan.len());
            for (name, take) in plan {
                let (from, to) = (self.dir.join(&name), dest.join(&name));
                match take {
                    Take::Link => link_or_copy(&self.fs, &from, &to)?,
                    Take::Prefix(len) => copy_prefix(&self.fs, &from, &to, len)?,
                }
                written.push(to);
            }
            let current = filename::manifest(dest, manifest);
            let current = current
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default();
            self.fs
                .write_all_synced(&filename::current(dest), format!("{current}\n").as_bytes())?;
            Ok(written)
        })?;
        sync_all(&self.fs, dest, &written)
    }
}

/// Hard-links `from` to `to`, or copies it whole where linking fails (another file system,
/// a file system without links).
pub(crate) fn link_or_copy(fs: &Arc<dyn Fs>, from: &Path, to: &Path) -> Result<()> {
    if fs.hard_link(from, to).is_ok() {
        return Ok(());
    }
    let len = fs.file_size(from)?;
    copy_prefix(fs, from, to, len)
}

/// Copies the first `len` bytes of `from` to a new file `to`, and syncs it.
pub(crate) fn copy_prefix(fs: &Arc<dyn Fs>, from: &Path, to: &Path, len: u64) -> Result<()> {
    let src = fs.open(from)?;
    let mut dst = fs.create(to)?;
    let mut buf = Vec::new();
    let mut off = 0;
    while off < len {
        let n = (len - off).min(COPY_CHUNK_BYTES);
        buf.resize(n as usize, 0);
        src.read_at(off, &mut buf)?;
        dst.append(&buf)?;
        off += n;
    }
    dst.sync()
}

/// Makes every file of the checkpoint and its directory entries durable (a linked file may
/// have been synced only through its other name, which is the same inode: syncing again
/// is cheap and says so).
fn sync_all(fs: &Arc<dyn Fs>, dir: &Path, files: &[PathBuf]) -> Result<()> {
    for f in files {
        fs.sync_file(f)?;
    }
    fs.sync_dir(dir)?;
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        fs.sync_dir(parent)?;
    }
    Ok(())
}
