//! The io_uring backend of batched reads: every read of a batch is submitted at once and the
//! device works on them together (queue depth = batch size, up to [`RING_ENTRIES`]).
//!
//! This is the crate's only module with `unsafe` code: handing a buffer to the kernel is
//! `unsafe` because the compiler cannot see the kernel writing into it later. The rules that
//! keep it sound, explained in `docs/design.md` §10.1: one ring per thread, never shared; each
//! read owns its buffer ([`FIXED_BUFFERS`] registered buffers of [`FIXED_BUFFER_BYTES`], or a
//! heap buffer) until its completion is reaped, and [`read_batch`] returns only after every
//! submitted read's completion was reaped; failure leaks (buffers, and the poisoned ring) rather
//! than frees; requests borrow their files for the whole call. Completions: short reads are
//! resubmitted for the rest, EINTR and EAGAIN retried (at most [`MAX_RETRIES`] times), any
//! other error fails that request only.

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

/// Registered buffers per ring (one per read in flight).
pub const FIXED_BUFFERS: usize = RING_ENTRIES as usize;

/// Bytes of one registered buffer: a 4 KiB block with its trailer spans at most three
/// aligned pages; larger reads use heap buffers. 64 x 16 KiB = 1 MiB pinned per ring.
pub const FIXED_BUFFER_BYTES: usize = 16 << 10;

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

/// The registered buffers of a ring: one aligned allocation cut in equal parts.
struct FixedBuffers {
    mem: AlignedBuf,
    free: Vec<u16>,
}

/// A thread's ring. Field order matters: the ring (and its registration) goes before the
/// memory registered with it.
struct Ring {
    ring: IoUring,
    fixed: Option<FixedBuffers>,
}

// One value per thread: its size does not matter, an extra indirection on every batch would.
#[allow(clippy::large_enum_variant)]
enum RingState {
    Untried,
    Ready(Ring),
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

/// Registers [`FIXED_BUFFERS`] buffers with `ring`; `None` if the kernel refuses (old kernel,
/// locked-memory limit): reads then use heap buffers.
fn register_fixed(ring: &IoUring) -> Option<FixedBuffers> {
    let mut mem = AlignedBuf::new(FIXED_BUFFERS * FIXED_BUFFER_BYTES, DIRECT_IO_ALIGN);
    let base = mem.as_mut_slice().as_mut_ptr();
    let iovecs: Vec<libc::iovec> = (0..FIXED_BUFFERS)
        .map(|i| libc::iovec {
            iov_base: base.wrapping_add(i * FIXED_BUFFER_BYTES).cast(),
            iov_len: FIXED_BUFFER_BYTES,
        })
        .collect();
    // SAFETY: every iovec lies inside `mem`, a heap allocation that is never moved, resized
    // or freed while the ring exists: it is stored next to the ring in `Ring`, whose field
    // order drops the ring first, and a poisoned ring's `FixedBuffers` are leaked instead of
    // dropped (see `read_batch_chunked`).
    let r = unsafe { ring.submitter().register_buffers(&iovecs) };
    r.ok().map(|()| FixedBuffers {
        mem,
        free: (0..FIXED_BUFFERS as u16).rev().collect(),
    })
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
    read_batch_with(reqs, MAX_READ_BYTES, true)
}

/// [`read_batch`] with reads cut to `max_chunk` bytes each (tests force short reads with a
/// small value) and registered buffers on or off.
pub(crate) fn read_batch_with(
    reqs: &[UringRead],
    max_chunk: usize,
    use_fixed: bool,
) -> Option<Vec<io::Result<Vec<u8>>>> {
    RING.with(|cell| {
        let mut state = cell.borrow_mut();
        if POISONED.get() {
            if let RingState::Ready(old) = std::mem::replace(&mut *state, RingState::Untried) {
                // The kernel may still write into the old ring's registered memory: leak it.
                // Dropping the ring itself is safe (its unreaped heap reads were leaked).
                let Ring { ring, fixed } = old;
                drop(ring);
                std::mem::forget(fixed);
            }
            POISONED.set(false);
        }
        if matches!(*state, RingState::Untried) {
            *state = match new_ring() {
                Ok(ring) => {
                    let fixed = register_fixed(&ring);
                    RingState::Ready(Ring { ring, fixed })
                }
                Err(_) => RingState::Failed,
            };
        }
        let RingState::Ready(Ring { ring, fixed }) = &mut *state else {
            return None;
        };
        let fixed = if use_fixed { fixed.as_mut() } else { None };
        let mut batch = InFlight::new(reqs, max_chunk, fixed);
        if let Err(e) = batch.run(ring) {
            batch.abandon(&e);
        }
        Some(batch.finish())
    })
}

/// Where a read's bytes go.
enum Buf {
    /// Not submitted yet.
    None,
    Heap(AlignedBuf),
    /// Registered buffer number n.
    Fixed(u16),
}

struct Slot {
    fd: RawFd,
    range: AlignedRange,
    align: usize,
    buf: Buf,
    /// Bytes of the buffer filled from its start.
    done: usize,
    /// Where the read in flight started in the buffer.
    pos: usize,
    in_flight: bool,
    retries: u32,
    result: Option<io::Result<Vec<u8>>>,
}

/// The reads of one batch and their buffers (ownership rules: `docs/design.md` §10.1).
struct InFlight<'r> {
    slots: Vec<Slot>,
    in_flight: usize,
    max_chunk: usize,
    fixed: Option<&'r mut FixedBuffers>,
}

