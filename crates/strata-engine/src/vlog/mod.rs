//! Key-value separation (WiscKey): the value log, which is then also the write-ahead log.
//!
//! Values of at least `Options::sep_threshold_bytes` enter the memtable as
//! [`crate::key::ValueKind::Pointer`] entries naming `(file, offset, len)` of their log entry;
//! smaller values and deletes enter inline. The head writer ([`VlogWriter`]) sits in
//! [`Vlog::head`] (lock order: `DbState` before `head`); readers resolve pointers through the
//! [`VlogFileSet`] of their super version. The durable head, the sync-before-freeze rule,
//! garbage accounting and how files are retired: `docs/design.md` §8 and §9. Format:
//! `docs/format/vlog.md`.

mod cache;
pub(crate) mod format;
pub(crate) mod gc;
pub mod reader;
pub(crate) mod state;
pub mod writer;

pub use format::ValuePointer;
pub use reader::FrameReader;
pub(crate) use state::VlogManifest;
pub use writer::VlogWriter;

use crate::error::{Error, Result};
use crate::filename;
use crate::io::{Fs, RandomAccessFile, ReadRequest};
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

/// One value-log file known to readers.
pub struct VlogFile {
    pub number: u64,
    pub path: PathBuf,
    /// Bytes in the file (for the head: appended so far, buffer included).
    pub size: AtomicU64,
    handle: OnceLock<Arc<dyn RandomAccessFile>>,
    /// The sealed file mapped for reading (`Vlog::mapped`); `None` where it cannot be.
    map: OnceLock<Option<Arc<memmap2::Mmap>>>,
}

impl VlogFile {
    pub fn new(dir: &Path, number: u64, size: u64) -> Arc<VlogFile> {
        Arc::new(VlogFile {
            number,
            path: filename::vlog(dir, number),
            size: AtomicU64::new(size),
            handle: OnceLock::new(),
            map: OnceLock::new(),
        })
    }

    /// The file opened for reading (opened once, on first use), for direct reads
    /// (`O_DIRECT`, `Options::direct_io`) when `direct`.
    pub fn handle(&self, fs: &Arc<dyn Fs>, direct: bool) -> Result<Arc<dyn RandomAccessFile>> {
        if let Some(h) = self.handle.get() {
            return Ok(h.clone());
        }
        let opened = if direct {
            fs.open_direct(&self.path)
        } else {
            fs.open(&self.path)
        };
        match opened {
            Ok(h) => Ok(self.handle.get_or_init(|| h).clone()),
            // GC opens the handle before it removes a retired file: if the file is gone, GC
            // may have done both between our look and our open, and its handle serves.
            Err(e) => self.handle.get().cloned().ok_or(e),
        }
    }

    pub fn size(&self) -> u64 {
        self.size.load(Ordering::Relaxed)
    }
}

/// The value-log files readers may follow pointers into, by number. Copy-on-write: a new
/// set is installed with the super version whenever a file is added or retired.
pub type VlogFileSet = BTreeMap<u64, Arc<VlogFile>>;

/// What readers need to know about the head file without taking its lock.
#[derive(Default)]
pub struct HeadShared {
    /// Number of the head file (`u64::MAX`: none).
    pub number: AtomicU64,
    /// Bytes of the head file already handed to the operating system.
    pub flushed: AtomicU64,
    /// Bytes appended to the value log since open, over all files (for memtable sizing).
    pub appended: AtomicU64,
}

/// The value log of one database: the head writer and the pointer read path.
pub struct Vlog {
    pub dir: PathBuf,
    pub fs: Arc<dyn Fs>,
    /// The head writer; `None` with separation off.
    pub head: Mutex<Option<VlogWriter>>,
    pub shared: Arc<HeadShared>,
    /// Read value-log files with `O_DIRECT` (`Options::direct_io`), like tables.
    pub direct_io: bool,
    /// Read sealed value-log files through a memory mapping (`Options::vlog_mmap`; never with
    /// `direct_io`).
    pub mmap: bool,
    /// Values read through a mapping (statistics).
    pub mapped_reads: AtomicU64,
    /// Verified values kept for point reads (`Options::vlog_value_cache_bytes`; `None`: off).
    values: Option<cache::ValueCache>,
}

