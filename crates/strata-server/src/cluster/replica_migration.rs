//! Replica migration (Redis 7.0's orphaned-master check in `clusterCron` and
//! `clusterHandleSlaveMigration`): a master serving slots that once had a replica and has
//! no working one left is orphaned; a replica of one of the masters with the most working
//! replicas moves to it, so that one more failure does not leave slots without a copy.
//! Only one replica moves: among the replicas of the best-served masters, the one with the
//! smallest name, and only if its own master keeps more than `cluster-migration-barrier`
//! working replicas, the cluster is ok, and the target has been orphaned for 5 s
//! (`CLUSTER_SLAVE_MIGRATION_DELAY`). Off with `cluster-allow-replica-migration no`.
//!
//! "Once had a replica" is the MIGRATE_TO flag, set on a master when a replica attaches to
//! it and on a replica promoted in its place ([`State::add_replica`], `packet.rs`), cleared
//! when the node becomes a replica. A pure function of the state and the clock, returning
//! [`Action::Follow`] as the other transitions return their actions.
//!
//! Layer: cluster (a building block below commands).

use super::outgoing::Env;
use super::packet::{Action, Outcome};
use super::slots::{node_flag, NodeId, State};

/// How long a master must have been orphaned before a replica moves to it (Redis's
/// `CLUSTER_SLAVE_MIGRATION_DELAY`).
pub const MIGRATION_DELAY_MS: u64 = 5000;

/// Replicas of `id` not flagged FAIL (Redis's `clusterCountNonFailingSlaves`).
fn working_replicas(st: &State, id: &NodeId) -> usize {
    st.replicas_of(id)
        .iter()
        .filter(|r| !r.has(node_flag::FAIL))
        .count()
}

/// The cron's part, on a replica (Redis's counts in `clusterCron`, then
/// `clusterHandleSlaveMigration`): this node follows an orphaned master if it is the
/// replica chosen to move.
pub fn step(st: &mut State, env: &Env, out: &mut Outcome) {
    let me = st.me();
    let Some(my_master) = me.master.filter(|_| me.has(node_flag::SLAVE)) else {
        return;
    };
    // The counts of `clusterCron`: over the reachable masters that are not failing.
    let mut orphaned = 0;
    let mut max_replicas = 0;
    let mut mine = 0;
    for n in st.nodes.values() {
        let skip = node_flag::MYSELF | node_flag::NOADDR | node_flag::HANDSHAKE;
        if n.has(skip) || !n.has(node_flag::MASTER) || n.has(node_flag::FAIL) {
            continue;
        }
        let ok = working_replicas(st, &n.id);
        if ok == 0 && st.slot_count(&n.id) > 0 && n.has(node_flag::MIGRATE_TO) {
            orphaned += 1;
        }
        max_replicas = max_replicas.max(ok);
        if n.id == my_master {
            mine = ok;
        }
    }
    if orphaned == 0 || max_replicas < 2 || mine != max_replicas || !env.allow_replica_migration {
        return;
    }
    migrate(st, env, my_master, max_replicas, out);
}

/// Redis's `clusterHandleSlaveMigration`.
fn migrate(st: &mut State, env: &Env, my_master: NodeId, max_replicas: usize, out: &mut Outcome) {
    if !st.is_ok(env.full_coverage) {
        return;
    }
    // My master must keep more than the barrier of working (not failing, not suspected)
    // replicas once I leave.
    let ok_here = st
        .replicas_of(&my_master)
        .iter()
        .filter(|r| !r.has(node_flag::FAIL | node_flag::PFAIL))
        .count();
    if ok_here as u64 <= env.migration_barrier {
        return;
    }
    // The target: the first orphaned master serving slots. The candidate: the replica with
    // the smallest name among those of the masters with the most working replicas.
    let mut target = None;
    let mut candidate = st.myself;
    let ids: Vec<NodeId> = st.nodes.keys().copied().collect();
    for id in ids {
        let n = &st.nodes[&id];
        let ok = if n.has(node_flag::MASTER) {
            working_replicas(st, &id)
        } else {
            0
        };
        let orphaned = !n.has(node_flag::SLAVE)
            && !n.has(node_flag::FAIL)
            && n.has(node_flag::MIGRATE_TO)
            && ok == 0;
        if orphaned {
            if target.is_none() && st.slot_count(&id) > 0 {
                target = Some(id);
            }
            let n = st.nodes.get_mut(&id).expect("listed");
            if n.bus.orphaned_ms == 0 {
                n.bus.orphaned_ms = env.now_ms;
            }
        } else {
            st.nodes.get_mut(&id).expect("listed").bus.orphaned_ms = 0;
        }
        if ok == max_replicas {
            for r in st.replicas_of(&id) {
                if r.id < candidate {
                    candidate = r.id;
                }
            }
        }
    }
    let Some(target) = target else {
        return;
    };
    let since = st.nodes[&target].bus.orphaned_ms;
    if candidate != st.myself || env.now_ms.saturating_sub(since) <= MIGRATION_DELAY_MS {
        return;
    }
    eprintln!(
        "strata-server: cluster: Migrating to orphaned master {}",
        super::slots::id_str(&target)
    );
    st.become_replica_of(target);
    st.manual = Default::default();
    out.actions.push(Action::Follow(target));
    out.save = true;
}
