//! The cluster state a node reports (CLUSTER INFO's `cluster_state`) and routes by, as
//! Redis 7.0's `clusterUpdateState` delays it: [`State::is_ok`](super::slots::State::is_ok)
//! says what the slots and the reachable masters make it, and a master holds `fail` a while
//! longer where turning `ok` at once could take writes its slots' new owner never sees:
//!
//! - after it was cut off with a minority of the masters (Redis's rejoin delay: the node
//!   timeout, kept within 0.5-5 s, since it last found itself among the minority), so that
//!   the UPDATE telling it a replica took its slots arrives before any client's write.
//!   Redis also counts a cluster where no master serves a slot yet as a minority, holding
//!   a new cluster's masters after their first ADDSLOTS; Strata does not (`State::evaluate`):
//!   nothing served, nothing can be stale;
//! - for its first 2 s (Redis's `CLUSTER_WRITABLE_DELAY`) when it started from a saved
//!   configuration that made it a master serving slots, which a failover may have made
//!   stale while it was down. Redis holds every master's first 2 s; a node started without
//!   slots has no configuration to be stale about, and holding it would only delay the
//!   first ADDSLOTS of a new cluster.
//!
//! Pure: a step takes what the state computes and the clock.
//!
//! Layer: cluster (a building block below commands).

/// Redis's `CLUSTER_MIN_REJOIN_DELAY` and `CLUSTER_MAX_REJOIN_DELAY`.
pub const MIN_REJOIN_DELAY_MS: u64 = 500;
pub const MAX_REJOIN_DELAY_MS: u64 = 5000;
/// Redis's `CLUSTER_WRITABLE_DELAY`.
pub const WRITABLE_DELAY_MS: u64 = 2000;

/// The reported state and what delays it.
#[derive(Debug)]
pub struct Health {
    /// Before this time (ms) a master stays `fail` (0: no start delay).
    writable_after_ms: u64,
    /// The last time this node found a minority of the masters reachable (ms).
    among_minority_ms: Option<u64>,
    /// `cluster-node-timeout`, as the bus last read it.
    node_timeout_ms: u64,
    /// The state reported: with `cluster-require-full-coverage` (index 0) and without (1).
    reported: [bool; 2],
}

impl Health {
    /// At start, `now_ms`; `restarted_master`: this node's saved configuration made it a
    /// master serving slots.
    pub fn new(now_ms: u64, restarted_master: bool, node_timeout_ms: u64) -> Health {
        Health {
            writable_after_ms: if restarted_master {
                now_ms + WRITABLE_DELAY_MS
            } else {
                0
            },
            among_minority_ms: None,
            node_timeout_ms,
            reported: [false, false],
        }
    }

    pub fn set_node_timeout(&mut self, ms: u64) {
        self.node_timeout_ms = ms;
    }

    /// One recomputation: `computed` is what the state makes it (with and without full
    /// coverage), `minority` whether a minority of the masters serving slots is reachable,
    /// `master` whether this node is a master. Returns the state to report.
    pub fn step(
        &mut self,
        now_ms: u64,
        computed: [bool; 2],
        minority: bool,
        master: bool,
    ) -> [bool; 2] {
        if minority {
            self.among_minority_ms = Some(now_ms);
        }
        let rejoin_delay = self
            .node_timeout_ms
            .clamp(MIN_REJOIN_DELAY_MS, MAX_REJOIN_DELAY_MS);
        let held = master
            && (now_ms < self.writable_after_ms
                || self
                    .among_minority_ms
                    .is_some_and(|t| now_ms.saturating_sub(t) < rejoin_delay));
        for (reported, computed) in self.reported.iter_mut().zip(computed) {
            if computed && !*reported && held {
                continue;
            }
            *reported = computed;
        }
        self.reported
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OK: [bool; 2] = [true, true];

    #[test]
    fn a_master_back_from_a_minority_waits_the_rejoin_delay() {
        let mut h = Health::new(0, false, 2000);
        assert_eq!(
            h.step(10, OK, false, true),
            OK,
            "a fresh node is ok at once"
        );
        assert_eq!(h.step(1000, [false; 2], true, true), [false; 2]);
        // Among the minority until 1500; the majority reachable again from 1600.
        assert_eq!(h.step(1500, [false; 2], true, true), [false; 2]);
        assert_eq!(h.step(1600, OK, false, true), [false; 2]);
        assert_eq!(h.step(3499, OK, false, true), [false; 2]);
        assert_eq!(h.step(3500, OK, false, true), OK);
        // A replica is not held.
        let mut r = Health::new(0, false, 2000);
        r.step(1000, [false; 2], true, false);
        assert_eq!(r.step(1001, OK, false, false), OK);
        // Turning fail is never delayed.
        assert_eq!(h.step(3600, [false, true], false, true), [false, true]);
    }

    #[test]
    fn the_rejoin_delay_is_the_node_timeout_within_bounds() {
        for (timeout, delay) in [(100, 500), (2000, 2000), (60_000, 5000)] {
            let mut h = Health::new(0, false, timeout);
            h.step(1000, [false; 2], true, true);
            assert_eq!(
                h.step(1000 + delay - 1, OK, false, true),
                [false; 2],
                "{timeout}"
            );
            assert_eq!(h.step(1000 + delay, OK, false, true), OK, "{timeout}");
        }
    }

    #[test]
    fn a_restarted_master_waits_two_seconds() {
        let mut h = Health::new(5000, true, 15_000);
        assert_eq!(h.step(5000, OK, false, true), [false; 2]);
        assert_eq!(h.step(6999, OK, false, true), [false; 2]);
        assert_eq!(h.step(7000, OK, false, true), OK);
        // Demoted to a replica meanwhile: not held.
        let mut h = Health::new(5000, true, 15_000);
        assert_eq!(h.step(5100, OK, false, false), OK);
    }
}
