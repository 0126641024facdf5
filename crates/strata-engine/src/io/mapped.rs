//! [`MappedAppendFile`]: a file appended to by storing into a shared writable mapping of it
//! (the value log's head, `Options::vlog_head_mmap`, `docs/design.md` §8.2).
//!
//! An append is a copy into the page cache with no system call: the bytes belong to the
//! kernel's page cache as soon as they are stored, so they survive a crash of the process
//! exactly as bytes handed over by `write(2)` do, and [`WritableFile::sync`] (`fdatasync`)
//! makes them durable (on Linux, pages dirtied through a shared mapping are written back by
//! `fsync` of the file like any other dirty page).
//!
//! The file grows in **chunks** of [`CHUNK_BYTES`]: each is reserved with `fallocate` before
//! it is mapped, so that running out of space is an error of that call and never a `SIGBUS`
//! on a store into a hole. Only the chunk being written is mapped. A crash leaves the file
//! with a zero-filled tail after the last append, which readers of the value log take as a
//! clean end (`vlog/reader.rs`); [`WritableFile::trim`] (a seal, a clean close) cuts the
//! file back to the bytes appended.

use super::WritableFile;
use crate::error::{Error, Result};
use std::fs::{File, OpenOptions};
use std::io::IoSlice;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

/// Bytes reserved and mapped at a time (a multiple of every page size Linux uses for files).
pub const CHUNK_BYTES: u64 = 4 << 20;

pub(super) struct MappedAppendFile {
    file: File,
    path: PathBuf,
    /// The mapped chunk: its first byte's offset in the file, and the mapping.
    map: Option<(u64, memmap2::MmapMut)>,
    /// Bytes appended.
    size: u64,
    /// Bytes of the file reserved (its length).
    reserved: u64,
    /// The first error; every later operation fails with it.
    failed: Option<Error>,
}

impl MappedAppendFile {
    /// Creates (or truncates) `path` and reserves its first chunk. `Ok(None)` when the file
    /// system cannot reserve space (`fallocate` unsupported): the caller appends with
    /// `write` instead.
    pub(super) fn create(path: &Path) -> Result<Option<MappedAppendFile>> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .map_err(|e| Error::io("create", path, e))?;
        let mut f = MappedAppendFile {
            file,
            path: path.to_path_buf(),
            map: None,
            size: 0,
            reserved: 0,
            failed: None,
        };
        match reserve(&f.file, 0, CHUNK_BYTES) {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => return Ok(None),
            Err(e) => return Err(Error::io("fallocate", path, e)),
        }
        f.reserved = CHUNK_BYTES;
        Ok(Some(f))
    }

    fn check_failed(&self) -> Result<()> {
        match &self.failed {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }

    fn fail(&mut self, op: &'static str, e: std::io::Error) -> Error {
        let err = Error::io(op, &self.path, e);
        self.failed = Some(err.clone());
        err
    }

    /// The mapping of the chunk holding offset `at`, reserved and mapped if it is not yet.
    fn chunk_at(&mut self, at: u64) -> Result<&mut memmap2::MmapMut> {
        let start = at - at % CHUNK_BYTES;
        if self.map.as_ref().is_some_and(|(s, _)| *s == start) {
            return Ok(&mut self.map.as_mut().expect("checked above").1);
        }
        // The previous chunk's stores stay in the page cache when it is unmapped.
        self.map = None;
        if start + CHUNK_BYTES > self.reserved {
            if let Err(e) = reserve(&self.file, start, CHUNK_BYTES) {
                return Err(self.fail("fallocate", e));
            }
            self.reserved = start + CHUNK_BYTES;
        }
        match map_chunk(&self.file, start, CHUNK_BYTES as usize) {
            Ok(m) => Ok(&mut self.map.insert((start, m)).1),
            Err(e) => Err(self.fail("mmap", e)),
        }
    }

    fn store(&mut self, mut data: &[u8]) -> Result<()> {
        while !data.is_empty() {
            let at = self.size;
            let map = self.chunk_at(at)?;
            let off = (at % CHUNK_BYTES) as usize;
            let n = data.len().min(map.len() - off);
            map[off..off + n].copy_from_slice(&data[..n]);
            data = &data[n..];
            self.size += n as u64;
        }
        Ok(())
    }
}

