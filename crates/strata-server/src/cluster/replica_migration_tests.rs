//! Replica migration as a pure transition: which replica moves, to which master, after how
//! long, and when none does.

use super::cron::cron;
use super::outgoing::Env;
use super::packet::{Action, Outcome};
use super::replica_migration::{step, MIGRATION_DELAY_MS};
use super::slots::{node_flag, Node, NodeId, State};
use super::test_fixtures::{env, master, A, B, C};

/// Replicas: D and E of A, F of B.
const D: NodeId = [b'd'; 40];
const E: NodeId = [b'e'; 40];
const F: NodeId = [b'f'; 40];

/// Masters A, B, C with a third of the slots each; A has replicas D and E, B had F (now
/// failing), C never had one; as seen by `me`.
fn cluster(me: NodeId) -> State {
    let mut st = State::new(me);
    for (i, id) in [A, B, C].into_iter().enumerate() {
        let n = master(id, 7000 + i as u16, 1 + i as u64);
        let e = st.nodes.entry(id).or_insert(n.clone());
        e.flags |= n.flags;
        e.config_epoch = n.config_epoch;
    }
    for (i, (id, of)) in [(D, A), (E, A), (F, B)].into_iter().enumerate() {
        let mut r = Node::new(id, node_flag::SLAVE);
        r.ip = "127.0.0.1".into();
        r.port = 7100 + i as u16;
        r.link_connected = true;
        let e = st.nodes.entry(id).or_insert(r);
        e.flags = (e.flags & node_flag::MYSELF) | node_flag::SLAVE;
        e.master = Some(of);
        st.add_replica(&of);
    }
    st.nodes.get_mut(&F).unwrap().flags |= node_flag::FAIL;
    for s in 0..16384usize {
        st.owner[s] = Some(match s {
            0..=5460 => A,
            5461..=10922 => B,
            _ => C,
        });
    }
    st.current_epoch = 3;
    st
}

fn run(st: &mut State, env: &Env) -> Outcome {
    let mut out = Outcome::default();
    step(st, env, &mut out);
    out
}

#[test]
fn the_smallest_replica_of_the_best_served_master_moves_to_the_orphan_after_the_delay() {
    let mut d = cluster(D);
    assert!(d.nodes[&A].has(node_flag::MIGRATE_TO) && d.nodes[&B].has(node_flag::MIGRATE_TO));
    assert!(
        !d.nodes[&C].has(node_flag::MIGRATE_TO),
        "C never had a replica"
    );
    // B is orphaned from now on; nobody moves before the delay.
    let out = run(&mut d, &env(1_000));
    assert!(out.actions.is_empty(), "{:?}", out.actions);
    assert_eq!(d.nodes[&B].bus.orphaned_ms, 1_000);
    assert_eq!(
        d.nodes[&C].bus.orphaned_ms, 0,
        "not a target: never had a replica"
    );
    let out = run(&mut d, &env(1_000 + MIGRATION_DELAY_MS));
    assert!(out.actions.is_empty(), "the delay is not over");
    // E, the other replica of A, is not the one that moves.
    let mut e = cluster(E);
    run(&mut e, &env(1_000));
    assert!(run(&mut e, &env(10_000)).actions.is_empty());
    assert_eq!(e.me().master, Some(A));
    // D does.
    let out = run(&mut d, &env(1_001 + MIGRATION_DELAY_MS));
    assert_eq!(out.actions, vec![Action::Follow(B)]);
    assert!(out.save);
    let me = d.me();
    assert!(me.has(node_flag::SLAVE) && !me.has(node_flag::MASTER));
    assert_eq!(me.master, Some(B));
    assert_eq!(d.replicas_of(&B).len(), 2, "F (failing) and now D");
    // B is served again: no further move.
    assert!(run(&mut d, &env(20_000)).actions.is_empty());
}

#[test]
fn no_move_without_an_orphan_or_over_the_barrier_or_when_disabled_or_down() {
    let moves = |st: &mut State, env: &Env| {
        run(st, &{
            let mut e = env.clone();
            e.now_ms = 1_000;
            e
        });
        !run(st, env).actions.is_empty()
    };
    let later = env(1_001 + MIGRATION_DELAY_MS);
    assert!(moves(&mut cluster(D), &later), "the baseline moves");
    // F answers again: B is not orphaned, and C never had a replica.
    let mut st = cluster(D);
    st.nodes.get_mut(&F).unwrap().flags &= !node_flag::FAIL;
    assert!(!moves(&mut st, &later));
    // A would keep only as many working replicas as the barrier.
    let mut barrier = later.clone();
    barrier.migration_barrier = 2;
    assert!(!moves(&mut cluster(D), &barrier));
    // E suspected failing: A keeps one working replica, not more than the barrier of 1.
    let mut st = cluster(D);
    st.nodes.get_mut(&E).unwrap().flags |= node_flag::PFAIL;
    assert!(!moves(&mut st, &later));
    // cluster-allow-replica-migration no.
    let mut off = later.clone();
    off.allow_replica_migration = false;
    assert!(!moves(&mut cluster(D), &off));
    // The cluster is down (a slot unserved).
    let mut st = cluster(D);
    st.owner[0] = None;
    assert!(!moves(&mut st, &later));
    // A replica of a master with fewer replicas than the best-served one stays.
    let mut st = cluster(D);
    let mut g = Node::new([b'g'; 40], node_flag::SLAVE);
    g.master = Some(C);
    st.nodes.insert(g.id, g);
    st.add_replica(&C);
    st.nodes.get_mut(&E).unwrap().master = Some(C);
    assert!(!moves(&mut st, &later), "D's master has one replica, C two");
}

#[test]
fn the_cron_runs_the_migration_step() {
    let mut d = cluster(D);
    // A node timeout long enough that nobody is suspected meanwhile.
    let at = |now_ms| Env {
        node_timeout_ms: 60_000,
        ..env(now_ms)
    };
    cron(&mut d, &at(1_000), 1);
    let out = cron(&mut d, &at(1_001 + MIGRATION_DELAY_MS), 2);
    assert!(
        out.actions.contains(&Action::Follow(B)),
        "{:?}",
        out.actions
    );
    assert_eq!(d.me().master, Some(B));
}
