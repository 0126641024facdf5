//! FAILOVER [TO host port [FORCE]] [ABORT] [TIMEOUT ms] (Redis 7.0's `failoverCommand`
//! and `updateFailoverStatus`, replication.c): a master hands its role to one of its
//! replicas without losing a write.
//!
//! 1. *waiting-for-sync*: writes are held (`Pause::hold_writes`, Redis's failover pause),
//!    the replicas are asked for an ACK, and a watcher thread waits until the target (or,
//!    without `TO`, any replica) acknowledged the whole stream. Past `TIMEOUT` the failover
//!    is aborted, or with `FORCE` goes on anyway.
//! 2. *failover-in-progress*: the master becomes a replica of the target and asks it
//!    `PSYNC <its replid> <offset+1> FAILOVER` (`replica/link.rs`); the target, whose
//!    replication id is that one, promotes itself first (`cmd/replication.rs`). The
//!    target's `+CONTINUE` or `+FULLRESYNC` ends the failover; an error aborts it: the node
//!    is a master again. Either way the held writes then run (as a replica they get
//!    `-READONLY`).
//!
//! FAILOVER ABORT ends either phase the same way. `master_failover_state` in INFO names
//! the phase.
//!
//! **Protocol between threads.** The phase lives under one mutex; each FAILOVER bumps a
//! generation, so a watcher of an earlier failover stops at its next look. The link thread
//! reports the PSYNC answer through [`Failover::psync_answered`].

use crate::server::Shared;
use parking_lot::Mutex;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Where a failover is (INFO's `master_failover_state`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Phase {
    #[default]
    None,
    WaitForSync,
    InProgress,
}

impl Phase {
    pub fn name(self) -> &'static str {
        match self {
            Phase::None => "no-failover",
            Phase::WaitForSync => "waiting-for-sync",
            Phase::InProgress => "failover-in-progress",
        }
    }
}

#[derive(Default)]
struct State {
    phase: Phase,
    target: Option<(String, u16)>,
    end: Option<Instant>,
    force: bool,
    generation: u64,
}

/// The failover state of a master (`Master::failover`).
#[derive(Default)]
pub struct Failover {
    st: Mutex<State>,
}

/// What FAILOVER asked, parsed.
#[derive(Debug, PartialEq, Eq)]
pub struct Request {
    pub target: Option<(String, u16)>,
    pub timeout_ms: Option<u64>,
    pub force: bool,
}

const ERR_SYNTAX: &str = "ERR syntax error";
const ERR_INT: &str = "ERR value is not an integer or out of range";

/// Parses FAILOVER's arguments (after the name) as Redis does: each option once, `TO`
/// with a host and an integer port, `TIMEOUT` with a positive integer. `ABORT` alone is
/// handled before.
pub fn parse(args: &[&[u8]]) -> Result<Request, &'static str> {
    let mut req = Request {
        target: None,
        timeout_ms: None,
        force: false,
    };
    let int = |b: &[u8]| crate::protocol::parse::parse_i64(b).ok_or(ERR_INT);
    let mut j = 0;
    while j < args.len() {
        let a = args[j];
        if a.eq_ignore_ascii_case(b"timeout") && j + 1 < args.len() && req.timeout_ms.is_none() {
            let t = int(args[j + 1])?;
            if t <= 0 {
                return Err("ERR FAILOVER timeout must be greater than 0");
            }
            req.timeout_ms = Some(t as u64);
            j += 2;
        } else if a.eq_ignore_ascii_case(b"to") && j + 2 < args.len() && req.target.is_none() {
            let port = int(args[j + 2])?;
            let host = String::from_utf8_lossy(args[j + 1]).into_owned();
            // Redis keeps the port as a long; no replica listens on one out of range.
            req.target = Some((host, u16::try_from(port).unwrap_or(0)));
            j += 3;
        } else if a.eq_ignore_ascii_case(b"force") && !req.force {
            req.force = true;
            j += 1;
        } else {
            return Err(ERR_SYNTAX);
        }
    }
    Ok(req)
}

