//! All file I/O of the engine goes through the [`Fs`] trait (LevelDB's `Env`, Pebble's `vfs`).
//!
//! Implementations:
//! - [`RealFs`]: the operating system's files.
//! - [`MemFs`]: in memory, with crash simulation: [`MemFs::crash`] drops every byte that was
//!   not synced and every create/rename/remove that was not followed by a sync of its
//!   directory, optionally tearing the last unsynced write; [`MemFs::crash_with`] can also
//!   let unsynced writes survive out of order (holes below surviving writes) and drop new
//!   directories whose parent was not synced ([`CrashMode`]).
//! - [`FaultFs`]: wraps another `Fs` and injects errors (EIO, ENOSPC, short writes) on the
//!   n-th operation of a kind, for fault-injection tests.
//!
//! Paths are ordinary `Path`s; a `MemFs` treats them as keys and knows directories only as
//! prefixes that were created with [`Fs::create_dir_all`].
//!
//! Batched reads ([`read_batch`], used by `multi_get`) run on one of three backends
//! ([`IoBackend`]): io_uring (`uring.rs`, one ring per thread, for files that expose a raw
//! file descriptor), a small pool of threads issuing `pread` concurrently (`pool.rs`, for any
//! file and wherever io_uring cannot be set up), or the file system's own
//! [`Fs::read_batch`] (one read after another). Direct I/O (`O_DIRECT`) is opted into per
//! file with [`Fs::open_direct`]; alignment is handled in `aligned.rs`.

pub mod aligned;
mod batch;
mod fault;
#[cfg(target_os = "linux")]
mod mapped;
mod mem;
mod pool;
mod real;
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
mod uring;

pub use batch::{
    backend_status, read_batch, read_stream, uring_status, uring_wait_stats, IoBackend, ReadStream,
    StreamRead, StreamStats,
};
pub use fault::{FaultFs, FaultKind, FaultOp, FaultRule};
pub use mem::{CrashMode, MemFs, UnsyncedWrites};
pub use real::{direct_io_refusals, RealFs};

use crate::error::Result;
use std::io::IoSlice;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A file opened for appending. Bytes are durable only after [`WritableFile::sync`] returns.
pub trait WritableFile: Send {
    /// Appends `data` at the end of the file. May buffer in user space.
    fn append(&mut self, data: &[u8]) -> Result<()>;
    /// Hands any user-space buffer to the operating system (not durable yet).
    fn flush(&mut self) -> Result<()>;
    /// Appends the concatenation of `parts` and hands everything appended so far to the
    /// operating system, as `append` of each part then `flush` would; for callers that
    /// assemble their own records, so that a file can write the parts from where they are
    /// (one `writev`) instead of copying them through its buffer.
    fn append_vectored_now(&mut self, parts: &[IoSlice<'_>]) -> Result<()> {
        for p in parts {
            self.append(p)?;
        }
        self.flush()
    }
    /// Flushes and makes every appended byte durable (fdatasync).
    fn sync(&mut self) -> Result<()>;
    /// Gives back space reserved past the appended bytes, so that the file's length is what
    /// was appended (a mapped file reserves ahead, [`Fs::create_mapped`]); durable after the
    /// next `sync`. Default: nothing to give back.
    fn trim(&mut self) -> Result<()> {
        Ok(())
    }
    /// Bytes appended so far.
    fn size(&self) -> u64;
    /// The path the file was created at (for error messages).
    fn path(&self) -> &Path;
}

/// A file opened for positional reads. Shared between threads.
pub trait RandomAccessFile: Send + Sync {
    /// Fills `buf` from `offset`. Reading past the end is an error (`UnexpectedEof` I/O error),
    /// never a silently short buffer.
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()>;
    /// The file's size when it was opened.
    fn size(&self) -> u64;
    /// The path the file was opened at (for error messages).
    fn path(&self) -> &Path;
    /// Hint: the caller will now read `len` bytes from `offset` sequentially (compaction
    /// readahead). Default: nothing.
    fn readahead(&self, _offset: u64, _len: u64) {}
    /// The operating-system file descriptor behind the file, for batched reads through
    /// io_uring. Reading it directly must give the same bytes as [`RandomAccessFile::read_at`],
    /// so wrappers that change what reads return (fault injection) keep the default: `None`.
    fn raw_fd(&self) -> Option<std::os::fd::RawFd> {
        None
    }
    /// Whether reads through [`RandomAccessFile::raw_fd`] must be aligned to
    /// [`aligned::DIRECT_IO_ALIGN`] (the file was opened with `O_DIRECT`). `read_at` itself
    /// accepts any range. Default: false.
    fn direct_io(&self) -> bool {
        false
    }
}

/// One read of a batched read: `len` bytes at `offset` of `file`.
pub struct ReadRequest<'a> {
    /// Shared (not borrowed) so that the thread-pool backend can hand the file to its threads.
    pub file: &'a Arc<dyn RandomAccessFile>,
    pub offset: u64,
    pub len: usize,
}

/// An advisory lock on a file, released on drop.
pub trait FileLock: Send + Sync {}

/// Creates `path` for appending: through a shared mapping when `mapped` and the file system
/// can ([`Fs::create_mapped`]), else with `write` calls ([`Fs::create`]). The value log's
/// head (`Options::vlog_head_mmap`) and the WAL (`Options::wal_mmap`) are created so.
pub fn create_append_file(fs: &dyn Fs, path: &Path, mapped: bool) -> Result<Box<dyn WritableFile>> {
    if mapped {
        if let Some(f) = fs.create_mapped(path)? {
            return Ok(f);
        }
    }
    fs.create(path)
}

