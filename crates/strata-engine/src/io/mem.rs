//! STUB: to be written (MemFs with crash simulation).
use super::*;
use crate::error::Result;

/// In-memory file system with crash simulation.
#[derive(Default)]
pub struct MemFs {}

impl MemFs {
    pub fn new() -> Self {
        MemFs {}
    }
    /// Simulates a power loss: unsynced bytes and un-dir-synced entries vanish.
    /// With `tear_last_write`, a prefix of the last unsynced append of each file survives.
    pub fn crash(&self, _tear_last_write: bool) {
        todo!()
    }
}

impl Fs for MemFs {
    fn create(&self, _path: &Path) -> Result<Box<dyn WritableFile>> {
        todo!()
    }
    fn open(&self, _path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        todo!()
    }
    fn rename(&self, _from: &Path, _to: &Path) -> Result<()> {
        todo!()
    }
    fn remove(&self, _path: &Path) -> Result<()> {
        todo!()
    }
    fn list(&self, _dir: &Path) -> Result<Vec<String>> {
        todo!()
    }
    fn exists(&self, _path: &Path) -> Result<bool> {
        todo!()
    }
    fn create_dir_all(&self, _dir: &Path) -> Result<()> {
        todo!()
    }
    fn sync_dir(&self, _dir: &Path) -> Result<()> {
        todo!()
    }
    fn file_size(&self, _path: &Path) -> Result<u64> {
        todo!()
    }
    fn lock(&self, _path: &Path) -> Result<Box<dyn FileLock>> {
        todo!()
    }
}
