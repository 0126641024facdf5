//! CLIENT PAUSE and CLIENT UNPAUSE (Redis 7.0's `pauseClients`, networking.c): for a time,
//! clients' commands wait before they run: every command (`ALL`), or only those that write
//! or may replicate (`WRITE`: the write commands, the `may_replicate` ones such as PUBLISH,
//! EVAL and FCALL, and an EXEC with such a command queued), while reads go on. Active
//! expiry waits too under either mode, as in Redis (lazy expiry still deletes here).
//!
//! **Protocol.** The pause is a deadline and a mode behind a mutex, with an atomic flag so
//! that a command pays one relaxed load when nothing is paused. A connection whose next
//! command is held (`conn.rs`) first writes the replies before it, then waits on
//! [`Pause::ended`] (a `Notify` woken by CLIENT UNPAUSE, or the deadline) and runs the
//! command as soon as the pause no longer holds it. A new pause extends the deadline and
//! never weakens the mode (`ALL` over `WRITE`), as Redis's.
//!
//! FAILOVER holds writes too, as a pause of its own (Redis's `PAUSE_DURING_FAILOVER`
//! purpose): without an end, not lifted by CLIENT UNPAUSE, only by [`Pause::hold_writes`]
//! with `false` when the failover ends.
//!
//! **Writes admitted before a hold.** Redis pauses between two commands; here a write is
//! checked against the pause on its connection's thread and takes its key stripes a moment
//! later, so a hold must also wait for the writes that passed the check and are on their
//! way to their stripes. A connection counts such a write in a [`Gate`] before it checks
//! the pause and stops counting it once the write holds its stripes or is done (the end
//! of the connection's step that ran or queued it); [`Pause::hold_writes_and_drain`] sets
//! the hold, then waits for the counts to reach zero. Both sides use sequentially
//! consistent operations (the count's increment, then the load of the hold; the hold's
//! store, then the loads of the counts), so a write either sees the hold or is seen by
//! the drain. The counts are spread over cache-line-sized slots picked by connection id,
//! so connections on different cores do not share one counter.
//!
//! Layer: services (above store and types; below commands).

use crate::cmd::table::Spec;
use crate::cmd::{flag, lookup_argv, ConnState, Found};
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// What a pause holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Mode {
    /// Commands that write or may replicate.
    Write,
    /// Every command.
    All,
}

#[derive(Default)]
struct State {
    /// End of the pause and its mode (`None`: not paused).
    until: Option<(Instant, Mode)>,
}

/// Slots of the count of admitted writes ([`Gate`]).
const GATE_SLOTS: usize = 16;

/// One slot of the count, alone on its cache line.
#[derive(Default)]
#[repr(align(64))]
struct GateSlot(AtomicU64);

/// The server's pause (see the module comment).
#[derive(Default)]
pub struct Pause {
    active: AtomicBool,
    /// FAILOVER's hold on writes (see the module comment).
    failover: AtomicBool,
    state: Mutex<State>,
    ended: Notify,
    /// Writes admitted past the pause check and not yet holding their stripes, by slot.
    admitted: [GateSlot; GATE_SLOTS],
}

/// A connection's count of the writes it admitted in one step (see the module comment):
/// released when dropped.
pub struct Gate<'a> {
    pause: &'a Pause,
    slot: &'a AtomicU64,
    n: u64,
}

impl Gate<'_> {
    /// Whether `found` may run now: counts it first if it writes, then asks the pause
    /// (`released`: a request just released from a pause, which only FAILOVER's hold can
    /// stop again). A held request is not counted.
    pub fn admit(&mut self, found: &Found, conn: &ConnState, released: bool) -> bool {
        let write = holds_in(Mode::Write, found, conn);
        if write {
            self.slot.fetch_add(1, Ordering::SeqCst);
            self.n += 1;
        }
        let held = if released {
            write && self.pause.failover.load(Ordering::SeqCst)
        } else {
            self.pause.holds(found, conn)
        };
        if held && write {
            self.slot.fetch_sub(1, Ordering::SeqCst);
            self.n -= 1;
        }
        !held
    }
}

impl Drop for Gate<'_> {
    fn drop(&mut self) {
        if self.n > 0 {
            self.slot.fetch_sub(self.n, Ordering::SeqCst);
        }
    }
}

