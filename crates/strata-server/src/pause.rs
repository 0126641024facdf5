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
//! Layer: services (above store and types; below commands).

use crate::cmd::table::Spec;
use crate::cmd::{flag, lookup_argv, ConnState, Found};
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;
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

/// The server's pause (see the module comment).
#[derive(Default)]
pub struct Pause {
    active: AtomicBool,
    /// FAILOVER's hold on writes (see the module comment).
    failover: AtomicBool,
    state: Mutex<State>,
    ended: Notify,
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

    /// The mode in force now, if any (an expired pause ends here).
    pub fn mode(&self) -> Option<Mode> {
        let held = self.failover.load(Ordering::Relaxed).then_some(Mode::Write);
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
        let Some(mode) = self.mode() else {
            return false;
        };
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

/// Commands Redis 7.0 flags `may_replicate` (its COMMAND INFO, so the table's metadata,
/// leaves the flag out) among those Strata implements: they publish or run scripts.
const MAY_REPLICATE_NAMES: &[&str] = &["publish", "spublish", "eval", "evalsha", "fcall"];

/// Redis's `is_may_replicate_command`: writes, and the `may_replicate` commands.
fn may_replicate(spec: &Spec) -> bool {
    spec.flags & (flag::WRITE | flag::MAY_REPLICATE) != 0
        || MAY_REPLICATE_NAMES.contains(&spec.name)
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
}