impl Vlog {
    pub fn new(dir: &Path, fs: Arc<dyn Fs>, direct_io: bool) -> Vlog {
        let shared = Arc::new(HeadShared::default());
        shared.number.store(u64::MAX, Ordering::Release);
        Vlog {
            dir: dir.to_path_buf(),
            fs,
            head: Mutex::new(None),
            shared,
            direct_io,
            mmap: false,
            mapped_reads: AtomicU64::new(0),
            values: None,
        }
    }

    /// Keeps up to `bytes` of verified values for point reads ([`Vlog::read_point`]).
    pub fn with_value_cache(mut self, bytes: usize) -> Vlog {
        self.values = cache::ValueCache::new(bytes);
        self
    }

    /// Point reads answered by the value cache, and those that were not (0, 0 without one).
    pub fn value_cache_hits_misses(&self) -> (u64, u64) {
        self.values
            .as_ref()
            .map_or((0, 0), |c| (c.hits(), c.misses()))
    }

    /// Bytes the value cache holds.
    pub fn value_cache_bytes(&self) -> u64 {
        self.values.as_ref().map_or(0, |c| c.bytes())
    }

    /// Reads sealed files through memory mappings when `on` (and reads are not direct).
    pub fn with_mmap(mut self, on: bool) -> Vlog {
        self.mmap = on && !self.direct_io;
        self
    }

