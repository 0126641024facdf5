//! How a worker hands a result back: a one-shot slot that a user thread waits on (sync API) or
//! polls as a future ([`Pending`]), or a callback run on the worker thread (async API).
//!
//! The worker calls [`Reply::send`] exactly once; a `Reply` dropped without a result (the
//! worker died, the queue was closed, the request was never sent) sends an error instead, so
//! no caller ever waits forever (`docs/design.md` §11.3).

use parking_lot::{Condvar, Mutex};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use strata_engine::{Error, Result};

enum SlotState<T> {
    Waiting(Option<Waker>),
    Done(Result<T>),
    Taken,
}

struct Slot<T> {
    st: Mutex<SlotState<T>>,
    cv: Condvar,
}

/// A callback run with the result, on the worker thread.
pub type Callback<T> = Box<dyn FnOnce(Result<T>) + Send + 'static>;

/// The worker's end of a request.
pub(crate) struct Reply<T> {
    inner: Option<ReplyTo<T>>,
}

enum ReplyTo<T> {
    Slot(Arc<Slot<T>>),
    Callback(Callback<T>),
}

impl<T> Reply<T> {
    /// A reply waited on through the returned [`Pending`].
    pub(crate) fn slot() -> (Reply<T>, Pending<T>) {
        let slot = Arc::new(Slot {
            st: Mutex::new(SlotState::Waiting(None)),
            cv: Condvar::new(),
        });
        (
            Reply {
                inner: Some(ReplyTo::Slot(slot.clone())),
            },
            Pending { slot },
        )
    }

    /// A reply that runs `cb`.
    pub(crate) fn callback(cb: Callback<T>) -> Reply<T> {
        Reply {
            inner: Some(ReplyTo::Callback(cb)),
        }
    }

    /// Delivers the result (once).
    pub(crate) fn send(mut self, r: Result<T>) {
        if let Some(to) = self.inner.take() {
            deliver(to, r);
        }
    }
}

fn deliver<T>(to: ReplyTo<T>, r: Result<T>) {
    match to {
        ReplyTo::Callback(cb) => cb(r),
        ReplyTo::Slot(slot) => {
            let waker = {
                let mut st = slot.st.lock();
                let prev = std::mem::replace(&mut *st, SlotState::Done(r));
                match prev {
                    SlotState::Waiting(w) => w,
                    _ => None,
                }
            };
            slot.cv.notify_one();
            if let Some(w) = waker {
                w.wake();
            }
        }
    }
}

impl<T> Drop for Reply<T> {
    fn drop(&mut self) {
        if let Some(to) = self.inner.take() {
            if std::thread::panicking() {
                crate::worker::note_panic();
            }
            deliver(
                to,
                Err(Error::Poisoned(
                    "the request was dropped before a shard worker completed it (the worker \
                     failed or the database is closing)"
                        .to_string(),
                )),
            );
        }
    }
}

/// The result of an asynchronous request: `.wait()` blocks for it; as a [`Future`] it resolves
/// when the worker completes the request.
#[must_use = "the request runs anyway; drop the Pending to ignore its result"]
pub struct Pending<T> {
    slot: Arc<Slot<T>>,
}

impl<T> Pending<T> {
    /// Blocks until the result is there.
    pub fn wait(self) -> Result<T> {
        let mut st = self.slot.st.lock();
        loop {
            match std::mem::replace(&mut *st, SlotState::Taken) {
                SlotState::Done(r) => return r,
                SlotState::Taken => return Err(Error::Closed),
                w @ SlotState::Waiting(_) => {
                    *st = w;
                    self.slot.cv.wait(&mut st);
                }
            }
        }
    }

    /// Whether the result is there (`wait` would not block).
    pub fn is_ready(&self) -> bool {
        matches!(*self.slot.st.lock(), SlotState::Done(_))
    }
}

impl<T> Future for Pending<T> {
    type Output = Result<T>;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<T>> {
        let mut st = self.slot.st.lock();
        match std::mem::replace(&mut *st, SlotState::Taken) {
            SlotState::Done(r) => Poll::Ready(r),
            SlotState::Taken => Poll::Ready(Err(Error::Closed)),
            SlotState::Waiting(_) => {
                *st = SlotState::Waiting(Some(cx.waker().clone()));
                Poll::Pending
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slot_callback_and_drop() {
        let (r, p) = Reply::<u32>::slot();
        assert!(!p.is_ready());
        let t = std::thread::spawn(move || r.send(Ok(7)));
        assert_eq!(p.wait().unwrap(), 7);
        t.join().unwrap();

        let (r, p) = Reply::<u32>::slot();
        drop(r);
        assert!(matches!(p.wait(), Err(Error::Poisoned(_))));

        let got = Arc::new(Mutex::new(None));
        let g = got.clone();
        let r = Reply::<u32>::callback(Box::new(move |x| *g.lock() = Some(x.is_ok())));
        r.send(Ok(1));
        assert_eq!(*got.lock(), Some(true));
    }

    #[test]
    fn future_resolves() {
        struct Flag(std::sync::atomic::AtomicBool);
        impl std::task::Wake for Flag {
            fn wake(self: Arc<Self>) {
                self.0.store(true, std::sync::atomic::Ordering::SeqCst);
            }
        }
        let flag = Arc::new(Flag(Default::default()));
        let waker = Waker::from(flag.clone());
        let mut cx = Context::from_waker(&waker);
        let (r, mut p) = Reply::<u32>::slot();
        assert!(Pin::new(&mut p).poll(&mut cx).is_pending());
        r.send(Ok(3));
        assert!(flag.0.load(std::sync::atomic::Ordering::SeqCst));
        match Pin::new(&mut p).poll(&mut cx) {
            Poll::Ready(Ok(3)) => {}
            _ => panic!("not ready"),
        }
    }
}
