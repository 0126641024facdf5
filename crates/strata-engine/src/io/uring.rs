//! The io_uring backend of batched reads: every read of a batch is submitted at once and the
//! device works on them together (queue depth = batch size, up to [`RING_ENTRIES`]).
//!
//! This is the crate's only module with `unsafe` code: handing a buffer to the kernel is
//! `unsafe` because the compiler cannot see the kernel writing into it later.
//!
//! Rules that keep it sound:
//! - **One ring per thread** (`thread_local!`), created lazily on the thread's first batch,
//!   never shared or sent: no locking, and the ring can be set up `SINGLE_ISSUER`.
//! - **Each read owns its buffer until its completion is reaped.** The buffers live in an
//!   [`InFlight`] value; [`read_batch`] returns only after the completion of every read it
//!   submitted has been reaped. A read whose completion never came (the ring failed, or a
//!   panic unwound through the loop) has its buffer leaked, never freed, and the ring is marked
//!   poisoned: the next batch on the thread drops it (the kernel cancels or finishes what is
//!   left, into leaked memory) and builds a new one, so no stale completion reaches a later
//!   batch.
//! - **The files outlive their reads**: requests borrow their file for the whole call. A read
//!   submitted holds the kernel's own reference to the file; an entry queued but never
//!   submitted is discarded with its poisoned ring before any later submission.
//!
//! Completions: a short read is resubmitted for the rest (direct reads restart at the last
//! aligned boundary); EINTR and EAGAIN resubmit the same read (at most [`MAX_RETRIES`]
//! times); any other error, or end of file before the wanted bytes, fails that request only.

use super::aligned::{AlignedBuf, AlignedRange, DIRECT_IO_ALIGN};
use io_uring::{opcode, types, IoUring, Probe};
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::io;
use std::os::fd::RawFd;
use std::sync::OnceLock;

/// Submission-queue entries of a thread's ring: the most reads in flight at once. Batches
/// larger than this are fed in as earlier reads complete.
pub const RING_ENTRIES: u32 = 64;

/// Resubmissions of one read after EINTR or EAGAIN before it fails.
const MAX_RETRIES: u32 = 64;

/// `io_uring_enter` calls in a row that may fail with EINTR, EAGAIN or EBUSY before the ring
/// is given up.
const MAX_ENTER_FAILURES: u32 = 10_000;

/// Largest single read (the length field is 32 bits); aligned for direct reads.
const MAX_READ_BYTES: usize = 1 << 30;

/// One read of a batch.
#[derive(Clone, Copy, Debug)]
pub(crate) struct UringRead {
    pub fd: RawFd,
    pub offset: u64,
    pub len: usize,
    /// The descriptor was opened with `O_DIRECT`: offsets, lengths and buffers are aligned.
    pub direct: bool,
}

// One value per thread: its size does not matter, an extra indirection on every batch would.
#[allow(clippy::large_enum_variant)]
enum RingState {
    Untried,
    Ready(IoUring),
    Failed,
}

thread_local! {
    static RING: RefCell<RingState> = const { RefCell::new(RingState::Untried) };
    /// Set when a batch left reads in flight on the thread's ring (see the module docs).
    static POISONED: Cell<bool> = const { Cell::new(false) };
}

fn new_ring() -> io::Result<IoUring> {
    // Single issuer + deferred task run: completions are processed when this thread waits for
    // them, with no inter-processor interrupts. Older kernels refuse the flags: plain ring.
    let ring = IoUring::builder()
        .setup_single_issuer()
        .setup_coop_taskrun()
        .setup_defer_taskrun()
        .build(RING_ENTRIES)
        .or_else(|_| IoUring::new(RING_ENTRIES))?;
    let mut probe = Probe::new();
    ring.submitter().register_probe(&mut probe)?;
    if !probe.is_supported(opcode::Read::CODE) {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "the kernel's io_uring lacks IORING_OP_READ (Linux 5.6)",
        ));
    }
    Ok(ring)
}