    /// The entry bytes `ptr` names, borrowed from the file's mapping, when the reader `want`s
    /// them so (scans and point reads; `multi_get` keeps its batched reads, which overlap
    /// reads of values not in the page cache): for a sealed file (not the head, which still
    /// grows), mapped on its first read. `None` where there is no mapping; the caller reads
    /// the bytes instead. A scan over separated values reads every
    /// value at a random place: through the mapping a cached value costs a copy instead of
    /// a system call (`docs/design.md` §8).
    fn mapped<'a>(&self, f: &'a VlogFile, ptr: &ValuePointer, want: bool) -> Option<&'a [u8]> {
        if !want || !self.mmap || ptr.file == self.shared.number.load(Ordering::Acquire) {
            return None;
        }
        let map = f
            .map
            .get_or_init(|| self.fs.map(&f.path).ok().flatten())
            .as_ref()?;
        let (start, end) = (ptr.offset as usize, ptr.offset as usize + ptr.len as usize);
        map.get(start..end)
    }

    /// The entry bytes of `ptr` if they are still in the head's buffer.
    fn buffered(&self, ptr: &ValuePointer) -> Option<Vec<u8>> {
        let end = ptr.offset + u64::from(ptr.len);
        if ptr.file != self.shared.number.load(Ordering::Acquire)
            || end <= self.shared.flushed.load(Ordering::Acquire)
        {
            return None;
        }
        self.head.lock().as_ref()?.read_buffered(ptr)
    }

    fn file<'a>(&self, files: &'a VlogFileSet, ptr: &ValuePointer) -> Result<&'a Arc<VlogFile>> {
        let f = files.get(&ptr.file).ok_or_else(|| {
            Error::corruption(
                filename::vlog(&self.dir, ptr.file),
                ptr.offset,
                "pointer into a value-log file that does not exist",
            )
        })?;
        // A pointer past the end names bytes the file never had (a damaged table, or a file
        // cut short): corruption, not an I/O error.
        let end = ptr.offset + u64::from(ptr.len);
        if end > f.size() {
            return Err(Error::corruption(
                &f.path,
                ptr.offset,
                format!(
                    "pointer to {} bytes at offset {} goes past the end of the value-log file ({} bytes)",
                    ptr.len,
                    ptr.offset,
                    f.size()
                ),
            ));
        }
        Ok(f)
    }

    /// Reads and verifies the value `ptr` points at for `key`: from the file's mapping when
    /// it has one (a sealed file with `vlog_mmap`), else with a read.
    pub fn read(&self, files: &VlogFileSet, key: &[u8], ptr: &ValuePointer) -> Result<Vec<u8>> {
        let f = self.file(files, ptr)?;
        if let Some(bytes) = self.mapped(f, ptr, true) {
            self.mapped_reads.fetch_add(1, Ordering::Relaxed);
            return extract_from(bytes, ptr, key, &f.path);
        }
        let data = match self.buffered(ptr) {
            Some(d) => d,
            None => {
                let mut d = vec![0u8; ptr.len as usize];
                f.handle(&self.fs, self.direct_io)?
                    .read_at(ptr.offset, &mut d)?;
                d
            }
        };
        extract(data, ptr, key, &f.path)
    }

    /// [`Vlog::read`] for a point read (`get`): a value verified before is answered from the
    /// value cache, a private copy (no checksum, no look at the log's pages); a value read
    /// now is offered to it (`vlog/cache.rs`). The pointer must still name a file of the
    /// reader's set, as for every read.
    pub fn read_point(
        &self,
        files: &VlogFileSet,
        key: &[u8],
        ptr: &ValuePointer,
    ) -> Result<Vec<u8>> {
        let Some(c) = &self.values else {
            return self.read(files, key, ptr);
        };
        self.file(files, ptr)?;
        if let Some(v) = c.get(ptr, key) {
            return Ok(v);
        }
        let v = self.read(files, key, ptr)?;
        c.offer(ptr, key, &v);
        Ok(v)
    }

    /// Reads many values at once: buffered ones (and with `mapped`, those in mapped files)
    /// are copied, the others submitted together through `read` (the database's batched
    /// read: io_uring, or a pool of threads issuing `pread`, per `Options::io_backend`).
    /// Results are in request order, each independent.
    pub fn read_many(
        &self,
        files: &VlogFileSet,
        reqs: &[(&[u8], ValuePointer)],
        mapped: bool,
        read: impl FnOnce(&[ReadRequest<'_>]) -> Vec<Result<Vec<u8>>>,
    ) -> Vec<Result<Vec<u8>>> {
        let mut out: Vec<Option<Result<Vec<u8>>>> = (0..reqs.len()).map(|_| None).collect();
        self.read_many_raw(files, reqs, mapped, read, |i, path, raw| {
            let (key, ptr) = &reqs[i];
            out[i] = Some(raw.and_then(|raw| match raw {
                Raw::Mapped(bytes) => extract_from(bytes, ptr, key, path),
                Raw::Read(d) => extract(d, ptr, key, path),
            }));
        });
        out.into_iter()
            .map(|r| r.unwrap_or_else(|| Err(Error::InvalidArgument("unread value".into()))))
            .collect()
    }

    /// [`Vlog::read_many`] into one buffer: each value is appended to `values`, and its
    /// result is its range there. A scan's batch of values is then one allocation, and a
    /// mapped entry is copied once, into `values`, and verified there in place: the value
    /// returned is that copy, the bytes checked (never the mapping, which shows the page
    /// cache and may change, `docs/design.md` §8.3). A failed entry leaves nothing behind.
    pub fn read_many_into(
        &self,
        files: &VlogFileSet,
        reqs: &[(&[u8], ValuePointer)],
        mapped: bool,
        read: impl FnOnce(&[ReadRequest<'_>]) -> Vec<Result<Vec<u8>>>,
        values: &mut Vec<u8>,
    ) -> Vec<Result<Range<usize>>> {
        let mut out: Vec<Option<Result<Range<usize>>>> = (0..reqs.len()).map(|_| None).collect();
        values.reserve(reqs.iter().map(|(_, p)| p.len as usize).sum());
        self.read_many_raw(files, reqs, mapped, read, |i, path, raw| {
            let (key, ptr) = &reqs[i];
            out[i] = Some(raw.and_then(|raw| match raw {
                Raw::Mapped(bytes) => {
                    let at = values.len();
                    values.extend_from_slice(bytes);
                    match format::verify_pointed_entry(&values[at..], ptr, key, path) {
                        Ok(r) => Ok(at + r.start..at + r.end),
                        Err(e) => {
                            values.truncate(at);
                            Err(e)
                        }
                    }
                }
                Raw::Read(d) => {
                    let r = format::verify_pointed_entry(&d, ptr, key, path)?;
                    let at = values.len();
                    values.extend_from_slice(&d[r]);
                    Ok(at..values.len())
                }
            }));
        });
        out.into_iter()
            .map(|r| r.unwrap_or_else(|| Err(Error::InvalidArgument("unread value".into()))))
            .collect()
    }

    /// The reads of [`Vlog::read_many`], unverified: hands each request's entry bytes (or
    /// its error) to `each` with the request's index and the file's path, once per request,
    /// mapped and buffered ones first, then those of the batched read.
    fn read_many_raw(
        &self,
        files: &VlogFileSet,
        reqs: &[(&[u8], ValuePointer)],
        mapped: bool,
        read: impl FnOnce(&[ReadRequest<'_>]) -> Vec<Result<Vec<u8>>>,
        mut each: impl FnMut(usize, &Path, Result<Raw<'_>>),
    ) {
        let mut handles: Vec<(usize, Arc<dyn RandomAccessFile>)> = Vec::new();
        // Each request's file, and its bytes where they are mapped.
        let located: Vec<Result<Located<'_>>> = reqs
            .iter()
            .map(|(_, ptr)| {
                let f = self.file(files, ptr)?;
                Ok((f, self.mapped(f, ptr, mapped)))
            })
            .collect();
        touch_mapped(located.iter().filter_map(|l| l.as_ref().ok()?.1));
        for (i, ((_, ptr), l)) in reqs.iter().zip(located).enumerate() {
            let (f, bytes) = match l {
                Ok(l) => l,
                Err(e) => {
                    each(i, &self.dir, Err(e));
                    continue;
                }
            };
            if let Some(bytes) = bytes {
                self.mapped_reads.fetch_add(1, Ordering::Relaxed);
                each(i, &f.path, Ok(Raw::Mapped(bytes)));
                continue;
            }
            if let Some(d) = self.buffered(ptr) {
                each(i, &f.path, Ok(Raw::Read(d)));
                continue;
            }
            match f.handle(&self.fs, self.direct_io) {
                Ok(h) => handles.push((i, h)),
                Err(e) => each(i, &f.path, Err(e)),
            }
        }
        if !handles.is_empty() {
            let batch: Vec<ReadRequest<'_>> = handles
                .iter()
                .map(|(i, h)| ReadRequest {
                    file: h,
                    offset: reqs[*i].1.offset,
                    len: reqs[*i].1.len as usize,
                })
                .collect();
            let raws = read(&batch);
            for ((i, h), raw) in handles.iter().zip(raws) {
                each(*i, h.path(), raw.map(Raw::Read));
            }
        }
    }

    /// Flushes the head's buffer to the operating system (if there is a head).
    pub fn flush(&self) -> Result<()> {
        match self.head.lock().as_mut() {
            Some(w) => w.flush(),
            None => Ok(()),
        }
    }

    /// Makes every appended byte durable and covers it with a sync mark (a clean close).
    pub fn seal(&self) -> Result<()> {
        match self.head.lock().as_mut() {
            Some(w) => w.seal(),
            None => Ok(()),
        }
    }

    /// Makes every appended byte durable (if there is a head).
    pub fn sync(&self) -> Result<()> {
        match self.head.lock().as_mut() {
            Some(w) => w.sync(),
            None => Ok(()),
        }
    }
}

/// A request's value-log file, and the entry's bytes where the file is mapped.
type Located<'a> = (&'a Arc<VlogFile>, Option<&'a [u8]>);

/// An entry's bytes as read, not yet verified: in a mapping (to be copied before it is
/// checked), or read into memory of our own.
enum Raw<'a> {
    Mapped(&'a [u8]),
    Read(Vec<u8>),
}

/// Loads one byte of every cache line of `entries` before any is decoded: the loads do not
/// depend on each other, so the processor has many cache (and TLB) misses in flight at once
/// instead of meeting them one entry at a time inside the checksum (a scan's values sit at
/// random places of the page cache; memory-level parallelism, the in-memory form of
/// WiscKey's parallel prefetch). Written with plain loads: the crate has no `unsafe` for a
/// prefetch instruction.
fn touch_mapped<'a>(entries: impl Iterator<Item = &'a [u8]>) {
    let mut sum = 0u8;
    for e in entries {
        for b in e.iter().step_by(64) {
            sum = sum.wrapping_add(*b);
        }
    }
    std::hint::black_box(sum);
}

/// Copies entry bytes out of a mapping, then verifies the copy and cuts the value out. The
/// copy comes first: a shared mapping shows the page cache, which may change between two
/// looks (a page dropped and read again from the device), so the bytes returned must be the
/// bytes checked, never a second read of the mapping.
fn extract_from(data: &[u8], ptr: &ValuePointer, key: &[u8], path: &Path) -> Result<Vec<u8>> {
    extract(data.to_vec(), ptr, key, path)
}

/// Verifies entry bytes read through `ptr` and cuts the value out.
fn extract(mut data: Vec<u8>, ptr: &ValuePointer, key: &[u8], path: &Path) -> Result<Vec<u8>> {
    let r = format::verify_pointed_entry(&data, ptr, key, path)?;
    data.truncate(r.end);
    data.drain(..r.start);
    Ok(data)
}
