//! Background read-ahead of separated values for forward scans (WiscKey 3.3.1: a scan that
//! reads values sequentially has the values of the range read ahead of it, in parallel).
//!
//! [`DbIterator`](super::DbIterator) reads the batch it needs now itself and hands the next
//! one to a [`PrefetchJob`]: the batch's keys and pointers, read on a small process-wide pool
//! of [`PREFETCH_THREADS`] threads through [`Vlog::read_many_into`] (the same reads and the same
//! verification as every other pointer read: checksum, length, kind, key), so the caller
//! consumes one batch while the next is read. At most one job per iterator is in flight.
//!
//! A job nobody has started when its iterator needs it is run by the iterator itself (a busy
//! pool never makes a scan wait behind other scans). Dropping a job (the iterator moved
//! elsewhere or was dropped) cancels it if it has not started and otherwise waits for its
//! reads to finish: once the job is gone no read of it is running or will start, so a scan's
//! prefetch stops when the scan stops.

use crate::error::Result;
use crate::options::IoBackend;
use crate::vlog::{ValuePointer, Vlog, VlogFileSet};
use parking_lot::{Condvar, Mutex};
use std::collections::VecDeque;
use std::ops::Range;
use std::sync::{Arc, OnceLock};

/// Threads of the prefetch pool: jobs of this many scans are read at once. Each job's reads
/// are themselves batched (`Options::io_backend`), so a few threads keep many reads in flight.
pub const PREFETCH_THREADS: usize = 4;

/// What one job reads.
struct Work {
    vlog: Arc<Vlog>,
    files: Arc<VlogFileSet>,
    reqs: Vec<(Vec<u8>, ValuePointer)>,
    backend: IoBackend,
}

/// A job's values, back to back, and where each request's value is in them (or its error).
pub(crate) type Values = (Vec<u8>, Vec<Result<Range<usize>>>);

impl Work {
    fn run(self) -> Values {
        let keyed: Vec<(&[u8], ValuePointer)> =
            self.reqs.iter().map(|(k, p)| (k.as_slice(), *p)).collect();
        let vlog = &self.vlog;
        let backend = self.backend;
        let mut values = Vec::new();
        let results = vlog.read_many_into(
            &self.files,
            &keyed,
            true,
            |r| crate::io::read_batch(backend, &*vlog.fs, r).0,
            &mut values,
        );
        (values, results)
    }
}

enum State {
    /// Waiting in the pool's queue; whoever takes the work runs it.
    Queued(Work),
    Running,
    Done(Values),
    /// Cancelled before it started, or its results were taken.
    Finished,
}

struct Shared {
    state: Mutex<State>,
    done: Condvar,
}

impl Shared {
    /// Runs the job if nobody has taken it yet.
    fn run_if_queued(&self) {
        let work = {
            let mut st = self.state.lock();
            match std::mem::replace(&mut *st, State::Running) {
                State::Queued(w) => w,
                other => {
                    *st = other;
                    return;
                }
            }
        };
        let out = run_caught(work);
        *self.state.lock() = State::Done(out);
        self.done.notify_all();
    }
}

/// Runs `work`; a panic becomes an error per request (the waiting iterator must not hang).
fn run_caught(work: Work) -> Values {
    let n = work.reqs.len();
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| work.run())).unwrap_or_else(|_| {
        let errors = (0..n)
            .map(|_| {
                Err(crate::error::Error::InvalidArgument(
                    "value prefetch panicked".into(),
                ))
            })
            .collect();
        (Vec::new(), errors)
    })
}

/// Values of one look-ahead batch being read in the background.
pub(crate) struct PrefetchJob {
    shared: Arc<Shared>,
}

impl PrefetchJob {
    /// Queues the reads of `reqs` (keys and their pointers) on the prefetch pool.
    pub(crate) fn submit(
        vlog: Arc<Vlog>,
        files: Arc<VlogFileSet>,
        reqs: Vec<(Vec<u8>, ValuePointer)>,
        backend: IoBackend,
    ) -> PrefetchJob {
        let shared = Arc::new(Shared {
            state: Mutex::new(State::Queued(Work {
                vlog,
                files,
                reqs,
                backend,
            })),
            done: Condvar::new(),
        });
        pool().push(shared.clone());
        PrefetchJob { shared }
    }

    /// The values, in request order: run here if no pool thread has started the job, else
    /// waited for.
    pub(crate) fn wait(self) -> Values {
        self.shared.run_if_queued();
        let mut st = self.shared.state.lock();
        loop {
            match std::mem::replace(&mut *st, State::Finished) {
                State::Done(out) => return out,
                State::Running => {
                    *st = State::Running;
                    self.shared.done.wait(&mut st);
                }
                // Taken only by this handle: unreachable, answered as unread values.
                State::Queued(_) | State::Finished => return (Vec::new(), Vec::new()),
            }
        }
    }
}

impl Drop for PrefetchJob {
    /// Cancels the job if it has not started; waits for its reads if it has.
    fn drop(&mut self) {
        let mut st = self.shared.state.lock();
        loop {
            match &*st {
                State::Running => self.shared.done.wait(&mut st),
                _ => {
                    *st = State::Finished;
                    return;
                }
            }
        }
    }
}

struct Pool {
    queue: Mutex<VecDeque<Arc<Shared>>>,
    ready: Condvar,
}

impl Pool {
    fn push(&self, job: Arc<Shared>) {
        self.queue.lock().push_back(job);
        self.ready.notify_one();
    }

    fn work(&self) {
        loop {
            let job = {
                let mut q = self.queue.lock();
                loop {
                    if let Some(j) = q.pop_front() {
                        break j;
                    }
                    self.ready.wait(&mut q);
                }
            };
            job.run_if_queued();
        }
    }
}

/// The process-wide prefetch pool, started on first use. Where a thread cannot be spawned,
/// jobs stay queued and their iterators run them when they need the values.
fn pool() -> &'static Pool {
    static POOL: OnceLock<&'static Pool> = OnceLock::new();
    POOL.get_or_init(|| {
        let p: &'static Pool = Box::leak(Box::new(Pool {
            queue: Mutex::new(VecDeque::new()),
            ready: Condvar::new(),
        }));
        for i in 0..PREFETCH_THREADS {
            let _ = std::thread::Builder::new()
                .name(format!("strata-prefetch-{i}"))
                .stack_size(256 << 10)
                .spawn(move || p.work());
        }
        p
    })
}
