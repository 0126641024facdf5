//! [`RealFs`]: the operating system's file system.
//!
//! Writable files buffer appends in user space ([`WRITE_BUFFER_BYTES`]) so that the many small
//! appends of the WAL and table writers become few `write` system calls. Random-access files
//! use positional reads (`pread`), so one open file is shared by all reader threads without a
//! seek position to fight over.
//!
//! [`Fs::open_direct`] opens with `O_DIRECT`: reads bypass the page cache, so a benchmark
//! measures the device and the page cache does not hold a second copy of what the block cache
//! holds. Such a file reads the aligned range enclosing each request into an aligned buffer
//! and copies the wanted bytes out ([`super::aligned`]). A file system that refuses `O_DIRECT`
//! (EINVAL, e.g. some tmpfs versions) gets an ordinary open; [`direct_io_refusals`] counts
//! those, and the engine's stats show the count.
//!
//! Every error is reported as [`Error::Io`] naming the operation and the path.

use super::aligned::{AlignedBuf, AlignedRange, DIRECT_IO_ALIGN};
use super::*;
use crate::error::{Error, Result};
use smallvec::SmallVec;
use std::fs::{File, OpenOptions};
use std::io::{self, ErrorKind, IoSlice, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::sync::atomic::{AtomicU64, Ordering};

/// Opens with `O_DIRECT` that the file system refused (and that fell back to buffered reads),
/// over the whole process.
static DIRECT_IO_REFUSALS: AtomicU64 = AtomicU64::new(0);

/// How many direct opens of this process fell back to buffered reads because the file system
/// refused `O_DIRECT`.
pub fn direct_io_refusals() -> u64 {
    DIRECT_IO_REFUSALS.load(Ordering::Relaxed)
}

/// Size of the user-space write buffer of a [`RealFs`] writable file.
pub const WRITE_BUFFER_BYTES: usize = 256 << 10;

/// The operating system's file system.
#[derive(Default, Debug, Clone)]
pub struct RealFs {}

impl RealFs {
    pub fn new() -> Self {
        RealFs {}
    }
}

/// A file being appended to, with a user-space buffer.
///
/// After a failed write or sync the file refuses every further append, flush and sync: a
/// failed `write_all` may have written part of the buffer (retrying would duplicate bytes),
/// and after a failed fsync the kernel may have dropped the dirty pages, so a retried sync
/// could report success for data that never reached the disk.
struct RealWritableFile {
    file: File,
    path: PathBuf,
    buf: Vec<u8>,
    /// Bytes accepted by `append` (buffered or written).
    size: u64,
    /// The first write or sync error; every later operation fails with it.
    failed: Option<Error>,
}

impl RealWritableFile {
    fn check_failed(&self) -> Result<()> {
        match &self.failed {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }

    /// Writes all of `parts` to the OS (`writev`, at most IOV_MAX slices a call, short
    /// writes and interruptions continued), poisoning the file on failure.
    fn write_through(&mut self, op: &'static str, parts: &[IoSlice<'_>]) -> Result<()> {
        // A copy of the slice list to advance through: on the stack for the usual few.
        let mut rest: SmallVec<[IoSlice<'_>; 8]> = parts.iter().copied().collect();
        let mut left: &mut [IoSlice<'_>] = &mut rest;
        IoSlice::advance_slices(&mut left, 0);
        while !left.is_empty() {
            let e = match self.file.write_vectored(&left[..left.len().min(1024)]) {
                Ok(0) => ErrorKind::WriteZero.into(),
                Ok(n) => {
                    IoSlice::advance_slices(&mut left, n);
                    continue;
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => e,
            };
            let err = Error::io(op, &self.path, e);
            self.failed = Some(err.clone());
            return Err(err);
        }
        Ok(())
    }

    fn flush_buffer(&mut self, op: &'static str) -> Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let buf = std::mem::take(&mut self.buf);
        let r = self.write_through(op, &[IoSlice::new(&buf)]);
        // Keep the allocation for the next appends.
        self.buf = buf;
        self.buf.clear();
        r
    }
}

impl WritableFile for RealWritableFile {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        self.check_failed()?;
        if self.buf.len() + data.len() > WRITE_BUFFER_BYTES {
            self.flush_buffer("append")?;
        }
        if data.len() >= WRITE_BUFFER_BYTES {
            // Copying a large append into the buffer would only add a memcpy.
            self.write_through("append", &[IoSlice::new(data)])?;
        } else {
            self.buf.extend_from_slice(data);
        }
        self.size += data.len() as u64;
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        self.check_failed()?;
        self.flush_buffer("flush")
    }

    fn append_vectored_now(&mut self, parts: &[IoSlice<'_>]) -> Result<()> {
        self.check_failed()?;
        self.flush_buffer("append")?;
        self.write_through("append", parts)?;
        self.size += parts.iter().map(|p| p.len() as u64).sum::<u64>();
        Ok(())
    }

    fn sync(&mut self) -> Result<()> {
        self.check_failed()?;
        self.flush_buffer("sync")?;
        // fdatasync: the data and the metadata needed to read it back (the size), not mtime.
        if let Err(e) = self.file.sync_data() {
            let err = Error::io("sync", &self.path, e);
            self.failed = Some(err.clone());
            return Err(err);
        }
        Ok(())
    }

    fn size(&self) -> u64 {
        self.size
    }

    fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for RealWritableFile {
    /// Hands buffered bytes to the OS, like closing a `FILE*`. Errors are lost here: callers
    /// that care call `flush` or `sync` before dropping.
    fn drop(&mut self) {
        if self.failed.is_none() {
            let _ = self.flush_buffer("flush");
        }
    }
}

/// A file opened for positional reads.
struct RealRandomAccessFile {
    file: File,
    path: PathBuf,
    size: u64,
    /// Opened with `O_DIRECT`: every read must be aligned ([`DIRECT_IO_ALIGN`]).
    direct: bool,
}

/// The error for a read that reached the end of the file before filling its buffer.
pub(super) fn past_eof(len: usize, offset: u64, size: u64) -> io::Error {
    io::Error::new(
        ErrorKind::UnexpectedEof,
        format!(
            "read of {len} bytes at offset {offset} goes past the end of the file \
             ({size} bytes when opened)"
        ),
    )
}

impl RealRandomAccessFile {
    /// `O_DIRECT` read: the aligned range around `[offset, offset + buf.len())` into an
    /// aligned buffer, then the wanted bytes into `buf`. A short read (the kernel may stop
    /// early, and does at the end of the file) resumes at the last aligned boundary.
    fn read_direct(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let r = AlignedRange::new(offset, buf.len(), DIRECT_IO_ALIGN);
        let mut abuf = AlignedBuf::new(r.len, DIRECT_IO_ALIGN);
        let mut done = 0;
        while done < r.need {
            let pos = AlignedRange::resume_at(done, DIRECT_IO_ALIGN);
            match self
                .file
                .read_at(&mut abuf.as_mut_slice()[pos..], r.base + pos as u64)
            {
                Ok(n) if pos + n > done => done = pos + n,
                Ok(_) => return Err(past_eof(buf.len(), offset, self.size)),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        buf.copy_from_slice(&abuf.as_slice()[r.skip..r.need]);
        Ok(())
    }
}

impl RandomAccessFile for RealRandomAccessFile {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let r = if self.direct {
            self.read_direct(offset, buf)
        } else {
            self.file.read_exact_at(buf, offset).map_err(|e| {
                if e.kind() == ErrorKind::UnexpectedEof {
                    past_eof(buf.len(), offset, self.size)
                } else {
                    e
                }
            })
        };
        r.map_err(|e| Error::io("read", &self.path, e))
    }

    fn size(&self) -> u64 {
        self.size
    }

    fn path(&self) -> &Path {
        &self.path
    }

    fn raw_fd(&self) -> Option<RawFd> {
        Some(self.file.as_raw_fd())
    }

    fn direct_io(&self) -> bool {
        self.direct
    }

    // `readahead` keeps the default no-op: `posix_fadvise(POSIX_FADV_WILLNEED)` or
    // `readahead(2)` would need `unsafe` outside the io_uring module. The kernel's own
    // sequential-read detection still applies to compaction reads, and table iterators cut
    // blocks out of one large read anyway.
}

impl RealFs {
    fn open_with(&self, path: &Path, direct: bool) -> Result<Arc<dyn RandomAccessFile>> {
        let mut oo = OpenOptions::new();
        oo.read(true);
        if direct {
            oo.custom_flags(libc::O_DIRECT);
        }
        let (file, direct) = match oo.open(path) {
            Ok(f) => (f, direct),
            Err(e) if direct && e.raw_os_error() == Some(libc::EINVAL) => {
                DIRECT_IO_REFUSALS.fetch_add(1, Ordering::Relaxed);
                let f = File::open(path).map_err(|e| Error::io("open", path, e))?;
                (f, false)
            }
            Err(e) => return Err(Error::io("open", path, e)),
        };
        let size = file
            .metadata()
            .map_err(|e| Error::io("open", path, e))?
            .len();
        Ok(Arc::new(RealRandomAccessFile {
            file,
            path: path.to_path_buf(),
            size,
            direct,
        }))
    }
}

/// Holds an exclusive `flock` on the lock file; closing the file on drop releases it.
struct RealFileLock {
    _file: File,
}

impl FileLock for RealFileLock {}

impl Fs for RealFs {
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let file = File::create(path).map_err(|e| Error::io("create", path, e))?;
        Ok(Box::new(RealWritableFile {
            file,
            path: path.to_path_buf(),
            buf: Vec::new(),
            size: 0,
            failed: None,
        }))
    }

    #[cfg(target_os = "linux")]
    fn create_mapped(&self, path: &Path) -> Result<Option<Box<dyn WritableFile>>> {
        Ok(super::mapped::MappedAppendFile::create(path)?
            .map(|f| Box::new(f) as Box<dyn WritableFile>))
    }

    fn open(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        self.open_with(path, false)
    }

    fn open_direct(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        self.open_with(path, true)
    }

    fn map(&self, path: &Path) -> Result<Option<Arc<memmap2::Mmap>>> {
        map_read_only(path).map(|m| Some(Arc::new(m)))
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        std::fs::rename(from, to).map_err(|e| Error::io("rename", from, e))
    }

    fn remove(&self, path: &Path) -> Result<()> {
        std::fs::remove_file(path).map_err(|e| Error::io("remove", path, e))
    }

    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        let entries = std::fs::read_dir(dir).map_err(|e| Error::io("list", dir, e))?;
        let mut names = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| Error::io("list", dir, e))?;
            // A name that is not UTF-8 cannot be one of ours; show it lossily rather than fail.
            names.push(entry.file_name().to_string_lossy().into_owned());
        }
        Ok(names)
    }

    fn exists(&self, path: &Path) -> Result<bool> {
        path.try_exists().map_err(|e| Error::io("exists", path, e))
    }

    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        std::fs::create_dir_all(dir).map_err(|e| Error::io("create_dir_all", dir, e))
    }

    fn sync_dir(&self, dir: &Path) -> Result<()> {
        // On Linux, fsync of a directory opened read-only persists its entries.
        File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| Error::io("sync_dir", dir, e))
    }

    fn sync_file(&self, path: &Path) -> Result<()> {
        OpenOptions::new()
            .write(true)
            .open(path)
            .and_then(|f| f.sync_data())
            .map_err(|e| Error::io("sync", path, e))
    }

    fn hard_link(&self, from: &Path, to: &Path) -> Result<()> {
        std::fs::hard_link(from, to).map_err(|e| Error::io("hard_link", to, e))
    }

    fn file_size(&self, path: &Path) -> Result<u64> {
        std::fs::metadata(path)
            .map(|m| m.len())
            .map_err(|e| Error::io("file_size", path, e))
    }

    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| Error::io("lock", path, e))?;
        // flock locks belong to the open file description, so a second `lock` of the same path
        // in this process conflicts too, as a second `Db` on one directory must.
        // File::try_lock needs Rust 1.89 (the workspace says 1.80, but this crate does not
        // inherit it and the toolchain is 1.95).
        match file.try_lock() {
            Ok(()) => Ok(Box::new(RealFileLock { _file: file })),
            Err(std::fs::TryLockError::WouldBlock) => Err(Error::Locked(path.to_path_buf())),
            Err(std::fs::TryLockError::Error(e)) => Err(Error::io("lock", path, e)),
        }
    }
}