impl WritableFile for MappedAppendFile {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        self.check_failed()?;
        self.store(data)
    }

    fn flush(&mut self) -> Result<()> {
        self.check_failed()
    }

    fn append_vectored_now(&mut self, parts: &[IoSlice<'_>]) -> Result<()> {
        self.check_failed()?;
        for p in parts {
            self.store(p)?;
        }
        Ok(())
    }

    fn sync(&mut self) -> Result<()> {
        self.check_failed()?;
        // fdatasync writes back the pages dirtied through the mapping and the file's length.
        self.file.sync_data().map_err(|e| self.fail("sync", e))
    }

    fn trim(&mut self) -> Result<()> {
        self.check_failed()?;
        if self.reserved == self.size {
            return Ok(());
        }
        // Unmapped first: a mapping must never cover bytes past the end of its file.
        self.map = None;
        self.file
            .set_len(self.size)
            .map_err(|e| self.fail("truncate", e))?;
        self.reserved = self.size;
        Ok(())
    }

    fn size(&self) -> u64 {
        self.size
    }

    fn path(&self) -> &Path {
        &self.path
    }
}

/// Reserves `len` bytes of `file` from `offset` (`fallocate`, extending the file).
#[allow(unsafe_code)]
fn reserve(file: &File, offset: u64, len: u64) -> std::io::Result<()> {
    let (Ok(offset), Ok(len)) = (libc::off_t::try_from(offset), libc::off_t::try_from(len)) else {
        return Err(std::io::ErrorKind::InvalidInput.into());
    };
    loop {
        // SAFETY: `fallocate` takes a file descriptor (owned by `file`, open for the whole
        // call) and integers; it touches no memory of this process.
        let r = unsafe { libc::fallocate(file.as_raw_fd(), 0, offset, len) };
        if r == 0 {
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Maps `len` bytes of `file` from `offset` shared and writable.
#[allow(unsafe_code)]
fn map_chunk(file: &File, offset: u64, len: usize) -> std::io::Result<memmap2::MmapMut> {
    // SAFETY: the mapping is undefined behaviour only if the file is truncated under it or
    // written through another mapping while a slice of it is borrowed. The engine writes a
    // head value-log file only through this mapping, under the head writer's lock; readers
    // read it with `pread` (the kernel copies; no reference into this mapping escapes
    // `MappedAppendFile`); the only truncation is `trim`, which drops the mapping first; the
    // range is reserved (`fallocate`) before it is mapped, so no store meets a hole that the
    // file system cannot fill. Outside processes must not write or truncate a database's
    // files (the same rule as for the read-only mappings of sealed files, `real.rs`).
    unsafe {
        memmap2::MmapOptions::new()
            .offset(offset)
            .len(len)
            .map_mut(file)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn appends_reach_the_file_across_chunks_and_trim_cuts_the_reserve() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("head");
        let Some(mut f) = MappedAppendFile::create(&path).unwrap() else {
            return; // no fallocate here: the caller falls back to writes
        };
        let big: Vec<u8> = (0..CHUNK_BYTES as usize + 1000)
            .map(|i| (i % 251) as u8)
            .collect();
        f.append(b"head").unwrap();
        f.append_vectored_now(&[IoSlice::new(&big), IoSlice::new(b"tail")])
            .unwrap();
        let want: Vec<u8> = [&b"head"[..], &big, b"tail"].concat();
        assert_eq!(f.size(), want.len() as u64);
        // Before any sync or trim, another reader of the file sees the stores (page cache).
        let seen = std::fs::read(&path).unwrap();
        assert_eq!(seen.len() as u64, 2 * CHUNK_BYTES, "reserved whole chunks");
        assert_eq!(&seen[..want.len()], &want[..]);
        assert!(
            seen[want.len()..].iter().all(|&b| b == 0),
            "zero-filled reserve"
        );
        f.sync().unwrap();
        f.trim().unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), want);
        // Appends after a trim reserve again.
        f.append(b"more").unwrap();
        drop(f);
        let seen = std::fs::read(&path).unwrap();
        assert_eq!(&seen[..want.len() + 4], &[&want[..], b"more"].concat()[..]);
    }

    #[test]
    fn dropped_without_trim_leaves_appends_then_zeros() {
        // What a killed process leaves: every store is in the file.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("head");
        let Some(mut f) = MappedAppendFile::create(&path).unwrap() else {
            return;
        };
        for i in 0..1000u32 {
            f.append(&i.to_le_bytes()).unwrap();
        }
        std::mem::forget(f); // no destructor, as under kill -9
        let seen = std::fs::read(&path).unwrap();
        for i in 0..1000u32 {
            let at = i as usize * 4;
            assert_eq!(seen[at..at + 4], i.to_le_bytes());
        }
        assert!(seen[4000..].iter().all(|&b| b == 0));
    }
}
