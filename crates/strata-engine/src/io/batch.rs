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
