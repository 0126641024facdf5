//! The file between a snapshot stream's receiver and its loader (`ship.rs`), so that the
//! load runs while the stream arrives and the socket is still drained at network speed.
//!
//! **Protocol.** Two threads share a [`Spool`]. The receiver (the link's socket) appends each
//! frame it has checked to the file and then publishes the file's new length
//! ([`Spool::publish`]); it ends with [`Spool::finish`], its result. The loader reads the
//! file through a [`SpoolReader`] opened on the same path: a read returns only bytes below
//! the published length, waits on the condition variable at that length, and at the end
//! returns end of file (the receiver succeeded) or the receiver's error. A loader that gives
//! up calls [`Spool::abandon`], and the receiver's next publish fails, so it stops reading
//! the socket. Nothing else is shared: the file's bytes are written once and read after
//! their publication.
//!
//! Why a file and not a queue in memory: the receiver must never wait for the loader (the
//! master's `repl-timeout` would then depend on the ingestion's pace, and a slow disk or a
//! busy core would make the master drop the replica), so whatever the loader has not taken
//! yet must be held somewhere without a bound in memory. The loader reads what was just
//! written, from the page cache in the common case. The file is not synced: it is a buffer
//! for this process's loader only; after a crash nothing reads it (the load's durability is
//! its ingested tables', `load.rs`).

use parking_lot::{Condvar, Mutex};
use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// The names of spool files in `dir`: `replica-sync.<pid>.<rdb|snapshot>`.
pub const PREFIX: &str = "replica-sync.";

/// At start: removes the spool files a killed process left in `dir`. Nothing reads them
/// again (a sync starts over), and each may be as large as a dataset. Returns how many.
pub fn remove_stale(dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut n = 0;
    for e in entries.flatten() {
        let name = e.file_name();
        if name.to_string_lossy().starts_with(PREFIX) && std::fs::remove_file(e.path()).is_ok() {
            n += 1;
        }
    }
    n
}

/// The receiver's error message when the loader abandoned the load.
pub const ABANDONED: &str = "the load stopped";

/// The shared half: how far the file is written, and how the receiver ended.
pub struct Spool {
    path: PathBuf,
    state: Mutex<State>,
    grew: Condvar,
    /// Bytes the loader has read (INFO's `master_sync_loaded_bytes`).
    loaded: AtomicU64,
}

#[derive(Default)]
struct State {
    /// Bytes of the file the loader may read.
    written: u64,
    /// `Some` once the receiver is done: `Ok` after its last publish, or why it failed.
    end: Option<Result<(), String>>,
    abandoned: bool,
}

impl Spool {
    /// Creates the file at `path` (truncating any left by a failed session) and returns
    /// the shared state with the receiver's handle on the file.
    pub fn create(path: &Path) -> std::io::Result<(Spool, File)> {
        let file = File::create(path)?;
        let spool = Spool {
            path: path.to_path_buf(),
            state: Mutex::new(State::default()),
            grew: Condvar::new(),
            loaded: AtomicU64::new(0),
        };
        Ok((spool, file))
    }

    /// The loader's reader, from the file's start.
    pub fn reader(&self) -> std::io::Result<SpoolReader<'_>> {
        Ok(SpoolReader {
            spool: self,
            file: File::open(&self.path)?,
            pos: 0,
        })
    }

    /// The receiver has written (and flushed to the file) `written` bytes in all. Fails
    /// once the loader has abandoned the load.
    pub fn publish(&self, written: u64) -> Result<(), &'static str> {
        let mut st = self.state.lock();
        if st.abandoned {
            return Err(ABANDONED);
        }
        debug_assert!(written >= st.written, "the spool only grows");
        st.written = written;
        drop(st);
        self.grew.notify_all();
        Ok(())
    }

    /// The receiver is done; the loader's reads end with `result` once past what was
    /// published. The first call counts.
    pub fn finish(&self, result: Result<(), String>) {
        let mut st = self.state.lock();
        st.end.get_or_insert(result);
        drop(st);
        self.grew.notify_all();
    }

    /// The loader stops: the receiver's next publish fails. Returns whether the receiver
    /// was still running (so the loader's failure was its own, not the receiver's).
    pub fn abandon(&self) -> bool {
        let mut st = self.state.lock();
        st.abandoned = true;
        st.end.is_none()
    }

    /// Whether the loader has stopped.
    pub fn is_abandoned(&self) -> bool {
        self.state.lock().abandoned
    }

    /// Bytes the loader has read.
    pub fn loaded(&self) -> u64 {
        self.loaded.load(Ordering::Relaxed)
    }

    /// Bytes published so far.
    pub fn written(&self) -> u64 {
        self.state.lock().written
    }

    /// Whether the receiver is done (successfully or not).
    pub fn finished(&self) -> bool {
        self.state.lock().end.is_some()
    }
}

