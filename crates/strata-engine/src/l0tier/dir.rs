//! The tier's directory (`Options::l0_tier_dir`): where flushes write L0 tables and where
//! readers map them. One database per directory, held by a lock file as the database's own
//! directory is. Open tables are kept mapped by number until their file is deleted: a mapping
//! costs no file descriptor and no memory beyond the pages read, so there is no bound to
//! enforce as the table cache does for SSTables (the tier's capacity bounds their number).

use super::{L0Table, L0TableOptions, L0TableWriter};
use crate::error::{Error, Result};
use crate::filename::{self, FileKind};
use crate::io::{FileLock, Fs, RealFs};
use parking_lot::RwLock;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The tier directory's lock file (not `LOCK`, so that a database directory can double as
/// its own tier directory).
const LOCK_NAME: &str = "L0TIER.LOCK";

pub struct TierDir {
    dir: PathBuf,
    opts: L0TableOptions,
    tables: RwLock<HashMap<u64, Arc<L0Table>>>,
    _lock: Box<dyn FileLock>,
}

impl TierDir {
    /// Creates the directory if needed and locks it.
    pub fn open(dir: &Path, opts: L0TableOptions) -> Result<TierDir> {
        std::fs::create_dir_all(dir).map_err(|e| Error::io("create directory", dir, e))?;
        let lock = RealFs::new().lock(&dir.join(LOCK_NAME))?;
        Ok(TierDir {
            dir: dir.to_path_buf(),
            opts,
            tables: RwLock::new(HashMap::new()),
            _lock: lock,
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn path(&self, number: u64) -> PathBuf {
        filename::l0_table(&self.dir, number)
    }

    /// The mapped table `number`, mapping it on first use: its pages are faulted in and
    /// every block's checksum is checked then, so reads pay neither a page fault nor a
    /// checksum (a few ms per 64 MiB table, paid by the flush that wrote it or by the open
    /// of the database; see [`TierDir::open_all`]).
    pub fn table(&self, number: u64) -> Result<Arc<L0Table>> {
        if let Some(t) = self.tables.read().get(&number) {
            return Ok(t.clone());
        }
        let t = L0Table::open_with(&self.path(number), true)?;
        t.check_blocks()?;
        if t.file_number() != number {
            return Err(Error::corruption(
                t.path(),
                16,
                format!(
                    "super block names file {} in file {number}",
                    t.file_number()
                ),
            ));
        }
        Ok(self.tables.write().entry(number).or_insert(t).clone())
    }

    /// Maps the tables `numbers` now (the database's open), so that no read maps one.
    pub fn open_all(&self, numbers: impl IntoIterator<Item = u64>) -> Result<()> {
        for n in numbers {
            self.table(n)?;
        }
        Ok(())
    }

    /// Starts writing table `number`.
    pub fn create(&self, number: u64) -> Result<L0TableWriter> {
        L0TableWriter::create(&self.path(number), number, self.opts)
    }

    /// Forgets table `number` and removes its file (best effort: a file that stays is an
    /// orphan the next cleanup removes). Readers holding the table keep their mapping.
    pub fn remove(&self, number: u64) {
        self.tables.write().remove(&number);
        let _ = std::fs::remove_file(self.path(number));
    }

    /// Numbers of the tables in the directory.
    pub fn on_disk(&self) -> Result<HashSet<u64>> {
        list_tables(&self.dir)
    }

    /// Bytes the mapped tables' learned indexes and offset tables keep on the heap.
    pub fn index_bytes(&self) -> u64 {
        self.tables
            .read()
            .values()
            .map(|t| t.index_size_bytes() as u64)
            .sum()
    }
}

/// Numbers of the L0 tables in `dir` (other names are ignored).
pub fn list_tables(dir: &Path) -> Result<HashSet<u64>> {
    let rd = std::fs::read_dir(dir).map_err(|e| Error::io("list", dir, e))?;
    let mut out = HashSet::new();
    for e in rd {
        let e = e.map_err(|e| Error::io("list", dir, e))?;
        if let Some((FileKind::L0Table, n)) = e.file_name().to_str().and_then(filename::parse) {
            out.insert(n);
        }
    }
    Ok(out)
}