/// The file system as the engine sees it.
pub trait Fs: Send + Sync + 'static {
    /// Creates (or truncates) `path` for appending.
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>>;
    /// Creates (or truncates) `path` for appending through a shared writable mapping: an
    /// append is a store into the page cache, no system call, and survives a crash of the
    /// process like a `write` (`mapped.rs`). The file is longer than what was appended (a
    /// zero-filled reserve) until [`WritableFile::trim`]. `Ok(None)` where the file system
    /// cannot (the default: in-memory and fault-injecting file systems); the caller then
    /// uses [`Fs::create`].
    fn create_mapped(&self, path: &Path) -> Result<Option<Box<dyn WritableFile>>> {
        let _ = path;
        Ok(None)
    }
    /// Opens an existing file for positional reads.
    fn open(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>>;
    /// Opens an existing file for positional reads that bypass the operating system's page
    /// cache (`O_DIRECT`) where the file system supports it. Default: [`Fs::open`] (in-memory
    /// and wrapping file systems have no page cache to bypass).
    fn open_direct(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        self.open(path)
    }
    /// Atomically replaces `to` with `from` (durable only after `sync_dir` of the parent).
    fn rename(&self, from: &Path, to: &Path) -> Result<()>;
    /// Removes a file (durable only after `sync_dir` of the parent).
    fn remove(&self, path: &Path) -> Result<()>;
    /// Names (not paths) of the entries of directory `dir`, in no particular order.
    fn list(&self, dir: &Path) -> Result<Vec<String>>;
    /// Whether `path` exists.
    fn exists(&self, path: &Path) -> Result<bool>;
    /// Creates `dir` and its parents.
    fn create_dir_all(&self, dir: &Path) -> Result<()>;
    /// Makes the creates, renames and removes of entries in `dir` durable.
    fn sync_dir(&self, dir: &Path) -> Result<()>;
    /// Makes every byte of the existing file at `path` durable (fdatasync), whoever wrote it:
    /// recovery uses it on value-log files written before a crash of the process.
    fn sync_file(&self, path: &Path) -> Result<()>;
    /// Makes `to` a second name of the file `from` (a hard link; durable only after
    /// `sync_dir` of `to`'s parent). Default: `NotSupported`, and callers copy instead.
    fn hard_link(&self, from: &Path, to: &Path) -> Result<()> {
        let _ = (from, to);
        Err(crate::error::Error::NotSupported("hard links".into()))
    }
    /// The file at `path` mapped into memory for reading, where the file system can map
    /// files. Default: `None` (in-memory and fault-injecting file systems cannot back a
    /// mapping; readers then use [`RandomAccessFile::read_at`]). The caller must never see
    /// the file truncated while mapped (`vlog/mod.rs` maps only sealed value-log files).
    fn map(&self, path: &Path) -> Result<Option<Arc<memmap2::Mmap>>> {
        let _ = path;
        Ok(None)
    }
    /// Size of the file at `path`.
    fn file_size(&self, path: &Path) -> Result<u64>;
    /// Takes an exclusive lock on `path` (created if missing); `Error::Locked` if held.
    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>>;

    /// Reads many ranges at once. Results come back in request order, each independent: one
    /// failed read does not fail the others. The default runs them one after another; the
    /// engine's [`read_batch`] submits them together through io_uring or a thread pool and
    /// uses this method only for its `sync` backend.
    fn read_batch(&self, reqs: &[ReadRequest<'_>]) -> Vec<Result<Vec<u8>>> {
        reqs.iter()
            .map(|r| {
                let mut buf = vec![0u8; r.len];
                r.file.read_at(r.offset, &mut buf).map(|()| buf)
            })
            .collect()
    }

    /// Reads a whole file.
    fn read_all(&self, path: &Path) -> Result<Vec<u8>> {
        let f = self.open(path)?;
        let mut buf = vec![0u8; f.size() as usize];
        f.read_at(0, &mut buf)?;
        Ok(buf)
    }

    /// Writes `data` to `path` and syncs it (helper for small files such as CURRENT).
    fn write_all_synced(&self, path: &Path, data: &[u8]) -> Result<()> {
        let mut f = self.create(path)?;
        f.append(data)?;
        f.sync()
    }
}

/// Joins a directory and a file name.
pub fn join(dir: &Path, name: &str) -> PathBuf {
    dir.join(name)
}

/// Creates `dir` and its missing ancestors, then syncs the parent of each one created: a new
/// directory's entry is durable only once its parent is synced, and a database whose
/// directory vanishes in a crash loses every write it acknowledged as synced.
pub fn create_dir_durably(fs: &Arc<dyn Fs>, dir: &Path) -> Result<()> {
    let mut created = Vec::new();
    let mut p = Some(dir);
    while let Some(d) = p.filter(|d| !d.as_os_str().is_empty()) {
        if fs.exists(d)? {
            break;
        }
        created.push(d.to_path_buf());
        p = d.parent();
    }
    fs.create_dir_all(dir)?;
    for d in &created {
        let parent = d
            .parent()
            .filter(|q| !q.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        fs.sync_dir(parent)?;
    }
    Ok(())
}