/// Whether io_uring can be set up in this process: `Err` says why not. Probed once.
pub(crate) fn available() -> Result<(), String> {
    static AVAILABLE: OnceLock<Result<(), String>> = OnceLock::new();
    AVAILABLE
        .get_or_init(|| new_ring().map(drop).map_err(|e| e.to_string()))
        .clone()
}

/// Reads every request through this thread's ring. `None` if the thread has no ring (it
/// could not be set up): the caller uses another backend. Results are in request order;
/// errors are per request (`UnexpectedEof` when the file ends before the wanted bytes).
pub(crate) fn read_batch(reqs: &[UringRead]) -> Option<Vec<io::Result<Vec<u8>>>> {
    read_batch_chunked(reqs, MAX_READ_BYTES)
}

/// [`read_batch`] with reads cut to `max_chunk` bytes each (tests force short reads with a
/// small value).
pub(crate) fn read_batch_chunked(
    reqs: &[UringRead],
    max_chunk: usize,
) -> Option<Vec<io::Result<Vec<u8>>>> {
    RING.with(|cell| {
        let mut state = cell.borrow_mut();
        if POISONED.get() {
            // Dropping the old ring is safe: its unreaped reads write into leaked buffers.
            *state = RingState::Untried;
            POISONED.set(false);
        }
        if matches!(*state, RingState::Untried) {
            *state = match new_ring() {
                Ok(r) => RingState::Ready(r),
                Err(_) => RingState::Failed,
            };
        }
        let RingState::Ready(ring) = &mut *state else {
            return None;
        };
        let mut batch = InFlight::new(reqs, max_chunk);
        if let Err(e) = batch.run(ring) {
            batch.abandon(&e);
        }
        Some(batch.finish())
    })
}

struct Slot {
    fd: RawFd,
    range: AlignedRange,
    align: usize,
    buf: AlignedBuf,
    /// Bytes of `buf` filled from its start.
    done: usize,
    /// Where the read in flight started in `buf`.
    pos: usize,
    in_flight: bool,
    retries: u32,
    result: Option<io::Result<()>>,
}

/// The reads of one batch and their buffers (see the module docs for the ownership rules).
struct InFlight {
    slots: Vec<Slot>,
    in_flight: usize,
    max_chunk: usize,
}

impl InFlight {
    fn new(reqs: &[UringRead], max_chunk: usize) -> Self {
        let slots = reqs
            .iter()
            .map(|r| {
                let align = if r.direct { DIRECT_IO_ALIGN } else { 1 };
                let range = AlignedRange::new(r.offset, r.len, align);
                Slot {
                    fd: r.fd,
                    range,
                    align,
                    buf: AlignedBuf::new(range.len, align),
                    done: 0,
                    pos: 0,
                    in_flight: false,
                    retries: 0,
                    result: (r.len == 0).then_some(Ok(())),
                }
            })
            .collect();
        InFlight {
            slots,
            in_flight: 0,
            max_chunk,
        }
    }

    /// The submission entry for the next part of slot `i`'s read.
    fn entry(&mut self, i: usize) -> io_uring::squeue::Entry {
        let max_chunk = self.max_chunk;
        let s = &mut self.slots[i];
        s.pos = AlignedRange::resume_at(s.done, s.align);
        let chunk = (max_chunk - max_chunk % s.align).max(s.align);
        let len = (s.range.len - s.pos).min(chunk);
        let ptr = s.buf.as_mut_slice()[s.pos..].as_mut_ptr();
        opcode::Read::new(types::Fd(s.fd), ptr, len as u32)
            .offset(s.range.base + s.pos as u64)
            .build()
            .user_data(i as u64)
    }