/// Maps the file at `path` for reading.
#[allow(unsafe_code)]
fn map_read_only(path: &Path) -> Result<memmap2::Mmap> {
    let file = std::fs::File::open(path).map_err(|e| Error::io("open", path, e))?;
    // SAFETY: a mapping is undefined behaviour if the file changes under it. `Fs::map`'s
    // callers map only files the engine never writes or truncates again (sealed value-log
    // files), and removing a file (unlinking) leaves the mapping intact. Another process
    // truncating it would fault (SIGBUS), as for any mapped file.
    unsafe { memmap2::Mmap::map(&file) }.map_err(|e| Error::io("mmap", path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp() -> tempfile::TempDir {
        tempfile::tempdir().unwrap()
    }

    #[test]
    fn write_read_round_trip() {
        let dir = tmp();
        let fs = RealFs::new();
        let p = dir.path().join("a.log");
        let mut w = fs.create(&p).unwrap();
        w.append(b"hello ").unwrap();
        w.append(b"world").unwrap();
        assert_eq!(w.size(), 11);
        assert_eq!(w.path(), p.as_path());
        w.sync().unwrap();
        let r = fs.open(&p).unwrap();
        assert_eq!(r.size(), 11);
        let mut buf = [0u8; 5];
        r.read_at(6, &mut buf).unwrap();
        assert_eq!(&buf, b"world");
        r.readahead(0, 11);
        assert_eq!(fs.read_all(&p).unwrap(), b"hello world");
        assert_eq!(fs.file_size(&p).unwrap(), 11);
    }

    #[test]
    fn buffered_bytes_reach_the_file_on_flush_and_drop() {
        let dir = tmp();
        let fs = RealFs::new();
        let p = dir.path().join("b");
        let mut w = fs.create(&p).unwrap();
        w.append(b"abc").unwrap();
        // Still in the user-space buffer.
        assert_eq!(fs.file_size(&p).unwrap(), 0);
        w.flush().unwrap();
        assert_eq!(fs.file_size(&p).unwrap(), 3);
        w.append(b"def").unwrap();
        drop(w);
        assert_eq!(fs.read_all(&p).unwrap(), b"abcdef");
    }

    #[test]
    fn vectored_appends_follow_buffered_bytes_and_reach_the_os_at_once() {
        let dir = tmp();
        let fs = RealFs::new();
        let p = dir.path().join("v");
        let mut w = fs.create(&p).unwrap();
        w.append(b"head:").unwrap();
        let mut expect = b"head:".to_vec();
        // More slices than one writev takes (IOV_MAX), empty ones among them.
        let pieces: Vec<Vec<u8>> = (0..2500u32)
            .map(|i| vec![(i % 251) as u8; (i % 7) as usize])
            .collect();
        let parts: Vec<IoSlice<'_>> = pieces.iter().map(|p| IoSlice::new(p)).collect();
        w.append_vectored_now(&parts).unwrap();
        pieces.iter().for_each(|p| expect.extend_from_slice(p));
        assert_eq!(w.size(), expect.len() as u64);
        // Nothing is left in user space: the file has it all before any flush.
        assert_eq!(fs.read_all(&p).unwrap(), expect);
        w.append_vectored_now(&[IoSlice::new(&[]), IoSlice::new(b"tail")])
            .unwrap();
        expect.extend_from_slice(b"tail");
        assert_eq!(fs.read_all(&p).unwrap(), expect);
        w.append_vectored_now(&[]).unwrap();
        assert_eq!(w.size(), expect.len() as u64);
    }

    #[test]
    fn large_and_buffer_filling_appends_keep_order() {
        let dir = tmp();
        let fs = RealFs::new();
        let p = dir.path().join("big");
        let mut w = fs.create(&p).unwrap();
        let mut expect = Vec::new();
        let small: Vec<u8> = (0..1000u32).map(|i| i as u8).collect();
        let big: Vec<u8> = (0..(WRITE_BUFFER_BYTES as u32 + 17))
            .map(|i| (i % 251) as u8)
            .collect();
        for i in 0..300 {
            w.append(&small).unwrap();
            expect.extend_from_slice(&small);
            if i % 100 == 7 {
                w.append(&big).unwrap();
                expect.extend_from_slice(&big);
            }
        }
        assert_eq!(w.size(), expect.len() as u64);
        w.sync().unwrap();
        assert_eq!(fs.read_all(&p).unwrap(), expect);
    }

    #[test]
    fn read_past_eof_is_an_error_naming_the_path() {
        let dir = tmp();
        let fs = RealFs::new();
        let p = dir.path().join("short");
        fs.write_all_synced(&p, b"0123456789").unwrap();
        let r = fs.open(&p).unwrap();
        let mut buf = [0u8; 4];
        let err = r.read_at(8, &mut buf).unwrap_err();
        match &err {
            Error::Io { op, path, source } => {
                assert_eq!(*op, "read");
                assert_eq!(path, &p);
                assert_eq!(source.kind(), ErrorKind::UnexpectedEof);
            }
            other => panic!("unexpected error {other:?}"),
        }
        assert!(err.to_string().contains("short"));
    }

    #[test]
    fn missing_file_is_not_found() {
        let dir = tmp();
        let fs = RealFs::new();
        let p = dir.path().join("nope");
        assert!(!fs.exists(&p).unwrap());
        match fs.open(&p).err().unwrap() {
            Error::Io { op, source, .. } => {
                assert_eq!(op, "open");
                assert_eq!(source.kind(), ErrorKind::NotFound);
            }
            other => panic!("unexpected error {other:?}"),
        }
    }

    #[test]
    fn rename_remove_list_sync_dir() {
        let dir = tmp();
        let fs = RealFs::new();
        let sub = dir.path().join("x/y");
        fs.create_dir_all(&sub).unwrap();
        let a = sub.join("a.tmp");
        let b = sub.join("CURRENT");
        fs.write_all_synced(&a, b"MANIFEST-000001\n").unwrap();
        fs.rename(&a, &b).unwrap();
        fs.sync_dir(&sub).unwrap();
        assert!(!fs.exists(&a).unwrap());
        assert_eq!(fs.read_all(&b).unwrap(), b"MANIFEST-000001\n");
        let mut names = fs.list(&sub).unwrap();
        names.sort();
        assert_eq!(names, vec!["CURRENT".to_string()]);
        fs.remove(&b).unwrap();
        assert!(fs.list(&sub).unwrap().is_empty());
        let err = fs.remove(&b).unwrap_err();
        assert!(matches!(err, Error::Io { op: "remove", .. }));
    }

    #[test]
    fn lock_conflicts_until_dropped() {
        let dir = tmp();
        let fs = RealFs::new();
        let p = dir.path().join("LOCK");
        let l1 = fs.lock(&p).unwrap();
        assert!(fs.exists(&p).unwrap());
        match fs.lock(&p).err().unwrap() {
            Error::Locked(path) => assert_eq!(path, p),
            other => panic!("unexpected error {other:?}"),
        }
        drop(l1);
        let _l2 = fs.lock(&p).unwrap();
    }

    #[test]
    fn direct_reads_any_range_and_report_eof() {
        let dir = tmp();
        let fs = RealFs::new();
        let p = dir.path().join("d");
        let data: Vec<u8> = (0..20_000u32).map(|i| (i % 253) as u8).collect();
        fs.write_all_synced(&p, &data).unwrap();
        let f = fs.open_direct(&p).unwrap();
        // The temp dir is on a disk file system here: O_DIRECT must have been taken.
        assert!(
            f.direct_io(),
            "O_DIRECT refused by the temp dir's file system"
        );
        assert!(f.raw_fd().is_some());
        for (off, len) in [
            (0, 1),
            (1, 4095),
            (4095, 2),
            (4096, 4096),
            (100, 19_900),
            (19_999, 1),
        ] {
            let mut buf = vec![0u8; len];
            f.read_at(off as u64, &mut buf).unwrap();
            assert_eq!(buf, &data[off..off + len], "{off}+{len}");
        }
        let mut buf = vec![0u8; 10];
        let e = f.read_at(19_995, &mut buf).unwrap_err();
        match &e {
            Error::Io { source, .. } => assert_eq!(source.kind(), ErrorKind::UnexpectedEof),
            other => panic!("unexpected {other:?}"),
        }
        assert!(e.to_string().contains("past the end"), "{e}");
        assert!(!fs.open(&p).unwrap().direct_io());
    }
}
