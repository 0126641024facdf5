//! [`read_batch`]: the engine's batched read, on the backend the options choose.
//!
//! | backend   | how a batch runs                                   | files it takes         |
//! |-----------|----------------------------------------------------|------------------------|
//! | `io_uring`| all reads submitted at once on the thread's ring   | those with a raw fd    |
//! | `threads` | reads spread over a pool of threads (`pool.rs`)    | any                    |
//! | `sync`    | [`Fs::read_batch`]: one read after another         | any                    |
//!
//! `auto` (the default) is `io_uring` where a ring can be set up and `threads` elsewhere.
//! A batch of `io_uring` whose files have no raw descriptor (`MemFs`, `FaultFs`) or whose
//! thread cannot get a ring runs on `threads`. A batch of one read is read in place on every
//! backend: there is nothing to overlap.

use super::real::past_eof;
use super::{pool, Fs, RandomAccessFile, ReadRequest};
use crate::error::{Error, Result};
use std::sync::Arc;

/// How batched reads (`multi_get`) reach the files. Not persisted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum IoBackend {
    /// io_uring if it can be set up, else `Threads`.
    #[default]
    Auto,
    /// io_uring, one ring per reading thread (falls back to `Threads` where unavailable).
    Uring,
    /// A small process-wide pool of threads issuing `pread` concurrently.
    Threads,
    /// One read after another on the calling thread.
    Sync,
}

impl IoBackend {
    /// The option value naming this backend.
    pub fn name(self) -> &'static str {
        match self {
            IoBackend::Auto => "auto",
            IoBackend::Uring => "io_uring",
            IoBackend::Threads => "threads",
            IoBackend::Sync => "sync",
        }
    }

    /// Parses an option value: `auto`, `io_uring` (or `uring`), `threads`, `sync`.
    pub fn parse(s: &str) -> Option<IoBackend> {
        Some(match s {
            "auto" => IoBackend::Auto,
            "io_uring" | "uring" => IoBackend::Uring,
            "threads" => IoBackend::Threads,
            "sync" => IoBackend::Sync,
            _ => return None,
        })
    }

    /// The backend batches run on in this process: `Auto` and `Uring` become `Threads` where
    /// io_uring cannot be set up.
    pub fn resolve(self) -> IoBackend {
        match self {
            IoBackend::Auto | IoBackend::Uring if uring_status().is_ok() => IoBackend::Uring,
            IoBackend::Auto | IoBackend::Uring => IoBackend::Threads,
            b => b,
        }
    }
}

/// Whether io_uring can be set up in this process; `Err` says why not.
pub fn uring_status() -> std::result::Result<(), String> {
    #[cfg(target_os = "linux")]
    {
        super::uring::available()
    }
    #[cfg(not(target_os = "linux"))]
    {
        Err("io_uring needs Linux".to_string())
    }
}

/// `(waits, reads in flight summed over them)` of every io_uring ring of the process: the
/// mean queue depth the batched reads kept (`(0, 0)` without io_uring).
pub fn uring_wait_stats() -> (u64, u64) {
    #[cfg(target_os = "linux")]
    {
        super::uring::wait_stats()
    }
    #[cfg(not(target_os = "linux"))]
    {
        (0, 0)
    }
}

/// A one-line description of the backend `choice` gives in this process, for stats.
pub fn backend_status(choice: IoBackend) -> String {
    match (choice, choice.resolve()) {
        (IoBackend::Auto | IoBackend::Uring, IoBackend::Threads) => format!(
            "threads ({} threads; io_uring unavailable: {})",
            pool::POOL_THREADS,
            uring_status().err().unwrap_or_default()
        ),
        (_, IoBackend::Threads) => format!("threads ({} threads)", pool::POOL_THREADS),
        (_, b) => b.name().to_string(),
    }
}