    /// Submits and reaps until every read is complete. `Err` only if the ring itself failed;
    /// reads may then still be in flight.
    fn run(&mut self, ring: &mut IoUring) -> io::Result<()> {
        let mut queue: VecDeque<usize> = (0..self.slots.len())
            .filter(|&i| self.slots[i].result.is_none())
            .collect();
        let cap = ring.params().sq_entries() as usize;
        let mut enter_failures = 0;
        loop {
            {
                let mut sq = ring.submission();
                while self.in_flight < cap {
                    let Some(&i) = queue.front() else { break };
                    let entry = self.entry(i);
                    // SAFETY: the entry points into `self.slots[i].buf`, a heap buffer that is
                    // neither moved nor freed before this read's completion is reaped: `run`
                    // reaps every completion before returning Ok, and otherwise `abandon` (or
                    // `Drop`, on unwinding) leaks the buffers of reads still in flight. The
                    // length stays inside the buffer (`entry` cuts it at `range.len - pos`).
                    // The descriptor belongs to a file the caller borrows for the whole call.
                    if unsafe { sq.push(&entry) }.is_err() {
                        break;
                    }
                    queue.pop_front();
                    self.slots[i].in_flight = true;
                    self.in_flight += 1;
                }
            }
            if self.in_flight == 0 {
                return Ok(());
            }
            match ring.submit_and_wait(1) {
                Ok(_) => enter_failures = 0,
                Err(e)
                    if matches!(
                        e.raw_os_error(),
                        Some(libc::EINTR | libc::EAGAIN | libc::EBUSY)
                    ) =>
                {
                    enter_failures += 1;
                    if enter_failures > MAX_ENTER_FAILURES {
                        return Err(e);
                    }
                    std::thread::yield_now();
                }
                Err(e) => return Err(e),
            }
            for cqe in ring.completion() {
                self.complete(cqe.user_data() as usize, cqe.result(), &mut queue);
            }
        }
    }

    /// Takes the completion of slot `i`'s read: done, failed, or queued again for the rest.
    fn complete(&mut self, i: usize, res: i32, queue: &mut VecDeque<usize>) {
        let Some(s) = self.slots.get_mut(i).filter(|s| s.in_flight) else {
            debug_assert!(
                false,
                "completion for slot {i}, which has no read in flight"
            );
            return;
        };
        s.in_flight = false;
        self.in_flight -= 1;
        if res < 0 {
            let errno = -res;
            if (errno == libc::EINTR || errno == libc::EAGAIN) && s.retries < MAX_RETRIES {
                s.retries += 1;
                queue.push_back(i);
            } else {
                s.result = Some(Err(io::Error::from_raw_os_error(errno)));
            }
            return;
        }
        let end = s.pos + res as usize;
        if end <= s.done {
            // Nothing new arrived: the file ends before the wanted bytes.
            s.result = Some(Err(io::Error::from(io::ErrorKind::UnexpectedEof)));
        } else {
            s.done = end;
            if s.done >= s.range.need {
                s.result = Some(Ok(()));
            } else {
                queue.push_back(i);
            }
        }
    }

    /// After a ring failure: reads still in flight keep their buffers forever (leaked), and
    /// every unfinished read fails with `e`. The ring is poisoned.
    fn abandon(&mut self, e: &io::Error) {
        self.leak_in_flight();
        for s in &mut self.slots {
            if s.result.is_none() {
                s.result = Some(Err(io::Error::new(
                    e.kind(),
                    format!("io_uring failed: {e}"),
                )));
            }
        }
    }

    fn leak_in_flight(&mut self) {
        if self.in_flight == 0 {
            return;
        }
        for s in &mut self.slots {
            if s.in_flight {
                std::mem::forget(std::mem::replace(&mut s.buf, AlignedBuf::new(0, 1)));
                s.in_flight = false;
            }
        }
        self.in_flight = 0;
        POISONED.set(true);
    }

    fn finish(mut self) -> Vec<io::Result<Vec<u8>>> {
        std::mem::take(&mut self.slots)
            .into_iter()
            .map(|s| match s.result {
                Some(Ok(())) => Ok(s.buf.into_vec(s.range.skip, s.range.need - s.range.skip)),
                Some(Err(e)) => Err(e),
                None => Err(io::Error::other("read never completed")),
            })
            .collect()
    }
}

