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
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// Submission-queue entries of a thread's ring: the most reads in flight at once. Batches
/// larger than this are fed in as earlier reads complete.
pub const RING_ENTRIES: u32 = 64;

/// Registered buffers per ring (one per read in flight).
pub const FIXED_BUFFERS: usize = RING_ENTRIES as usize;

/// Bytes of one registered buffer: a 4 KiB block with its trailer spans at most three
/// aligned pages; larger reads use heap buffers. 64 x 16 KiB = 1 MiB pinned per ring.
pub const FIXED_BUFFER_BYTES: usize = 16 << 10;

/// Waits for completions by every ring of the process, and the reads in flight summed over
/// those waits: their ratio is the mean device queue a wait left behind (`Db::stats`).
static WAITS: AtomicU64 = AtomicU64::new(0);
static WAITED_IN_FLIGHT: AtomicU64 = AtomicU64::new(0);

/// `(waits, reads in flight summed over them)` of every ring of the process.
pub(crate) fn wait_stats() -> (u64, u64) {
    (
        WAITS.load(Ordering::Relaxed),
        WAITED_IN_FLIGHT.load(Ordering::Relaxed),
    )
}

/// A stream at its cap wakes when 1/REFILL_FRACTION of its reads in flight completed.
const REFILL_FRACTION: usize = 4;

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
/// could not be set up, or the ring is busy with a stream further up this thread's stack):
/// the caller uses another backend. Results are in request order; errors are per request
/// (`UnexpectedEof` when the file ends before the wanted bytes).
pub(crate) fn read_batch(reqs: &[UringRead]) -> Option<Vec<io::Result<Vec<u8>>>> {
    read_batch_with(reqs, MAX_READ_BYTES, true)
}

/// A producer of reads for [`read_stream`]: completing one read may make others ready (the
/// next level of a lookup, the next batch of keys).
pub(crate) trait ReadSource {
    /// The next read to submit, with a tag that comes back with its result; `None` when no
    /// read is ready now.
    fn next_read(&mut self) -> Option<(usize, UringRead)>;
    /// The result of the read submitted with `tag`.
    fn read_done(&mut self, tag: usize, result: io::Result<Vec<u8>>);
}

/// Runs `src` on this thread's ring with at most `max_in_flight` reads in flight (and at most
/// [`RING_ENTRIES`]): a read is submitted as soon as a slot frees, so the device queue stays
/// full across what the source considers batches. Returns when the source has no read ready
/// and none is in flight. `None` if the thread has no ring (nothing was taken from `src`);
/// `Some(Err)` if the ring failed: the reads it had taken got that error, the source keeps
/// the rest, and the caller goes on elsewhere.
pub(crate) fn read_stream(
    src: &mut dyn ReadSource,
    max_in_flight: usize,
) -> Option<io::Result<()>> {
    with_ring(true, |ring, fixed| {
        let mut flight = InFlight::new(MAX_READ_BYTES, fixed);
        let r = flight.run(ring, src, max_in_flight);
        if let Err(e) = &r {
            flight.abandon(e, src);
        }
        r
    })
}

/// [`read_batch`] with reads cut to `max_chunk` bytes each (tests force short reads with a
/// small value) and registered buffers on or off.
pub(crate) fn read_batch_with(
    reqs: &[UringRead],
    max_chunk: usize,
    use_fixed: bool,
) -> Option<Vec<io::Result<Vec<u8>>>> {
    with_ring(use_fixed, |ring, fixed| {
        let mut src = BatchSource {
            reqs,
            next: 0,
            out: (0..reqs.len()).map(|_| None).collect(),
        };
        let mut flight = InFlight::new(max_chunk, fixed);
        if let Err(e) = flight.run(ring, &mut src, usize::MAX) {
            flight.abandon(&e, &mut src);
            while let Some((i, _)) = src.next_read() {
                src.out[i] = Some(Err(io::Error::new(
                    e.kind(),
                    format!("io_uring failed: {e}"),
                )));
            }
        }
        src.out
            .into_iter()
            .map(|r| r.unwrap_or_else(|| Err(io::Error::other("read never completed"))))
            .collect()
    })
}

/// A whole batch as a [`ReadSource`]: every read ready at once, results kept in order.
struct BatchSource<'a> {
    reqs: &'a [UringRead],
    next: usize,
    out: Vec<Option<io::Result<Vec<u8>>>>,
}

impl ReadSource for BatchSource<'_> {
    fn next_read(&mut self) -> Option<(usize, UringRead)> {
        let i = self.next;
        let r = *self.reqs.get(i)?;
        self.next += 1;
        Some((i, r))
    }

    fn read_done(&mut self, tag: usize, result: io::Result<Vec<u8>>) {
        self.out[tag] = Some(result);
    }
}

