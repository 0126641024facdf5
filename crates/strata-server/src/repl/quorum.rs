//! `min-replicas-to-write` / `min-replicas-max-lag` (Redis's `checkGoodReplicasStatus` and
//! `refreshGoodSlavesCount`): a master refuses writes with `-NOREPLICAS` while fewer than
//! `min-replicas-to-write` replicas are *good*, i.e. online with their last `REPLCONF ACK`
//! at most `min-replicas-max-lag` seconds ago (whole seconds, as INFO's `lag=` shows).
//! Either directive at 0 turns the check off; a replica never applies it.
//!
//! The directives are parsed when they are set (at start and by CONFIG SET,
//! `Shared::apply_config`): a write pays one atomic load while the check is off. The count
//! is taken when a write asks (Redis refreshes it once a second and on each replica's
//! arrival and departure; counting at the write is never staler than that).

use super::ReplicaLink;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Redis's answer to a write refused for want of good replicas.
pub const ERR_NOREPLICAS: &str = "NOREPLICAS Not enough good replicas to write.";

/// The two directives, as numbers.
#[derive(Default)]
pub struct MinReplicas {
    to_write: AtomicU64,
    max_lag: AtomicU64,
}

impl MinReplicas {
    /// Takes the values of the tuning directives (a negative or unreadable value: 0, off).
    pub fn set(&self, tuning: &BTreeMap<&'static str, String>) {
        let num = |name: &str| {
            tuning
                .get(name)
                .and_then(|v| v.parse::<i64>().ok())
                .map_or(0, |n| n.max(0) as u64)
        };
        self.to_write
            .store(num("min-replicas-to-write"), Ordering::Relaxed);
        self.max_lag
            .store(num("min-replicas-max-lag"), Ordering::Relaxed);
    }

    /// `(min-replicas-to-write, min-replicas-max-lag)` when both are set (the check is on).
    pub fn active(&self) -> Option<(u64, u64)> {
        let n = self.to_write.load(Ordering::Relaxed);
        if n == 0 {
            return None;
        }
        let lag = self.max_lag.load(Ordering::Relaxed);
        (lag > 0).then_some((n, lag))
    }
}

/// How many of `replicas` are good: online, their last ACK at most `max_lag_secs` ago.
pub fn good_count(replicas: &[Arc<ReplicaLink>], max_lag_secs: u64) -> usize {
    replicas
        .iter()
        .filter(|r| {
            *r.state.lock() == "online" && r.last_ack.lock().elapsed().as_secs() <= max_lag_secs
        })
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use parking_lot::Mutex;
    use std::time::{Duration, Instant};

    fn link(state: &'static str, ack_secs_ago: u64) -> Arc<ReplicaLink> {
        Arc::new(ReplicaLink {
            client_id: 1,
            ip: "127.0.0.1".into(),
            port: 1,
            state: Mutex::new(state),
            ack: AtomicU64::new(0),
            last_ack: Mutex::new(Instant::now() - Duration::from_secs(ack_secs_ago)),
        })
    }

    #[test]
    fn both_directives_turn_it_on() {
        let m = MinReplicas::default();
        assert_eq!(m.active(), None);
        let mut t = BTreeMap::new();
        t.insert("min-replicas-to-write", "2".to_string());
        t.insert("min-replicas-max-lag", "0".to_string());
        m.set(&t);
        assert_eq!(
            m.active(),
            None,
            "a lag of 0 turns the check off, as in Redis"
        );
        t.insert("min-replicas-max-lag", "10".to_string());
        m.set(&t);
        assert_eq!(m.active(), Some((2, 10)));
        t.insert("min-replicas-to-write", "-1".to_string());
        m.set(&t);
        assert_eq!(m.active(), None);
    }

    #[test]
    fn a_good_replica_is_online_and_acked_within_the_lag() {
        let replicas = vec![
            link("online", 0),
            link("online", 3),
            link("online", 11),
            link("wait_bgsave", 0),
            link("send_bulk", 0),
        ];
        assert_eq!(good_count(&replicas, 10), 2);
        assert_eq!(good_count(&replicas, 3), 2);
        assert_eq!(good_count(&replicas, 2), 1);
        assert_eq!(good_count(&replicas, 11), 3);
        assert_eq!(good_count(&[], 10), 0);
    }
}