impl Drop for InFlight {
    /// Unwinding out of `run` (a panic) must not free buffers the kernel may still write.
    fn drop(&mut self) {
        self.leak_in_flight();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::OpenOptionsExt;

    fn file_with(data: &[u8]) -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, data).unwrap();
        (dir, p)
    }

    /// io_uring must work here unless `STRATA_ALLOW_NO_URING=1` says this machine lacks it
    /// (then the pool backend's tests are what covers batched reads).
    fn require_uring() -> bool {
        match available() {
            Ok(()) => true,
            Err(e) if std::env::var_os("STRATA_ALLOW_NO_URING").is_some() => {
                eprintln!("io_uring unavailable ({e}); skipped as STRATA_ALLOW_NO_URING asks");
                false
            }
            Err(e) => panic!("io_uring unavailable: {e} (set STRATA_ALLOW_NO_URING=1 to skip)"),
        }
    }

    fn pattern(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i * 31 % 251) as u8).collect()
    }

    #[test]
    fn reads_many_ranges_and_short_reads_complete() {
        if !require_uring() {
            return;
        }
        let data = pattern(300_000);
        let (_d, p) = file_with(&data);
        let f = std::fs::File::open(&p).unwrap();
        let reqs: Vec<UringRead> = (0..200)
            .map(|i| UringRead {
                fd: f.as_raw_fd(),
                offset: (i * 1487) as u64,
                len: 100 + i * 13,
                direct: false,
            })
            .collect();
        // 200 reads > 64 ring entries; chunks of 97 bytes force many short-read resubmits.
        for chunk in [MAX_READ_BYTES, 97] {
            let out = read_batch_chunked(&reqs, chunk).unwrap();
            for (r, got) in reqs.iter().zip(out) {
                let o = r.offset as usize;
                assert_eq!(got.unwrap(), &data[o..o + r.len]);
            }
        }
    }

    #[test]
    fn past_eof_fails_only_that_read() {
        if !require_uring() {
            return;
        }
        let data = pattern(10_000);
        let (_d, p) = file_with(&data);
        let f = std::fs::File::open(&p).unwrap();
        let fd = f.as_raw_fd();
        let reqs = [
            UringRead {
                fd,
                offset: 0,
                len: 10,
                direct: false,
            },
            UringRead {
                fd,
                offset: 9_990,
                len: 20,
                direct: false,
            },
            UringRead {
                fd,
                offset: 20_000,
                len: 5,
                direct: false,
            },
            UringRead {
                fd,
                offset: 5,
                len: 0,
                direct: false,
            },
            UringRead {
                fd: -1,
                offset: 0,
                len: 5,
                direct: false,
            },
        ];
        let out = read_batch(&reqs).unwrap();
        assert_eq!(out[0].as_ref().unwrap(), &data[..10]);
        assert_eq!(
            out[1].as_ref().unwrap_err().kind(),
            io::ErrorKind::UnexpectedEof
        );
        assert_eq!(
            out[2].as_ref().unwrap_err().kind(),
            io::ErrorKind::UnexpectedEof
        );
        assert!(out[3].as_ref().unwrap().is_empty());
        assert_eq!(
            out[4].as_ref().unwrap_err().raw_os_error(),
            Some(libc::EBADF)
        );
    }

    #[test]
    fn direct_reads_are_aligned_and_sliced() {
        if !require_uring() {
            return;
        }
        let data = pattern(50_000);
        let (_d, p) = file_with(&data);
        let f = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECT)
            .open(&p)
            .expect("O_DIRECT open in the temp dir");
        let fd = f.as_raw_fd();
        let reqs: Vec<UringRead> = [
            (0, 4096),
            (5, 100),
            (4000, 5000),
            (49_000, 1000),
            (46_000, 3999),
        ]
        .iter()
        .map(|&(offset, len)| UringRead {
            fd,
            offset,
            len,
            direct: true,
        })
        .collect();
        for chunk in [MAX_READ_BYTES, 1] {
            let out = read_batch_chunked(&reqs, chunk).unwrap();
            for (r, got) in reqs.iter().zip(out) {
                let o = r.offset as usize;
                assert_eq!(got.unwrap(), &data[o..o + r.len], "{r:?} chunk {chunk}");
            }
        }
        let past = [UringRead {
            fd,
            offset: 49_900,
            len: 200,
            direct: true,
        }];
        let out = read_batch(&past).unwrap();
        assert_eq!(
            out[0].as_ref().unwrap_err().kind(),
            io::ErrorKind::UnexpectedEof
        );
    }
}
