//! The sequencer: one total order of effects consistent with every shard's commits
//! (`docs/design.md` §13.29).
//!
//! **Rule.** A command's effects are appended to the replication log after its write
//! committed and before it releases its exclusion: on the connection's thread before its
//! stripes are released (`cmd::run_locked`, an EXEC's or a script's front transaction in
//! `Tx::run_exec_then`); on a worker in the completion of its group, which runs in
//! group order after the group's engine write and before the worker starts the next group
//! (`exec.rs`, `conn.rs` `run_in_place`). Two commands that touch a key are ordered by the
//! key's exclusion, so the log orders them as their commits did.
//!
//! **The cut.** Every command that propagates holds a read guard of `lock` from before its
//! engine write until after its append. A full sync takes the write guard, reads the log's
//! end, pins it and takes the engine snapshot in that one step: every write in the snapshot
//! is in the log before the offset, and every write after it is appended after. Readers use
//! `read_recursive` (a worker's group holds several; a connection-thread holder may wait on
//! a worker): they never wait for a writer that is only waiting, so no holder waits on
//! another holder through the lock. The writer holds it only for the snapshot's barrier.
//! The price: under a load that always overlaps readers, the full sync waits for a gap.
//!
//! **Activation.** Until the first replica connects nothing is appended and the only cost
//! per command is one atomic load (`Master::enter` returning `None`). A command decides once,
//! after its stripes are held, whether it propagates (it holds a guard) or not. Activation
//! sets the flag, then takes every stripe exclusively once: a command that saw the flag
//! unset and holds stripes has finished before the first cut.

use parking_lot::{RwLock, RwLockReadGuard};
use std::sync::atomic::{AtomicBool, Ordering};

/// Held by a command from before its write until after its append (moved into a worker's
/// completion, so it owns its lock's lifetime).
pub type SeqGuard = RwLockReadGuard<'static, ()>;

pub struct Sequencer {
    active: AtomicBool,
    /// Whether the master's history file says the data is the log (`history.rs`): a
    /// writer removes it before it writes.
    pub quiet: super::history::Quiet,
    /// Leaked once per server: parking_lot has no owned recursive read guard, and a guard
    /// must outlive the command that took it (a worker's completion holds it).
    lock: &'static RwLock<()>,
}

impl Default for Sequencer {
    fn default() -> Self {
        Sequencer {
            active: AtomicBool::new(false),
            quiet: Default::default(),
            lock: Box::leak(Box::new(RwLock::new(()))),
        }
    }
}

impl Sequencer {
    /// Whether effects are appended (a replica has connected since the start).
    pub fn active(&self) -> bool {
        self.active.load(Ordering::Acquire)
    }

    /// A guard if effects are appended; `None` (one atomic load) otherwise. The holder may
    /// write: the history file goes first (`history.rs`).
    pub fn enter(&self) -> Option<SeqGuard> {
        let g = self.enter_quiet()?;
        self.quiet.busy();
        Some(g)
    }

    /// A guard for a holder that writes no data (a read on a worker, a PING appended).
    pub fn enter_quiet(&self) -> Option<SeqGuard> {
        if !self.active() {
            return None;
        }
        Some(self.lock.read_recursive())
    }

    pub(crate) fn activate(&self) {
        self.active.store(true, Ordering::Release);
    }

    /// Runs `f` with no command between its write and its append (a full sync's cut).
    pub fn cut<R>(&self, f: impl FnOnce() -> R) -> R {
        let _w = self.lock.write();
        f()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn inactive_costs_no_guard_and_the_cut_waits_for_holders() {
        let s = Arc::new(Sequencer::default());
        assert!(s.enter().is_none());
        s.activate();
        let g = s.enter().expect("active");
        // A second guard on the same thread while a writer waits does not deadlock.
        let s2 = s.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        let t = std::thread::spawn(move || s2.cut(|| tx.send(()).unwrap()));
        std::thread::sleep(std::time::Duration::from_millis(50));
        let g2 = s.enter().expect("recursive");
        assert!(rx.try_recv().is_err(), "the cut waits for the holders");
        drop(g);
        drop(g2);
        rx.recv_timeout(std::time::Duration::from_secs(5)).unwrap();
        t.join().unwrap();
    }
}
