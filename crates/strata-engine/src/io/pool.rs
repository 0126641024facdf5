//! The fallback backend of batched reads: a small fixed pool of threads issuing positional
//! reads concurrently, so that a batch keeps several reads in flight on the device even where
//! io_uring cannot be set up (old kernel, seccomp) or the files have no descriptor to give it
//! (`MemFs`, `FaultFs`).
//!
//! Why one process-wide pool of [`POOL_THREADS`] threads rather than threads per batch or per
//! database: spawning a thread costs tens of microseconds, as much as the read it would
//! issue, and a sharded front opens many databases in one process. The threads sleep on a
//! condition variable when idle and cost nothing but their small stacks.
//!
//! Protocol. A batch is an `Arc<Batch>`: a result slot per request and a count of reads not
//! finished yet, under one mutex, with a condition variable signalled when the count reaches
//! zero. The caller pushes one [`Job`] per request but the first onto the pool's bounded
//! queue (when the queue is full, it keeps the job and runs it itself), wakes one thread per
//! job, runs the first read itself, then helps: it pops and runs queued jobs (its own or
//! another batch's) until its own batch is complete, and sleeps on the batch's condition
//! variable once the queue is empty. A worker pops a job, reads, stores the result in the
//! job's slot and decrements the count. Every job completes its slot exactly once: when a
//! read panics, the job's `Drop` stores an error instead, so the caller never waits forever;
//! the worker survives (`catch_unwind`). The caller returns only when the count is zero, so
//! no read of a batch is still running when `read_batch` returns (`docs/design.md` §10.2).

use super::{RandomAccessFile, ReadRequest};
use crate::error::{Error, Result};
use parking_lot::{Condvar, Mutex};
use std::collections::VecDeque;
use std::io;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, OnceLock};

/// Threads of the pool: the most reads a batch has in flight at once (plus the caller's own).
/// 16 reaches most of a datacenter SSD's 4 KiB random-read rate (queue depth 16-32) while
/// idle threads cost only their stacks.
pub const POOL_THREADS: usize = 16;

/// Jobs the queue holds at most; beyond that callers run their reads themselves.
const QUEUE_LIMIT: usize = 4096;

/// Stack of a pool thread: a read needs little (buffers live on the heap).
const STACK_BYTES: usize = 256 << 10;

struct BatchState {
    results: Vec<Option<Result<Vec<u8>>>>,
    remaining: usize,
}

struct Batch {
    state: Mutex<BatchState>,
    done: Condvar,
}

impl Batch {
    fn complete(&self, slot: usize, r: Result<Vec<u8>>) {
        let mut st = self.state.lock();
        debug_assert!(st.results[slot].is_none(), "read slot completed twice");
        st.results[slot] = Some(r);
        st.remaining -= 1;
        if st.remaining == 0 {
            self.done.notify_all();
        }
    }

    fn is_done(&self) -> bool {
        self.state.lock().remaining == 0
    }
}

/// One read of a batch, owned by whichever thread runs it.
struct Job {
    file: Arc<dyn RandomAccessFile>,
    offset: u64,
    len: usize,
    slot: usize,
    batch: Arc<Batch>,
    finished: bool,
}

impl Job {
    fn run(mut self) {
        let mut buf = vec![0u8; self.len];
        let r = self.file.read_at(self.offset, &mut buf).map(|()| buf);
        self.finished = true;
        self.batch.complete(self.slot, r);
    }
}

impl Drop for Job {
    fn drop(&mut self) {
        if !self.finished {
            let e = io::Error::other("read abandoned: the thread running it panicked");
            self.batch
                .complete(self.slot, Err(Error::io("read", self.file.path(), e)));
        }
    }
}

struct Pool {
    queue: Mutex<VecDeque<Job>>,
    work: Condvar,
}

fn worker(pool: &'static Pool) {
    loop {
        let job = {
            let mut q = pool.queue.lock();
            loop {
                if let Some(j) = q.pop_front() {
                    break j;
                }
                pool.work.wait(&mut q);
            }
        };
        // A panic drops the job, whose `Drop` completes its slot with an error.
        let _ = catch_unwind(AssertUnwindSafe(move || job.run()));
    }
}

fn pool() -> &'static Pool {
    static POOL: OnceLock<&'static Pool> = OnceLock::new();
    POOL.get_or_init(|| {
        // Leaked on purpose: the threads live as long as the process and refer to it.
        let pool: &'static Pool = Box::leak(Box::new(Pool {
            queue: Mutex::new(VecDeque::new()),
            work: Condvar::new(),
        }));
        for i in 0..POOL_THREADS {
            // A thread that cannot be spawned is not fatal: callers run whatever no thread
            // takes from the queue themselves (they help until their batch is complete).
            let _ = std::thread::Builder::new()
                .name(format!("strata-io-{i}"))
                .stack_size(STACK_BYTES)
                .spawn(move || worker(pool));
        }
        pool
    })
}

/// Reads every request on the pool (see the module docs). Results in request order.
pub(crate) fn read_batch(reqs: &[ReadRequest<'_>]) -> Vec<Result<Vec<u8>>> {
    let n = reqs.len();
    let batch = Arc::new(Batch {
        state: Mutex::new(BatchState {
            results: (0..n).map(|_| None).collect(),
            remaining: n,
        }),
        done: Condvar::new(),
    });
    let job = |slot: usize| {
        let r = &reqs[slot];
        Job {
            file: Arc::clone(r.file),
            offset: r.offset,
            len: r.len,
            slot,
            batch: Arc::clone(&batch),
            finished: false,
        }
    };
    let pool = pool();
    let mut mine = Vec::new();
    if n > 0 {
        mine.push(job(0));
    }
    let mut queued = 0;
    {
        let mut q = pool.queue.lock();
        for slot in 1..n {
            if q.len() < QUEUE_LIMIT {
                q.push_back(job(slot));
                queued += 1;
            } else {
                mine.push(job(slot));
            }
        }
    }
    for _ in 0..queued.min(POOL_THREADS) {
        pool.work.notify_one();
    }
    for j in mine {
        j.run();
    }
    // Help until the batch is complete, then sleep for the reads still running elsewhere.
    while !batch.is_done() {
        let next = pool.queue.lock().pop_front();
        match next {
            Some(j) => j.run(),
            None => {
                let mut st = batch.state.lock();
                while st.remaining > 0 {
                    batch.done.wait(&mut st);
                }
            }
        }
    }
    let results = std::mem::take(&mut batch.state.lock().results);
    results
        .into_iter()
        .map(|r| {
            r.unwrap_or_else(|| {
                Err(Error::io(
                    "read",
                    "(batched read)",
                    io::Error::other("read slot left empty"),
                ))
            })
        })
        .collect()
}