impl Failover {
    pub fn phase(&self) -> Phase {
        self.st.lock().phase
    }

    /// FAILOVER with `req`, after the command's own checks: validates against the replicas
    /// and starts the watcher. The reply's error text, as Redis's.
    pub fn start(&self, shared: &Arc<Shared>, req: Request) -> Result<(), &'static str> {
        let mut st = self.st.lock();
        if st.phase != Phase::None {
            return Err("ERR FAILOVER already in progress.");
        }
        if shared.replication.is_replica() {
            return Err("ERR FAILOVER is not valid when server is a replica.");
        }
        let replicas = shared.master.replicas.lock().clone();
        if replicas.is_empty() {
            return Err("ERR FAILOVER requires connected replicas.");
        }
        if req.force && (req.timeout_ms.is_none() || req.target.is_none()) {
            return Err(
                "ERR FAILOVER with force option requires both a timeout and target HOST and IP.",
            );
        }
        if let Some((host, port)) = &req.target {
            let Some(r) = replicas.iter().find(|r| r.ip == *host && r.port == *port) else {
                return Err("ERR FAILOVER target HOST and PORT is not a replica.");
            };
            if *r.state.lock() != "online" {
                return Err("ERR FAILOVER target replica is not online.");
            }
            eprintln!("strata-server: FAILOVER requested to {host}:{port}.");
        } else {
            eprintln!("strata-server: FAILOVER requested to any replica.");
        }
        st.generation += 1;
        st.phase = Phase::WaitForSync;
        st.target = req.target;
        st.force = req.force;
        st.end = req
            .timeout_ms
            .map(|t| Instant::now() + Duration::from_millis(t));
        shared.pause.hold_writes(true);
        let generation = st.generation;
        drop(st);
        shared.master.propagate_getack(shared);
        let me = shared.me.clone();
        let spawned = std::thread::Builder::new()
            .name("strata-failover".into())
            .spawn(move || watch(me, generation));
        if spawned.is_err() {
            self.abort(shared, "could not start the failover thread");
        }
        Ok(())
    }

    /// FAILOVER ABORT: `false` if no failover is in progress.
    pub fn abort_requested(&self, shared: &Shared) -> bool {
        if self.phase() == Phase::None {
            return false;
        }
        self.abort(shared, "Failover manually aborted");
        true
    }

    /// Redis's `abortFailover`: a failover past its hand-over makes this node a master
    /// again; the held writes run.
    pub fn abort(&self, shared: &Shared, reason: &str) {
        let mut st = self.st.lock();
        if st.phase == Phase::None {
            return;
        }
        eprintln!("strata-server: FAILOVER aborted: {reason}");
        if st.phase == Phase::InProgress {
            if let Some(shared) = shared.me.upgrade() {
                crate::cmd::replication::become_master(&shared);
            }
        }
        clear(&mut st, shared);
    }

    /// The target answered `PSYNC ... FAILOVER` (`ok`: `+CONTINUE` or `+FULLRESYNC`).
    /// Nothing happens unless a failover is handing over.
    pub fn psync_answered(&self, shared: &Shared, ok: bool) {
        if self.phase() != Phase::InProgress {
            return;
        }
        if ok {
            let mut st = self.st.lock();
            eprintln!("strata-server: FAILOVER to the new master completed.");
            clear(&mut st, shared);
        } else {
            self.abort(shared, "Failover target rejected psync request");
        }
    }

    /// Whether the next PSYNC of this node's link carries `FAILOVER`.
    pub fn handing_over(&self) -> bool {
        self.phase() == Phase::InProgress
    }
}

fn clear(st: &mut State, shared: &Shared) {
    st.phase = Phase::None;
    st.target = None;
    st.end = None;
    st.force = false;
    shared.pause.hold_writes(false);
}