impl Pause {
    /// CLIENT PAUSE: holds `mode`'s commands until `until` (a later end and a stronger mode
    /// of a running pause are kept).
    pub fn pause(&self, until: Instant, mode: Mode) {
        let mut st = self.state.lock();
        let (end, m) = match st.until {
            Some((e, m)) => (e.max(until), m.max(mode)),
            None => (until, mode),
        };
        st.until = Some((end, m));
        self.active.store(true, Ordering::SeqCst);
    }

    /// CLIENT UNPAUSE: held commands run.
    pub fn unpause(&self) {
        self.state.lock().until = None;
        self.active.store(false, Ordering::SeqCst);
        self.ended.notify_waiters();
    }

    /// FAILOVER's hold on writes: on while it waits for its replica and hands over,
    /// off (held commands run) when it ends.
    pub fn hold_writes(&self, on: bool) {
        self.failover.store(on, Ordering::SeqCst);
        if !on {
            self.ended.notify_waiters();
        }
    }

    /// A connection's gate for one step (connection `id` picks its slot).
    pub fn gate(&self, id: u64) -> Gate<'_> {
        Gate {
            pause: self,
            slot: &self.admitted[(id % GATE_SLOTS as u64) as usize].0,
            n: 0,
        }
    }

    /// FAILOVER's hold on writes, then a wait until no write admitted before it is still
    /// on its way to its stripes (see the module comment); `false` if some still were
    /// after `limit` (the hold stays on: the caller decides). A write that holds its
    /// stripes is the caller's to wait for, by taking every stripe.
    pub fn hold_writes_and_drain(&self, limit: Duration) -> bool {
        self.hold_writes(true);
        let end = Instant::now() + limit;
        loop {
            let admitted: u64 = self
                .admitted
                .iter()
                .map(|s| s.0.load(Ordering::SeqCst))
                .sum();
            if admitted == 0 {
                return true;
            }
            if Instant::now() >= end {
                return false;
            }
            std::thread::sleep(Duration::from_micros(100));
        }
    }

    /// The mode in force now, if any (an expired pause ends here).
    pub fn mode(&self) -> Option<Mode> {
        // Sequentially consistent: a [`Gate`] counts a write before this load.
        let held = self.failover.load(Ordering::SeqCst).then_some(Mode::Write);
        if !self.active.load(Ordering::Relaxed) {
            return held;
        }
        let mut st = self.state.lock();
        match st.until {
            Some((end, m)) if Instant::now() < end => Some(m),
            _ => {
                st.until = None;
                self.active.store(false, Ordering::SeqCst);
                drop(st);
                self.ended.notify_waiters();
                held
            }
        }
    }

    /// When the pause in force ends, if one is.
    pub fn deadline(&self) -> Option<Instant> {
        self.mode()?;
        self.state.lock().until.map(|(e, _)| e)
    }

    /// Whether the pause holds a request: `found` as the connection looked it up, `conn`'s
    /// transaction state (a command queued in MULTI is not held; its EXEC is, if a queued
    /// command writes).
    pub fn holds(&self, found: &Found, conn: &ConnState) -> bool {
        match self.mode() {
            Some(mode) => holds_in(mode, found, conn),
            None => false,
        }
    }

    /// Whether active expiry must wait (any pause, as Redis's `checkClientPauseTimeoutAndReturnIfPaused`).
    pub fn expiry_paused(&self) -> bool {
        self.mode().is_some()
    }

    /// Resolves when the pause may have ended (CLIENT UNPAUSE or a new state); the caller
    /// checks again, and sleeps until [`Pause::deadline`] meanwhile.
    pub async fn ended(&self) {
        let notified = self.ended.notified();
        let deadline = self.deadline();
        match deadline {
            // FAILOVER's hold has no end: woken when it is lifted.
            None if self.failover.load(Ordering::SeqCst) => notified.await,
            None => {}
            Some(d) => {
                tokio::select! {
                    () = notified => {}
                    () = tokio::time::sleep_until(d.into()) => {}
                }
            }
        }
    }
}

/// Whether a pause of `mode` holds `found` for a client in state `conn`.
fn holds_in(mode: Mode, found: &Found, conn: &ConnState) -> bool {
    let Found::Command(spec, _) = found else {
        return mode == Mode::All;
    };
    if mode == Mode::All {
        return true;
    }
    if spec.name == "exec" {
        return conn.multi.as_ref().is_some_and(|m| {
            m.queued
                .iter()
                .any(|a| lookup_argv(a).is_some_and(may_replicate))
        });
    }
    conn.multi.is_none() && may_replicate(spec)
}