impl<'r> InFlight<'r> {
    fn new(reqs: &[UringRead], max_chunk: usize, fixed: Option<&'r mut FixedBuffers>) -> Self {
        let slots = reqs
            .iter()
            .map(|r| {
                let align = if r.direct { DIRECT_IO_ALIGN } else { 1 };
                Slot {
                    fd: r.fd,
                    range: AlignedRange::new(r.offset, r.len, align),
                    align,
                    buf: Buf::None,
                    done: 0,
                    pos: 0,
                    in_flight: false,
                    retries: 0,
                    result: (r.len == 0).then(|| Ok(Vec::new())),
                }
            })
            .collect();
        InFlight {
            slots,
            in_flight: 0,
            max_chunk,
            fixed,
        }
    }

    /// The submission entry for the next part of slot `i`'s read, giving the slot a buffer
    /// on its first submission.
    fn entry(&mut self, i: usize) -> io_uring::squeue::Entry {
        let max_chunk = self.max_chunk;
        let s = &mut self.slots[i];
        if matches!(s.buf, Buf::None) {
            let n = self
                .fixed
                .as_mut()
                .filter(|_| s.range.len <= FIXED_BUFFER_BYTES)
                .and_then(|f| f.free.pop());
            s.buf = match n {
                Some(n) => Buf::Fixed(n),
                None => Buf::Heap(AlignedBuf::new(s.range.len, s.align)),
            };
        }
        s.pos = AlignedRange::resume_at(s.done, s.align);
        let chunk = (max_chunk - max_chunk % s.align).max(s.align);
        let len = (s.range.len - s.pos).min(chunk) as u32;
        let offset = s.range.base + s.pos as u64;
        let fd = types::Fd(s.fd);
        let entry = match &mut s.buf {
            Buf::Fixed(n) => {
                let fixed = self
                    .fixed
                    .as_mut()
                    .expect("fixed buffer without registration");
                let start = *n as usize * FIXED_BUFFER_BYTES + s.pos;
                let ptr = fixed.mem.as_mut_slice()[start..].as_mut_ptr();
                opcode::ReadFixed::new(fd, ptr, len, *n)
                    .offset(offset)
                    .build()
            }
            Buf::Heap(b) => {
                let ptr = b.as_mut_slice()[s.pos..].as_mut_ptr();
                opcode::Read::new(fd, ptr, len).offset(offset).build()
            }
            Buf::None => unreachable!("buffer assigned above"),
        };
        entry.user_data(i as u64)
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
                    // SAFETY: the entry points into slot `i`'s buffer: a registered buffer
                    // (owned by the thread's `Ring`, handed to no other read until this one's
                    // completion is reaped) or a heap buffer owned by the slot. Neither is
                    // moved or freed before this read's completion is reaped: `run` reaps
                    // every completion before returning Ok, and otherwise `abandon` (or
                    // `Drop`, on unwinding) leaks the heap buffers of reads in flight and
                    // poisons the ring so its registered memory is leaked too. The length
                    // stays inside the buffer (`entry` cuts it at `range.len - pos`, and
                    // `range.len` fits a registered buffer when one is used). The descriptor
                    // belongs to a file the caller borrows for the whole call.
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
            // Every read of the batch is needed before it can go on: wait for all of them in
            // one call (one wake-up) rather than one completion at a time.
            match ring.submit_and_wait(self.in_flight) {
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
        let outcome = if res < 0 {
            let errno = -res;
            if (errno == libc::EINTR || errno == libc::EAGAIN) && s.retries < MAX_RETRIES {
                s.retries += 1;
                queue.push_back(i);
                return;
            }
            Err(io::Error::from_raw_os_error(errno))
        } else {
            let end = s.pos + res as usize;
            if end <= s.done {
                // Nothing new arrived: the file ends before the wanted bytes.
                Err(io::Error::from(io::ErrorKind::UnexpectedEof))
            } else if end < s.range.need {
                s.done = end;
                queue.push_back(i);
                return;
            } else {
                s.done = end;
                Ok(())
            }
        };
        self.finish_slot(i, outcome);
    }

    /// Records slot `i`'s result, copying its bytes out of (and freeing) its buffer. The
    /// slot's read must not be in flight.
    fn finish_slot(&mut self, i: usize, outcome: io::Result<()>) {
        let s = &mut self.slots[i];
        debug_assert!(!s.in_flight);
        let (skip, len) = (s.range.skip, s.range.need - s.range.skip);
        let buf = std::mem::replace(&mut s.buf, Buf::None);
        let data = match buf {
            Buf::Fixed(n) => {
                let fixed = self
                    .fixed
                    .as_mut()
                    .expect("fixed buffer without registration");
                let start = n as usize * FIXED_BUFFER_BYTES + skip;
                let data = outcome
                    .as_ref()
                    .ok()
                    .map(|()| fixed.mem.as_slice()[start..start + len].to_vec());
                fixed.free.push(n);
                data
            }
            Buf::Heap(b) => outcome.as_ref().ok().map(|()| b.into_vec(skip, len)),
            Buf::None => None,
        };
        s.result = Some(outcome.map(|()| data.unwrap_or_default()));
    }

    /// After a ring failure: reads still in flight keep their buffers forever (leaked), and
    /// every unfinished read fails with `e`.
    fn abandon(&mut self, e: &io::Error) {
        self.leak_in_flight();
        for i in 0..self.slots.len() {
            if self.slots[i].result.is_none() {
                let err = io::Error::new(e.kind(), format!("io_uring failed: {e}"));
                self.finish_slot(i, Err(err));
            }
        }
    }

    /// Gives up the buffers of reads in flight (the kernel may still write into them) and
    /// poisons the ring (its registered memory will be leaked when it is replaced).
    fn leak_in_flight(&mut self) {
        if self.in_flight == 0 {
            return;
        }
        for s in &mut self.slots {
            if s.in_flight {
                match std::mem::replace(&mut s.buf, Buf::None) {
                    Buf::Heap(b) => std::mem::forget(b),
                    // Not returned to the free list: the ring is replaced before reuse.
                    Buf::Fixed(_) | Buf::None => {}
                }
                s.in_flight = false;
            }
        }
        self.in_flight = 0;
        POISONED.set(true);
    }

    fn finish(mut self) -> Vec<io::Result<Vec<u8>>> {
        std::mem::take(&mut self.slots)
            .into_iter()
            .map(|s| {
                s.result
                    .unwrap_or_else(|| Err(io::Error::other("read never completed")))
            })
            .collect()
    }
}

impl Drop for InFlight<'_> {
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
        // 200 reads > 64 ring entries (registered buffers are reused); chunks of 97 bytes
        // force many short-read resubmits.
        for (chunk, fixed) in [(MAX_READ_BYTES, true), (MAX_READ_BYTES, false), (97, true)] {
            let out = read_batch_with(&reqs, chunk, fixed).unwrap();
            for (r, got) in reqs.iter().zip(out) {
                let o = r.offset as usize;
                assert_eq!(got.unwrap(), &data[o..o + r.len]);
            }
        }
        // The registered-buffer path was the one exercised (root or a memlock limit of at
        // least 1 MiB lets the kernel pin them).
        RING.with(|c| match &*c.borrow() {
            RingState::Ready(r) => {
                let f = r.fixed.as_ref().expect("registered buffers");
                assert_eq!(
                    f.free.len(),
                    FIXED_BUFFERS,
                    "a registered buffer was not freed"
                );
            }
            _ => panic!("no ring on this thread"),
        });
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
        for (chunk, fixed) in [(MAX_READ_BYTES, true), (MAX_READ_BYTES, false), (1, true)] {
            let out = read_batch_with(&reqs, chunk, fixed).unwrap();
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