/// Runs `f` with this thread's ring (set up on first use, replaced if poisoned) and its
/// registered buffers if `use_fixed`. `None` if the thread has no ring, or if the ring is
/// already in use further up this thread's stack (a source's callback reading in turn): a
/// second loop on the same ring would reap the first one's completions.
fn with_ring<T>(
    use_fixed: bool,
    f: impl FnOnce(&mut IoUring, Option<&mut FixedBuffers>) -> T,
) -> Option<T> {
    RING.with(|cell| {
        let mut state = cell.try_borrow_mut().ok()?;
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
        Some(f(ring, fixed))
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
    /// The source's tag for this read.
    tag: usize,
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
}

/// The reads taken from a source and not yet handed back, with their buffers (ownership
/// rules: `docs/design.md` §10.1). A slot is reused once its result went back to the source;
/// a completion's user data is its slot number.
struct InFlight<'r> {
    slots: Vec<Slot>,
    /// Slots whose read went back to the source, free for the next one.
    free_slots: Vec<usize>,
    /// Slots to submit (again): a short read's rest, a retry after EINTR or EAGAIN, or a
    /// read that did not fit the submission queue.
    queue: VecDeque<usize>,
    in_flight: usize,
    max_chunk: usize,
    fixed: Option<&'r mut FixedBuffers>,
}

impl<'r> InFlight<'r> {
    fn new(max_chunk: usize, fixed: Option<&'r mut FixedBuffers>) -> Self {
        InFlight {
            slots: Vec::new(),
            free_slots: Vec::new(),
            queue: VecDeque::new(),
            in_flight: 0,
            max_chunk,
            fixed,
        }
    }

    /// Takes read `r` (tag `tag`) into a slot, without a buffer yet.
    fn take(&mut self, tag: usize, r: UringRead) -> usize {
        let align = if r.direct { DIRECT_IO_ALIGN } else { 1 };
        let slot = Slot {
            tag,
            fd: r.fd,
            range: AlignedRange::new(r.offset, r.len, align),
            align,
            buf: Buf::None,
            done: 0,
            pos: 0,
            in_flight: false,
            retries: 0,
        };
        match self.free_slots.pop() {
            Some(i) => {
                self.slots[i] = slot;
                i
            }
            None => {
                self.slots.push(slot);
                self.slots.len() - 1
            }
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

    /// Submits and reaps until the source has no read ready and none is in flight. `Err`
    /// only if the ring itself failed; reads may then still be in flight.
    fn run(
        &mut self,
        ring: &mut IoUring,
        src: &mut dyn ReadSource,
        max_in_flight: usize,
    ) -> io::Result<()> {
        let cap = (ring.params().sq_entries() as usize).min(max_in_flight.max(1));
        let mut enter_failures = 0;
        loop {
            // Whether submission stopped at the cap (more reads are waiting) rather than for
            // want of ready reads.
            let mut full = false;
            {
                let mut sq = ring.submission();
                loop {
                    if self.in_flight >= cap {
                        full = true;
                        break;
                    }
                    let i = match self.queue.pop_front() {
                        Some(i) => i,
                        None => match src.next_read() {
                            None => break,
                            Some((tag, r)) if r.len == 0 => {
                                src.read_done(tag, Ok(Vec::new()));
                                continue;
                            }
                            Some((tag, r)) => self.take(tag, r),
                        },
                    };
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
                    // belongs to a file the source keeps open until the read's result is
                    // handed back.
                    if unsafe { sq.push(&entry) }.is_err() {
                        self.queue.push_front(i);
                        full = true;
                        break;
                    }
                    self.slots[i].in_flight = true;
                    self.in_flight += 1;
                }
            }
            if self.in_flight == 0 {
                return Ok(());
            }
            // With more reads waiting, wake when a quarter of the reads in flight completed
            // and refill their places: the device queue stays between three quarters full
            // and full, and each wake-up (and each submission, a VM exit on a virtual disk)
            // is shared by several reads instead of paid per read. With none waiting, the
            // source needs these results before it can go on: wait for all of them at once.
            let want = if full {
                (self.in_flight / REFILL_FRACTION).max(1)
            } else {
                self.in_flight
            };
            WAITS.fetch_add(1, Ordering::Relaxed);
            WAITED_IN_FLIGHT.fetch_add(self.in_flight as u64, Ordering::Relaxed);
            match ring.submit_and_wait(want) {
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
                self.complete(cqe.user_data() as usize, cqe.result(), src);
            }
        }
    }

    /// Takes the completion of slot `i`'s read: done or failed (handed to the source), or
    /// queued again for the rest.
    fn complete(&mut self, i: usize, res: i32, src: &mut dyn ReadSource) {
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
                self.queue.push_back(i);
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
                self.queue.push_back(i);
                return;
            } else {
                s.done = end;
                Ok(())
            }
        };
        let (tag, result) = self.finish_slot(i, outcome);
        src.read_done(tag, result);
    }

    /// Frees slot `i`, copying its bytes out of (and freeing) its buffer, and returns its tag
    /// and result. The slot's read must not be in flight.
    fn finish_slot(&mut self, i: usize, outcome: io::Result<()>) -> (usize, io::Result<Vec<u8>>) {
        let s = &mut self.slots[i];
        debug_assert!(!s.in_flight);
        let (skip, len) = (s.range.skip, s.range.need - s.range.skip);
        let buf = std::mem::replace(&mut s.buf, Buf::None);
        let tag = s.tag;
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
        self.free_slots.push(i);
        (tag, outcome.map(|()| data.unwrap_or_default()))
    }

    /// After a ring failure: reads still in flight keep their buffers forever (leaked), and
    /// every read taken from the source and not handed back fails with `e`.
    fn abandon(&mut self, e: &io::Error, src: &mut dyn ReadSource) {
        let in_flight: Vec<usize> = (0..self.slots.len())
            .filter(|&i| self.slots[i].in_flight)
            .collect();
        self.leak_in_flight();
        let unfinished = in_flight.into_iter().chain(std::mem::take(&mut self.queue));
        for i in unfinished {
            let err = io::Error::new(e.kind(), format!("io_uring failed: {e}"));
            let (tag, result) = self.finish_slot(i, Err(err));
            src.read_done(tag, result);
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
}

impl Drop for InFlight<'_> {
    /// Unwinding out of `run` (a panic) must not free buffers the kernel may still write.
    fn drop(&mut self) {
        self.leak_in_flight();
    }
}

#[cfg(test)]
#[path = "uring_tests.rs"]
mod tests;