/// Redis's `is_may_replicate_command`: writes, and the `may_replicate` commands (a trait of
/// the table's entries: Redis's COMMAND INFO leaves the flag out).
fn may_replicate(spec: &Spec) -> bool {
    spec.has(flag::WRITE) || spec.has_trait(crate::cmd::table::traits::MAY_REPLICATE)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn pause_extends_and_never_weakens() {
        let p = Pause::default();
        assert_eq!(p.mode(), None);
        let now = Instant::now();
        p.pause(now + Duration::from_secs(60), Mode::All);
        p.pause(now + Duration::from_secs(1), Mode::Write);
        assert_eq!(p.mode(), Some(Mode::All));
        assert!(p.deadline().unwrap() >= now + Duration::from_secs(60));
        p.unpause();
        assert_eq!(p.mode(), None);
        p.pause(Instant::now(), Mode::Write);
        assert_eq!(p.mode(), None, "a pause whose end has passed is over");
        assert!(!p.expiry_paused());
    }

    fn conn() -> ConnState {
        let t = crate::test_server::TestServer::in_memory();
        let info = std::sync::Arc::new(crate::clients::ClientInfo::new(
            7,
            "a:1".into(),
            "a:2".into(),
            1,
            false,
        ));
        t.shared().new_conn(info)
    }

    fn found(name: &str) -> Found {
        let found = crate::cmd::find_command(&[bytes::Bytes::from(name.to_string())]);
        assert!(matches!(found, Found::Command(..)), "{name}");
        found
    }

    #[test]
    fn may_replicate_is_writes_and_the_tables_may_replicate_entries() {
        let spec = |name: &str| match found(name) {
            Found::Command(spec, _) => spec,
            _ => unreachable!("found() checked it"),
        };
        for name in ["set", "publish", "spublish", "eval", "evalsha", "fcall"] {
            assert!(may_replicate(spec(name)), "{name}");
        }
        for name in [
            "get",
            "subscribe",
            "eval_ro",
            "evalsha_ro",
            "fcall_ro",
            "wait",
        ] {
            assert!(!may_replicate(spec(name)), "{name}");
        }
    }

    #[test]
    fn a_gate_counts_admitted_writes_until_dropped_and_the_hold_drains_them() {
        let p = Pause::default();
        let c = conn();
        let mut g = p.gate(c.id);
        assert!(g.admit(&found("get"), &c, false));
        assert_eq!(g.n, 0, "reads are not counted");
        assert!(g.admit(&found("set"), &c, false));
        assert!(g.admit(&found("publish"), &c, false));
        assert_eq!(g.n, 2);
        // Admitted writes still on their way: the hold is set but does not drain.
        assert!(!p.hold_writes_and_drain(Duration::from_millis(20)));
        assert_eq!(p.mode(), Some(Mode::Write));
        // A write checked now is held and not counted; a read goes on.
        let mut g2 = p.gate(c.id + 1);
        assert!(!g2.admit(&found("set"), &c, false));
        assert!(
            !g2.admit(&found("set"), &c, true),
            "a released write is held again"
        );
        assert!(g2.admit(&found("get"), &c, true));
        assert_eq!(g2.n, 0);
        drop(g);
        assert!(p.hold_writes_and_drain(Duration::from_millis(20)));
        p.hold_writes(false);
        assert_eq!(p.mode(), None);
    }

    #[test]
    fn the_drain_waits_for_a_write_admitted_on_another_thread() {
        let p = std::sync::Arc::new(Pause::default());
        let c = conn();
        let (tx, rx) = std::sync::mpsc::channel();
        let p2 = p.clone();
        let writer = std::thread::spawn(move || {
            let mut g = p2.gate(c.id);
            assert!(g.admit(&found("set"), &c, false));
            tx.send(()).unwrap();
            std::thread::sleep(Duration::from_millis(100));
            let leaving = Instant::now();
            drop(g);
            leaving
        });
        rx.recv().unwrap();
        assert!(p.hold_writes_and_drain(Duration::from_secs(10)));
        let drained = Instant::now();
        let leaving = writer.join().unwrap();
        assert!(
            drained >= leaving,
            "the drain ended before the write left its gate"
        );
    }
}
