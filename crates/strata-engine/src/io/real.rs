//! STUB: to be written (RealFs).
use super::*;
use crate::error::Result;

/// The operating system's file system.
#[derive(Default, Debug, Clone)]
pub struct RealFs {}

impl RealFs {
    pub fn new() -> Self {
        RealFs {}
    }
}

impl Fs for RealFs {
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
