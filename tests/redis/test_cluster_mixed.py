"""A mixed cluster of three redis-server 7.0.15 masters and three Strata masters, with
replicas of both kinds across both kinds of master (a redis-server replica of a Strata
master and of a redis-server master, a Strata replica of a redis-server master and of a
Strata master): created with `redis-cli --cluster create` and `add-node --cluster-slave`,
checked, resharded Strata -> redis-server and back with keys of every type; then a
Strata master is killed and its redis-server replica elected, and a redis-server master
killed and its Strata replica elected; every key reads back as written and
`--cluster check` is clean afterwards.

    cargo build --release -p strata-cli
    python3 -m pytest -q tests/redis/test_cluster_mixed.py
"""

import pytest

from cluster_nodes import (
    NODE_TIMEOUT_MS, addr, call, cli, cluster_client, create, info_of, need_strata, node_id,
    nodes_of, redis_node, stop_all, strata_node, text_of, wait_check_clean, wait_until)
from conftest import need
from test_cluster_tools import fill_every_type, snapshot

pytest.importorskip("redis")


def add_replica_of(entry, new, master_id, everyone):
    code, out = cli("--cluster", "add-node", addr(new), addr(entry), "--cluster-slave",
                    "--cluster-master-id", master_id)
    assert code == 0 and "[OK] New node added correctly." in out, out
    new_id = node_id(new)
    wait_until(f"{new.name} {new.port} is known everywhere as a replica of {master_id}",
               lambda: all(any(n[0] == new_id and "slave" in n[2] and n[3] == master_id
                               for n in nodes_of(s.port)) for s in everyone + [new]))
    wait_until(f"{new.name} {new.port} replicates", lambda: "master_link_status:up" in
               text_of(call(new.port, "INFO", "replication")))
    return new_id


def kill_and_promote(victim, replica, replica_id, survivors):
    """`WAIT`s for the victim's replica, kills the victim, waits for every survivor to
    see the replica promoted with the slots, and for the cluster to be ok again."""
    assert call(victim.port, "WAIT", "1", "5000") == 1
    victim_id = node_id(victim)
    victim.proc.kill()
    victim.proc.wait()

    def promoted(s):
        by_id = {n[0]: n for n in nodes_of(s.port)}
        me = by_id[replica_id]
        return "master" in me[2] and len(me) > 8 and len(by_id[victim_id]) == 8

    for s in survivors:
        wait_until(f"node {s.port} sees {replica.name} {replica.port} promoted",
                   lambda s=s: promoted(s), timeout=NODE_TIMEOUT_MS / 1000 * 10 + 10)
    wait_until("the cluster is ok again", lambda: all(
        info_of(s.port)["cluster_state"] == "ok" for s in survivors),
        timeout=NODE_TIMEOUT_MS / 1000 * 5 + 5)
    assert call(replica.port, "ROLE")[0] == b"master"
    return victim_id


def test_mixed_cluster_create_reshard_and_fail_over_both_kinds():
    need_strata()
    need("redis-server")
    everyone = []
    try:
        s1, r1, s2, r2, s3, r3 = (strata_node(), redis_node(), strata_node(), redis_node(),
                                  strata_node(), redis_node())
        masters = [s1, r1, s2, r2, s3, r3]
        everyone += masters
        create(masters)
        wait_check_clean(masters)
        ids = {m.port: node_id(m) for m in masters}
        # Replicas of both kinds for both kinds of master.
        rr_of_s1, sr_of_r1, sr_of_s2, rr_of_r2 = (redis_node(), strata_node(), strata_node(),
                                                  redis_node())
        pairs = [(rr_of_s1, s1), (sr_of_r1, r1), (sr_of_s2, s2), (rr_of_r2, r2)]
        replica_ids = {}
        for replica, master in pairs:
            replica_ids[replica.port] = add_replica_of(s3, replica, ids[master.port], everyone)
            everyone.append(replica)
        code, out = cli("--cluster", "check", addr(r3))
        assert code == 0 and "[ERR]" not in out, out
        assert out.count("1 additional replica(s)") == 4, out
        rc = cluster_client(s1)
        try:
            keys = fill_every_type(rc, 1400)
            want = snapshot(rc, keys)
        finally:
            rc.close()
        # Reshard Strata -> redis-server and back.
        for src, dst in [(s2, r2), (r2, s2)]:
            code, out = cli("--cluster", "reshard", addr(s3), "--cluster-from", ids[src.port],
                            "--cluster-to", ids[dst.port], "--cluster-slots", "300",
                            "--cluster-yes", timeout=180)
            assert code == 0, out[-3000:]
            assert "Moving slot" in out, out[-3000:]
            wait_check_clean(everyone)
        # A Strata master dies: its redis-server replica takes over; then a redis-server
        # master dies: its Strata replica takes over.
        gone = []
        survivors = [s for s in everyone if s is not s1]
        gone.append(kill_and_promote(s1, rr_of_s1, replica_ids[rr_of_s1.port], survivors))
        survivors = [s for s in survivors if s is not r1]
        gone.append(kill_and_promote(r1, sr_of_r1, replica_ids[sr_of_r1.port], survivors))
        rc = cluster_client(s2)
        try:
            got = snapshot(rc, keys)
        finally:
            rc.close()
        wrong = [(k, want[k], got[k]) for k in keys if got[k] != want[k]]
        assert not wrong, f"{len(wrong)} keys differ, e.g. {wrong[:3]}"
        # The dead masters are forgotten everywhere, then the check is clean.
        for s in survivors:
            for g in gone:
                assert call(s.port, "CLUSTER", "FORGET", g) == ("+", "OK")
        out = wait_check_clean(survivors)
        assert out.count("1 additional replica(s)") == 2, out
    finally:
        stop_all(everyone)