/// Reads every request, overlapping them on the backend `choice` resolves to. Results come
/// in request order, each on its own (a failed read fails only its request). Also returns
/// the backend that ran the batch.
pub fn read_batch(
    choice: IoBackend,
    fs: &dyn Fs,
    reqs: &[ReadRequest<'_>],
) -> (Vec<Result<Vec<u8>>>, IoBackend) {
    if reqs.len() <= 1 {
        return (fs.read_batch(reqs), IoBackend::Sync);
    }
    match choice.resolve() {
        IoBackend::Sync => (fs.read_batch(reqs), IoBackend::Sync),
        IoBackend::Uring => match read_uring(reqs) {
            Some(out) => (out, IoBackend::Uring),
            None => (pool::read_batch(reqs), IoBackend::Threads),
        },
        _ => (pool::read_batch(reqs), IoBackend::Threads),
    }
}

/// One read of a [`ReadStream`]. It owns its file: the stream hands reads out one at a time
/// and the file must stay open until the read's result is back.
pub struct StreamRead {
    pub file: Arc<dyn RandomAccessFile>,
    pub offset: u64,
    pub len: usize,
}

/// A producer of reads whose results make further reads ready: a pipelined `multi_get`
/// (the next level of a key's lookup, the next batch of keys).
pub trait ReadStream {
    /// The next read to start, with a tag that comes back with its result; `None` when no
    /// read is ready until an earlier one completes (or none is left).
    fn next_read(&mut self) -> Option<(usize, StreamRead)>;
    /// The result of the read given out with `tag`.
    fn read_done(&mut self, tag: usize, result: Result<Vec<u8>>);
}

/// What [`read_stream`] ran: reads and batches per backend (a stream on the ring counts as
/// one batch of all its reads).
#[derive(Clone, Copy, Debug, Default)]
pub struct StreamStats {
    pub reads: u64,
    pub uring_batches: u64,
    pub thread_batches: u64,
    pub sync_batches: u64,
}

/// Reads taken from a stream and not yet run, with their tags.
type Wave = Vec<(usize, StreamRead)>;

/// Runs every read `src` gives, on the backend `choice` resolves to, with at most
/// `max_in_flight` at once, until it has none left. On io_uring a read is submitted as soon
/// as an earlier one completes, so the device queue does not drain between what the
/// source thinks of as batches; the other backends run the reads ready at a time as one
/// batch (a barrier per wave). A wave of one read is read in place, as in [`read_batch`].
pub fn read_stream(
    choice: IoBackend,
    fs: &dyn Fs,
    src: &mut dyn ReadStream,
    max_in_flight: usize,
) -> StreamStats {
    let mut stats = StreamStats::default();
    let mut use_uring = choice.resolve() == IoBackend::Uring;
    let mut wave: Wave = Vec::new();
    loop {
        while wave.len() < max_in_flight.max(1) {
            match src.next_read() {
                Some(r) => wave.push(r),
                None => break,
            }
        }
        if wave.is_empty() {
            return stats;
        }
        if wave.len() > 1 && use_uring {
            match stream_uring(src, std::mem::take(&mut wave), max_in_flight) {
                Ok((n, left)) => {
                    stats.reads += n;
                    stats.uring_batches += u64::from(n > 0);
                    // Left over only if a file had no descriptor or the ring failed or was
                    // busy: the rest of the stream runs on the threads.
                    use_uring = left.is_empty();
                    wave = left;
                }
                Err(left) => {
                    use_uring = false;
                    wave = left;
                }
            }
            continue;
        }
        let backend = match (wave.len(), choice.resolve()) {
            (1, _) | (_, IoBackend::Sync) => IoBackend::Sync,
            _ => IoBackend::Threads,
        };
        let reqs: Vec<ReadRequest<'_>> = wave
            .iter()
            .map(|(_, r)| ReadRequest {
                file: &r.file,
                offset: r.offset,
                len: r.len,
            })
            .collect();
        let out = match backend {
            IoBackend::Sync => fs.read_batch(&reqs),
            _ => pool::read_batch(&reqs),
        };
        drop(reqs);
        stats.reads += wave.len() as u64;
        match backend {
            IoBackend::Sync => stats.sync_batches += 1,
            _ => stats.thread_batches += 1,
        }
        for ((tag, _), r) in wave.drain(..).zip(out) {
            src.read_done(tag, r);
        }
    }
}

/// Runs `first` and then `src` on this thread's ring. `Ok((reads run, reads left))`: reads
/// are left when one has no descriptor (it and any after it were not taken) or the ring
/// failed midway; `Err(first)` if the thread has no ring to use.
#[cfg(target_os = "linux")]
fn stream_uring(
    src: &mut dyn ReadStream,
    first: Wave,
    max_in_flight: usize,
) -> std::result::Result<(u64, Wave), Wave> {
    use super::uring::{self, ReadSource, UringRead};
    use std::collections::VecDeque;

    /// Hands `src`'s reads to the ring, keeping each read's file (open, and for its
    /// errors' context) until its result goes back.
    struct Adapter<'s> {
        src: &'s mut dyn ReadStream,
        first: VecDeque<(usize, StreamRead)>,
        /// Reads on the ring, by ring tag.
        taken: Vec<Option<(usize, StreamRead)>>,
        free: Vec<usize>,
        /// A read with no descriptor stops the stream here; it and later ones go elsewhere.
        stopped: Wave,
        reads: u64,
    }

    impl ReadSource for Adapter<'_> {
        fn next_read(&mut self) -> Option<(usize, UringRead)> {
            if !self.stopped.is_empty() {
                return None;
            }
            let (tag, r) = match self.first.pop_front() {
                Some(x) => x,
                None => self.src.next_read()?,
            };
            let Some(fd) = r.file.raw_fd() else {
                self.stopped.push((tag, r));
                self.stopped.extend(self.first.drain(..));
                return None;
            };
            let read = UringRead {
                fd,
                offset: r.offset,
                len: r.len,
                direct: r.file.direct_io(),
            };
            let slot = match self.free.pop() {
                Some(i) => {
                    self.taken[i] = Some((tag, r));
                    i
                }
                None => {
                    self.taken.push(Some((tag, r)));
                    self.taken.len() - 1
                }
            };
            self.reads += 1;
            Some((slot, read))
        }

        fn read_done(&mut self, slot: usize, result: std::io::Result<Vec<u8>>) {
            let Some((tag, r)) = self.taken.get_mut(slot).and_then(Option::take) else {
                debug_assert!(false, "result for ring tag {slot}, which has no read");
                return;
            };
            self.free.push(slot);
            let result = result.map_err(|e| {
                let e = if e.kind() == std::io::ErrorKind::UnexpectedEof
                    && e.raw_os_error().is_none()
                {
                    past_eof(r.len, r.offset, r.file.size())
                } else {
                    e
                };
                Error::io("read", r.file.path(), e)
            });
            self.src.read_done(tag, result);
        }
    }

    let mut a = Adapter {
        src,
        first: first.into(),
        taken: Vec::new(),
        free: Vec::new(),
        stopped: Vec::new(),
        reads: 0,
    };
    match uring::read_stream(&mut a, max_in_flight) {
        None => Err(a.first.into()),
        // A failed ring gave its reads their error; what it had not taken goes on elsewhere.
        Some(Ok(())) | Some(Err(_)) => {
            let mut left = a.stopped;
            left.extend(a.first);
            Ok((a.reads, left))
        }
    }
}