/// Held by the receiver's thread: if it unwinds before [`Spool::finish`], the reader gets an
/// error instead of waiting forever for bytes that will not come.
pub struct FinishOnDrop<'a>(pub &'a Spool);

impl Drop for FinishOnDrop<'_> {
    fn drop(&mut self) {
        // A no-op after the receiver's own finish (the first counts).
        self.0.finish(Err("the receiver stopped".into()));
    }
}

/// The loader's side: reads the spool up to what the receiver published, waiting for more.
pub struct SpoolReader<'a> {
    spool: &'a Spool,
    file: File,
    pos: u64,
}

impl Read for SpoolReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        let ready = {
            let mut st = self.spool.state.lock();
            loop {
                if st.written > self.pos {
                    break st.written - self.pos;
                }
                match &st.end {
                    Some(Ok(())) => return Ok(0),
                    Some(Err(e)) => {
                        return Err(std::io::Error::other(format!("receiving it: {e}")))
                    }
                    None => self.spool.grew.wait(&mut st),
                }
            }
        };
        let want = buf.len().min(usize::try_from(ready).unwrap_or(usize::MAX));
        let n = self.file.read(&mut buf[..want])?;
        if n == 0 {
            // Published bytes are in the file: only an outside truncation gets here.
            return Err(std::io::Error::other(format!(
                "{} ends at {} bytes, before the {} received",
                self.spool.path.display(),
                self.pos,
                self.pos + ready
            )));
        }
        self.pos += n as u64;
        self.spool.loaded.store(self.pos, Ordering::Relaxed);
        Ok(n)
    }
}

/// The receiver's side: frames written through a buffer, flushed and published one frame
/// at a time (a frame is at most about a megabyte, `frames::RECORDS_FRAME_BYTES`, so the
/// loader trails by at most one frame plus the socket's buffer).
pub struct SpoolWriter<'a> {
    spool: &'a Spool,
    out: std::io::BufWriter<File>,
    written: u64,
}

impl<'a> SpoolWriter<'a> {
    pub fn new(spool: &'a Spool, file: File) -> SpoolWriter<'a> {
        SpoolWriter {
            spool,
            out: std::io::BufWriter::with_capacity(1 << 20, file),
            written: 0,
        }
    }

    /// The writer to append a frame to; [`SpoolWriter::publish`] makes it readable.
    pub fn out(&mut self) -> &mut impl Write {
        &mut self.out
    }

    /// Flushes what was appended since the last call and publishes it (`len` bytes).
    pub fn publish(&mut self, len: u64) -> std::io::Result<()> {
        self.out.flush()?;
        self.written += len;
        self.spool
            .publish(self.written)
            .map_err(std::io::Error::other)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reader_sees_only_published_bytes_then_the_end() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("spool");
        let (spool, file) = Spool::create(&path).unwrap();
        let got = std::thread::scope(|s| {
            let reader = s.spawn(|| {
                let mut all = Vec::new();
                spool.reader().unwrap().read_to_end(&mut all).map(|_| all)
            });
            let mut w = SpoolWriter::new(&spool, file);
            for i in 0..100u8 {
                w.out().write_all(&[i; 1000]).unwrap();
                // Unpublished bytes in the file's buffer are never read.
                w.publish(1000).unwrap();
            }
            spool.finish(Ok(()));
            reader.join().unwrap()
        });
        let want: Vec<u8> = (0..100u8).flat_map(|i| [i; 1000]).collect();
        assert_eq!(got.unwrap(), want);
    }

    #[test]
    fn a_failed_receiver_fails_the_reader_and_an_abandoned_load_stops_the_receiver() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("spool");
        let (spool, file) = Spool::create(&path).unwrap();
        let mut w = SpoolWriter::new(&spool, file);
        w.out().write_all(b"abc").unwrap();
        w.publish(3).unwrap();
        let err = std::thread::scope(|s| {
            let reader = s.spawn(|| {
                let mut all = Vec::new();
                let r = spool.reader().unwrap().read_to_end(&mut all);
                (all, r)
            });
            std::thread::sleep(std::time::Duration::from_millis(20));
            spool.finish(Err("the master closed the connection".into()));
            reader.join().unwrap()
        });
        // What was published was read; then the receiver's error, not an end of file.
        assert_eq!(err.0, b"abc");
        let e = err.1.unwrap_err().to_string();
        assert!(e.contains("the master closed the connection"), "{e}");
        // The receiver had finished: the load's failure is the receiver's.
        assert!(!spool.abandon());
        w.out().write_all(b"d").unwrap();
        assert!(w.publish(1).is_err());
        assert_eq!(spool.written(), 3);
    }
}