/// Redis's `updateFailoverStatus`, every 10 ms: the timeout, then a replica that
/// acknowledged the whole stream; then the hand-over.
fn watch(me: std::sync::Weak<Shared>, generation: u64) {
    loop {
        std::thread::sleep(Duration::from_millis(10));
        let Some(shared) = me.upgrade() else { return };
        let f = &shared.master.failover;
        let mut st = f.st.lock();
        if st.generation != generation || st.phase != Phase::WaitForSync {
            return;
        }
        if st.end.is_some_and(|e| Instant::now() >= e) {
            if st.force {
                let (host, port) = st.target.clone().expect("FORCE needs a target");
                eprintln!(
                    "strata-server: FAILOVER to {host}:{port} time out exceeded, failing over."
                );
                st.phase = Phase::InProgress;
                drop(st);
                hand_over(&shared, host, port);
            } else {
                drop(st);
                f.abort(&shared, "Replica never caught up before timeout");
            }
            return;
        }
        let end = shared.master.offset().unwrap_or(0);
        let caught_up = shared.master.replicas.lock().iter().find_map(|r| {
            let matches = st
                .target
                .as_ref()
                .is_none_or(|(h, p)| r.ip == *h && r.port == *p);
            (matches && r.ack.load(Ordering::Relaxed) >= end).then(|| (r.ip.clone(), r.port))
        });
        if let Some((host, port)) = caught_up {
            eprintln!("strata-server: Failover target {host}:{port} is synced, failing over.");
            st.target = Some((host.clone(), port));
            st.phase = Phase::InProgress;
            drop(st);
            hand_over(&shared, host, port);
            return;
        }
    }
}

/// This node follows the target, asking to continue its own stream (its data is that
/// stream up to the log's end: writes are held; `Replication::follow`).
fn hand_over(shared: &Arc<Shared>, host: String, port: u16) {
    crate::cmd::replication::become_replica(shared, host, port);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(args: &[&str]) -> Result<Request, &'static str> {
        let a: Vec<&[u8]> = args.iter().map(|s| s.as_bytes()).collect();
        parse(&a)
    }

    #[test]
    fn arguments_as_redis_reads_them() {
        assert_eq!(
            p(&[]),
            Ok(Request {
                target: None,
                timeout_ms: None,
                force: false
            })
        );
        assert_eq!(
            p(&["to", "h", "7000", "force", "TIMEOUT", "50"]),
            Ok(Request {
                target: Some(("h".into(), 7000)),
                timeout_ms: Some(50),
                force: true
            })
        );
        assert_eq!(
            p(&["timeout", "0"]),
            Err("ERR FAILOVER timeout must be greater than 0")
        );
        assert_eq!(
            p(&["timeout", "-5"]),
            Err("ERR FAILOVER timeout must be greater than 0")
        );
        assert_eq!(p(&["timeout", "x"]), Err(ERR_INT));
        assert_eq!(p(&["to", "h", "x"]), Err(ERR_INT));
        assert_eq!(p(&["to", "h"]), Err(ERR_SYNTAX));
        assert_eq!(p(&["timeout"]), Err(ERR_SYNTAX));
        assert_eq!(p(&["force", "force"]), Err(ERR_SYNTAX));
        assert_eq!(p(&["timeout", "1", "timeout", "2"]), Err(ERR_SYNTAX));
        assert_eq!(p(&["abort", "timeout", "1"]), Err(ERR_SYNTAX));
        assert_eq!(p(&["bogus"]), Err(ERR_SYNTAX));
    }

    #[test]
    fn phases_are_named_as_in_info() {
        assert_eq!(Phase::None.name(), "no-failover");
        assert_eq!(Phase::WaitForSync.name(), "waiting-for-sync");
        assert_eq!(Phase::InProgress.name(), "failover-in-progress");
    }
}