#[cfg(not(target_os = "linux"))]
fn stream_uring(
    _src: &mut dyn ReadStream,
    first: Wave,
    _max_in_flight: usize,
) -> std::result::Result<(u64, Wave), Wave> {
    Err(first)
}

/// `None` if a file has no descriptor or the thread has no ring.
#[cfg(target_os = "linux")]
fn read_uring(reqs: &[ReadRequest<'_>]) -> Option<Vec<Result<Vec<u8>>>> {
    use super::uring::{self, UringRead};
    let reads = reqs
        .iter()
        .map(|r| {
            Some(UringRead {
                fd: r.file.raw_fd()?,
                offset: r.offset,
                len: r.len,
                direct: r.file.direct_io(),
            })
        })
        .collect::<Option<Vec<_>>>()?;
    let out = uring::read_batch(&reads)?;
    Some(
        out.into_iter()
            .zip(reqs)
            .map(|(res, r)| {
                res.map_err(|e| {
                    let e = if e.kind() == std::io::ErrorKind::UnexpectedEof
                        && e.raw_os_error().is_none()
                    {
                        past_eof(r.len, r.offset, r.file.size())
                    } else {
                        e
                    };
                    Error::io("read", r.file.path(), e)
                })
            })
            .collect(),
    )
}

#[cfg(not(target_os = "linux"))]
fn read_uring(_reqs: &[ReadRequest<'_>]) -> Option<Vec<Result<Vec<u8>>>> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::{FaultFs, FaultKind, FaultOp, FaultRule, MemFs, RandomAccessFile, RealFs};
    use std::path::Path;
    use std::sync::Arc;

    const BACKENDS: [IoBackend; 4] = [
        IoBackend::Auto,
        IoBackend::Uring,
        IoBackend::Threads,
        IoBackend::Sync,
    ];

    fn data() -> Vec<u8> {
        (0..100_000u32).map(|i| (i * 7 % 256) as u8).collect()
    }

    fn ranges() -> Vec<(u64, usize)> {
        (0..100u64)
            .map(|i| ((i * 977) % 90_000, 1 + (i as usize * 37) % 9000))
            .collect()
    }

    fn check(fs: &dyn Fs, path: &Path, files: &[Arc<dyn RandomAccessFile>]) {
        let data = data();
        let rs = ranges();
        let reqs: Vec<ReadRequest<'_>> = rs
            .iter()
            .enumerate()
            .map(|(i, &(offset, len))| ReadRequest {
                file: &files[i % files.len()],
                offset,
                len,
            })
            .chain(std::iter::once(ReadRequest {
                file: &files[0],
                offset: 99_990,
                len: 20,
            }))
            .collect();
        for b in BACKENDS {
            let (out, _) = read_batch(b, fs, &reqs);
            assert_eq!(out.len(), reqs.len());
            for (&(o, l), got) in rs.iter().zip(&out) {
                assert_eq!(
                    got.as_ref().unwrap(),
                    &data[o as usize..o as usize + l],
                    "{b:?}"
                );
            }
            // The read past the end fails alone, naming the file and the end.
            let e = out.last().unwrap().as_ref().unwrap_err();
            assert_eq!(e.raw_os_error(), None, "{b:?}: {e}");
            assert!(e.to_string().contains("past the end"), "{b:?}: {e}");
            assert!(
                e.to_string().contains(&*path.to_string_lossy()),
                "{b:?}: {e}"
            );
        }
    }

    #[test]
    fn every_backend_reads_the_same_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        let fs = RealFs::new();
        fs.write_all_synced(&p, &data()).unwrap();
        let plain = fs.open(&p).unwrap();
        let direct = fs.open_direct(&p).unwrap();
        check(&fs, &p, std::slice::from_ref(&plain));
        check(&fs, &p, std::slice::from_ref(&direct));
        check(&fs, &p, &[plain, direct]);
        let mem = MemFs::new();
        let d = Path::new("/db");
        mem.create_dir_all(d).unwrap();
        let mp = d.join("f");
        mem.write_all_synced(&mp, &data()).unwrap();
        check(&mem, &mp, &[mem.open(&mp).unwrap()]);
    }

    #[test]
    fn auto_runs_on_io_uring_where_it_is_available() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        let fs = RealFs::new();
        fs.write_all_synced(&p, &data()).unwrap();
        let f = fs.open(&p).unwrap();
        let reqs: Vec<ReadRequest<'_>> = (0..4)
            .map(|i| ReadRequest {
                file: &f,
                offset: i * 100,
                len: 10,
            })
            .collect();
        let want = if uring_status().is_ok() {
            IoBackend::Uring
        } else {
            IoBackend::Threads
        };
        assert_eq!(read_batch(IoBackend::Auto, &fs, &reqs).1, want);
        assert_eq!(
            read_batch(IoBackend::Threads, &fs, &reqs).1,
            IoBackend::Threads
        );
        assert_eq!(read_batch(IoBackend::Sync, &fs, &reqs).1, IoBackend::Sync);
        assert_eq!(
            read_batch(IoBackend::Uring, &fs, &reqs[..1]).1,
            IoBackend::Sync
        );
        // Files without a descriptor (fault injection) go to the pool, faults included.
        let ffs = FaultFs::new(Arc::new(RealFs::new()));
        let ff = ffs.open(&p).unwrap();
        ffs.add_rule(FaultRule::new(FaultOp::Read, 1, FaultKind::Eio).read_range(200, 210));
        let reqs: Vec<ReadRequest<'_>> = (0..4)
            .map(|i| ReadRequest {
                file: &ff,
                offset: i * 100,
                len: 10,
            })
            .collect();
        let (out, ran) = read_batch(IoBackend::Uring, &ffs, &reqs);
        assert_eq!(ran, IoBackend::Threads);
        let failed: Vec<bool> = out.iter().map(|r| r.is_err()).collect();
        assert_eq!(failed, [false, false, true, false]);
        assert_eq!(out[2].as_ref().unwrap_err().raw_os_error(), Some(5));
        assert_eq!(backend_status(IoBackend::Sync), "sync");
        assert!(backend_status(IoBackend::Threads).starts_with("threads"));
    }

    #[test]
    fn pool_handles_many_concurrent_batches() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        let fs = RealFs::new();
        fs.write_all_synced(&p, &data()).unwrap();
        let f = fs.open(&p).unwrap();
        let data = data();
        std::thread::scope(|s| {
            for t in 0..4u64 {
                let (f, data, fs) = (&f, &data, &fs);
                s.spawn(move || {
                    for round in 0..20u64 {
                        let reqs: Vec<ReadRequest<'_>> = (0..300u64)
                            .map(|i| ReadRequest {
                                file: f,
                                offset: (i * 331 + t * 7 + round) % 99_000,
                                len: 1000,
                            })
                            .collect();
                        let (out, _) = read_batch(IoBackend::Threads, fs, &reqs);
                        for (r, got) in reqs.iter().zip(out) {
                            let o = r.offset as usize;
                            assert_eq!(got.unwrap(), &data[o..o + 1000]);
                        }
                    }
                });
            }
        });
    }
}
