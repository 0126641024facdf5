//! Publication in sequence order: batches are applied to the memtable concurrently and in
//! any order, but become visible to readers strictly in sequence order, each batch all at
//! once.
//!
//! Every reservation pushes a [`Slot`] onto the queue, in sequence order (the reservation
//! lock is held while it pushes). A writer whose batch is applied marks its slot done; then
//! whoever marks a slot done pops every done slot at the front, moving the visible sequence
//! to the last one's end, and unparks their threads. A writer whose slot is not at the front
//! parks until an earlier writer publishes it: it waits only for the batches before its own,
//! and only their publisher wakes it. Nobody else is woken.

use crate::key::SeqNo;
use parking_lot::{Condvar, Mutex};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::Thread;

/// One reserved batch on its way to visibility.
pub(super) struct Slot {
    /// The batch's last sequence number.
    last_seq: SeqNo,
    /// Applied (or given up on): may be published. Written under the queue's lock.
    done: AtomicBool,
    /// Visible to readers.
    published: AtomicBool,
    /// The writer's thread, unparked when the slot is published by someone else.
    thread: Thread,
}

pub(super) struct Publisher {
    /// Reserved slots not yet published, in sequence order.
    queue: Mutex<VecDeque<Arc<Slot>>>,
    /// Notified when the queue becomes empty (an exclusive turn waits for that).
    drained: Condvar,
    /// The last published sequence number.
    visible: AtomicU64,
}

impl Publisher {
    pub fn new(last_seq: SeqNo) -> Publisher {
        Publisher {
            queue: Mutex::new(VecDeque::new()),
            drained: Condvar::new(),
            visible: AtomicU64::new(last_seq),
        }
    }

    pub fn visible(&self) -> SeqNo {
        self.visible.load(Ordering::Acquire)
    }

    /// Adds the slot of a batch ending at `last_seq`, reserved by the calling thread. The
    /// caller holds the reservation lock, so slots enter in sequence order.
    pub fn push(&self, last_seq: SeqNo) -> Arc<Slot> {
        let slot = Arc::new(Slot {
            last_seq,
            done: AtomicBool::new(false),
            published: AtomicBool::new(false),
            thread: std::thread::current(),
        });
        self.queue.lock().push_back(slot.clone());
        slot
    }

    /// Marks `slot` done and returns once it is visible (with every batch before it).
    pub fn publish(&self, slot: &Arc<Slot>) {
        // The other writers to wake (none when one writes alone: no allocation then).
        let mut woken = Vec::new();
        {
            let mut q = self.queue.lock();
            slot.done.store(true, Ordering::Relaxed);
            while q.front().is_some_and(|s| s.done.load(Ordering::Relaxed)) {
                let s = q.pop_front().expect("front exists");
                // In order, under the lock: the visible sequence only moves forward, and
                // (Release) every entry of the batches up to it was inserted before.
                self.visible.store(s.last_seq, Ordering::Release);
                s.published.store(true, Ordering::Release);
                if !Arc::ptr_eq(&s, slot) {
                    woken.push(s);
                }
            }
            if q.is_empty() {
                self.drained.notify_all();
            }
        }
        for s in woken {
            s.thread.unpark();
        }
        // `park` may return spuriously or on an old token: the flag decides.
        while !slot.published.load(Ordering::Acquire) {
            std::thread::park();
        }
    }

    /// Waits until every reserved slot is published. The caller has stopped new
    /// reservations.
    pub fn wait_drained(&self) {
        let mut q = self.queue.lock();
        while !q.is_empty() {
            self.drained.wait(&mut q);
        }
    }
}
