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
use super::{pool, Fs, ReadRequest};
use crate::error::{Error, Result};

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
