//! In-memory files for the table tests (the crate's `MemFs` is written elsewhere).

use crate::error::{Error, Result};
use crate::io::{RandomAccessFile, WritableFile};
use parking_lot::Mutex;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A writable file appending to a shared vector.
pub struct VecFile {
    pub data: Arc<Mutex<Vec<u8>>>,
    pub synced: Arc<Mutex<bool>>,
    path: PathBuf,
}

impl VecFile {
    pub fn new(path: &str) -> Self {
        VecFile {
            data: Arc::default(),
            synced: Arc::default(),
            path: PathBuf::from(path),
        }
    }
}

impl WritableFile for VecFile {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        self.data.lock().extend_from_slice(data);
        *self.synced.lock() = false;
        Ok(())
    }
    fn flush(&mut self) -> Result<()> {
        Ok(())
    }
    fn sync(&mut self) -> Result<()> {
        *self.synced.lock() = true;
        Ok(())
    }
    fn size(&self) -> u64 {
        self.data.lock().len() as u64
    }
    fn path(&self) -> &Path {
        &self.path
    }
}

/// A read-only file over a vector; records readahead hints and counts reads.
pub struct VecReader {
    data: Vec<u8>,
    path: PathBuf,
    pub readaheads: Mutex<Vec<(u64, u64)>>,
    pub reads: Mutex<u64>,
}

impl VecReader {
    pub fn new(data: Vec<u8>, path: &str) -> Arc<Self> {
        Arc::new(VecReader {
            data,
            path: PathBuf::from(path),
            readaheads: Mutex::default(),
            reads: Mutex::default(),
        })
    }
}

impl RandomAccessFile for VecReader {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        *self.reads.lock() += 1;
        let start = usize::try_from(offset).unwrap_or(usize::MAX);
        match start
            .checked_add(buf.len())
            .and_then(|end| self.data.get(start..end))
        {
            Some(src) => {
                buf.copy_from_slice(src);
                Ok(())
            }
            None => Err(Error::io(
                "read",
                &self.path,
                std::io::Error::from(std::io::ErrorKind::UnexpectedEof),
            )),
        }
    }
    fn size(&self) -> u64 {
        self.data.len() as u64
    }
    fn path(&self) -> &Path {
        &self.path
    }
    fn readahead(&self, offset: u64, len: u64) {
        self.readaheads.lock().push((offset, len));
    }
}
