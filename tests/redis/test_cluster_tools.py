"""`redis-cli --cluster` managing Strata nodes end to end: `reshard` of 1,000 slots under a
redis-py `RedisCluster` load that logs every acknowledged write (none lost, none applied
twice); `add-node` as a master and as a replica, `rebalance` onto an empty master and off
it, `del-node` of a master and of a replica, `info`, and `fix` of a slot left open; the
same reshard both ways between Strata and redis-server 7.0.15 masters with keys of every
type compared key by key; `redis-cli -c` and `redis-benchmark --cluster` over three
Strata masters.

    cargo build --release -p strata-cli
    python3 -m pytest -q tests/redis/test_cluster_tools.py
"""

import subprocess
import time

import pytest

from cluster_nodes import (  # noqa: F401 (strata_nodes is a fixture)
    Writer, addr, call, check_clean, check_model, cli, cluster_client, create, node_id,
    nodes_of, redis_node, sees_all, slot_count, stop_all, strata_node, strata_nodes, text_of,
    wait_check_clean, wait_until)
from conftest import need

redis = pytest.importorskip("redis")


def slots_of(port, name):
    line = next(n for n in nodes_of(port) if n[0] == name)
    return slot_count(line)


def test_reshard_during_a_logged_write_load(strata_nodes):
    """1,000 slots move from the first master to the second while a `RedisCluster` client
    writes; `redis-cli` follows MOVED/ASK through the move. Afterwards the check is clean
    and every acknowledged write is present exactly once."""
    create(strata_nodes)
    src, dst = node_id(strata_nodes[0]), node_id(strata_nodes[1])
    before = slots_of(strata_nodes[0].port, dst)
    writer = Writer(strata_nodes[2].port, nkeys=3000)
    writer.start()
    try:
        wait_until("the writer got going", lambda: writer.ops > 3000, timeout=30)
        ops_before = writer.ops
        code, out = cli("--cluster", "reshard", addr(strata_nodes[0]), "--cluster-from", src,
                        "--cluster-to", dst, "--cluster-slots", "1000", "--cluster-yes",
                        timeout=120)
        assert code == 0, out[-3000:]
        assert writer.ops > ops_before, "the writer wrote during the reshard"
        time.sleep(0.5)
    finally:
        writer.stop()
    assert not writer.errors, writer.errors[:5]
    assert len(writer.model) == 3000
    wait_check_clean(strata_nodes)
    for s in strata_nodes:
        assert slots_of(s.port, dst) == before + 1000
    check_model(strata_nodes[0], writer)
    # Nothing stayed behind nor was copied twice: the nodes hold each key once.
    total = sum(int(text_of(call(s.port, "DBSIZE"))) for s in strata_nodes)
    assert total == len(writer.model)


def fill_b_keys(servers, n=1000):
    rc = cluster_client(servers[0])
    try:
        for i in range(n):
            rc.set(f"b:{i}", str(i))
    finally:
        rc.close()


def check_b_keys(server, n=1000):
    rc = cluster_client(server)
    try:
        assert [rc.get(f"b:{i}") for i in range(n)] == [str(i) for i in range(n)]
    finally:
        rc.close()


def test_reshard_of_crowded_slots_under_a_write_load(strata_nodes):
    """Four slots holding 500 keys each move 7 keys per MIGRATE while a `RedisCluster`
    client writes those very keys (following ASK to the target for the moved ones): each
    GETKEYSINSLOT of a migrating slot resumes past the keys already moved rather than
    rescanning them, and still finds every key. Afterwards every acknowledged write is
    there exactly once, and the slots are empty on the source."""
    from redis.crc import key_slot

    create(strata_nodes)
    src, dst = node_id(strata_nodes[0]), node_id(strata_nodes[1])
    tags, i = {}, 0
    while len(tags) < 4:  # the source's first four slots, the ones reshard moves first
        t = f"c{i}"
        if key_slot(t.encode()) < 4:
            tags.setdefault(key_slot(t.encode()), t)
        i += 1
    writer = Writer(strata_nodes[2].port, nkeys=2000, tags=[tags[s] for s in range(4)])
    writer.start()
    try:
        wait_until("the writer wrote every key", lambda: writer.ops > 4000, timeout=60)
        ops_before = writer.ops
        code, out = cli("--cluster", "reshard", addr(strata_nodes[0]), "--cluster-from", src,
                        "--cluster-to", dst, "--cluster-slots", "4", "--cluster-pipeline",
                        "7", "--cluster-yes", timeout=120)
        assert code == 0, out[-3000:]
        assert writer.ops > ops_before, "the writer wrote during the reshard"
    finally:
        writer.stop()
    assert not writer.errors, writer.errors[:5]
    assert len(writer.model) == 2000
    wait_check_clean(strata_nodes)
    for s in range(4):
        assert call(strata_nodes[0].port, "CLUSTER", "COUNTKEYSINSLOT", str(s)) == 0
        assert call(strata_nodes[1].port, "CLUSTER", "COUNTKEYSINSLOT", str(s)) == 500
    check_model(strata_nodes[0], writer)
    total = sum(int(text_of(call(s.port, "DBSIZE"))) for s in strata_nodes)
    assert total == len(writer.model)


def add_master_and_replica(strata_nodes):
    """Two new Strata nodes joined with `add-node`: a master, then a replica of it
    (`--cluster-slave --cluster-master-id`), known as such everywhere."""
    new_master, new_replica = strata_node(), strata_node()
    try:
        code, out = cli("--cluster", "add-node", addr(new_master), addr(strata_nodes[0]))
        assert code == 0 and "[OK] New node added correctly." in out, out
        m_id = node_id(new_master)
        for s in strata_nodes + [new_master]:
            wait_until(f"node {s.port} knows four nodes", lambda s=s: sees_all(s, 4))
        code, out = cli("--cluster", "add-node", addr(new_replica), addr(strata_nodes[0]),
                        "--cluster-slave", "--cluster-master-id", m_id)
        assert code == 0 and "[OK] New node added correctly." in out, out
        r_id = node_id(new_replica)
        everyone = strata_nodes + [new_master, new_replica]
        wait_until("the replica is known everywhere as the new master's", lambda: all(
            any(n[0] == r_id and "slave" in n[2] and n[3] == m_id for n in nodes_of(s.port))
            for s in everyone))
        return new_master, m_id, new_replica, r_id
    except BaseException:
        stop_all([new_master, new_replica])
        raise


def test_add_node_then_rebalance_onto_the_empty_master_and_info(strata_nodes):
    """`add-node` as a master and as its replica, `rebalance --cluster-use-empty-masters`
    gives the new master its share with the keys, `info` counts the keys of four masters,
    and the replica holds its master's keys."""
    create(strata_nodes)
    fill_b_keys(strata_nodes)
    new_master, m_id, new_replica, r_id = add_master_and_replica(strata_nodes)
    extra = [new_master, new_replica]
    try:
        everyone = strata_nodes + extra
        code, out = cli("--cluster", "rebalance", addr(strata_nodes[0]),
                        "--cluster-use-empty-masters", timeout=120)
        assert code == 0, out[-3000:]
        wait_check_clean(everyone)
        assert 3500 < slots_of(strata_nodes[0].port, m_id) < 4700
        code, out = cli("--cluster", "info", addr(strata_nodes[0]))
        assert code == 0, out
        assert "[OK] 1000 keys in 4 masters." in out, out
        assert out.count(" slots | ") == 4 and "1 slaves." in out, out
        wait_until("the replica has its master's keys", lambda: int(
            text_of(call(new_replica.port, "DBSIZE"))) == int(
            text_of(call(new_master.port, "DBSIZE"))) > 0)
        check_b_keys(strata_nodes[1])
    finally:
        stop_all(extra)


def test_rebalance_off_a_master_then_del_node(strata_nodes):
    """A master given 100 slots (`reshard` from all the others alike) is emptied by
    `rebalance` with a weight of 0; `del-node` removes its replica, then it; forgotten
    nodes are not learned back from gossip, and every key is still served. (The slots come
    from every master so that the rebalance moves slots off the new master only: a move
    between two other masters after the new one gave its last slot away and became a
    replica would have `redis-cli` send SETSLOT to a replica, which Redis refuses too.)"""
    create(strata_nodes)
    fill_b_keys(strata_nodes)
    new_master, m_id, new_replica, r_id = add_master_and_replica(strata_nodes)
    extra = [new_master, new_replica]
    try:
        everyone = strata_nodes + extra
        code, out = cli("--cluster", "reshard", addr(strata_nodes[0]), "--cluster-from",
                        "all", "--cluster-to", m_id, "--cluster-slots", "100",
                        "--cluster-yes", timeout=120)
        assert code == 0, out[-3000:]
        wait_check_clean(everyone)
        assert slots_of(strata_nodes[0].port, m_id) == 100
        code, out = cli("--cluster", "rebalance", addr(strata_nodes[0]),
                        "--cluster-weight", f"{m_id}=0", timeout=120)
        assert code == 0, out[-3000:]
        wait_check_clean(everyone)
        assert slots_of(strata_nodes[0].port, m_id) == 0
        for gone, gone_id in [(new_replica, r_id), (new_master, m_id)]:
            code, out = cli("--cluster", "del-node", addr(strata_nodes[0]), gone_id)
            assert code == 0, out
            assert "[ERR]" not in out, out
            for s in strata_nodes:
                wait_until(f"node {s.port} forgot {gone.port}", lambda s=s, g=gone_id: all(
                    n[0] != g for n in nodes_of(s.port)), timeout=10)
        # Forgotten nodes are not learned back from gossip (the FORGET blacklist).
        time.sleep(2)
        for s in strata_nodes:
            assert len(nodes_of(s.port)) == 3, nodes_of(s.port)
        check_clean(strata_nodes)
        check_b_keys(strata_nodes[1])
    finally:
        stop_all(extra)


def test_fix_of_a_slot_left_open(strata_nodes):
    """`fix` of a slot left MIGRATING on its owner and IMPORTING on another, as an
    interrupted reshard leaves it, with a key in it: the key is served afterwards."""
    create(strata_nodes)
    a, b = strata_nodes[0], strata_nodes[1]
    a_id, b_id = node_id(a), node_id(b)
    slot = next(int(r.split("-")[0]) for n in nodes_of(a.port) if n[0] == a_id
                for r in n[8:])
    key = next(f"fix:{i}" for i in range(100000)
               if call(a.port, "CLUSTER", "KEYSLOT", f"fix:{i}") == slot)
    assert call(a.port, "SET", key, "moved-by-fix") == ("+", "OK")
    assert call(b.port, "CLUSTER", "SETSLOT", str(slot), "IMPORTING", a_id) == ("+", "OK")
    assert call(a.port, "CLUSTER", "SETSLOT", str(slot), "MIGRATING", b_id) == ("+", "OK")
    code, out = cli("--cluster", "check", addr(a))
    assert f"has slots in migrating state {slot}" in out, out
    assert f"has slots in importing state {slot}" in out, out
    assert f"[WARNING] The following slots are open: {slot}" in out, out
    code, out = cli("--cluster", "fix", addr(a), timeout=120)
    assert code == 0, out
    assert ">>> Fixing open slot" in out, out
    wait_check_clean(strata_nodes)
    rc = cluster_client(strata_nodes[2])
    try:
        assert rc.get(key) == "moved-by-fix"
    finally:
        rc.close()


def snapshot(rc, keys):
    out = {}
    for k in keys:
        t = rc.type(k)
        if t == "string":
            v = rc.get(k)
        elif t == "list":
            v = rc.lrange(k, 0, -1)
        elif t == "hash":
            v = rc.hgetall(k)
        elif t == "set":
            v = sorted(rc.smembers(k))
        elif t == "zset":
            v = rc.zrange(k, 0, -1, withscores=True)
        elif t == "stream":
            v = rc.xrange(k)
        else:
            v = None
        out[k] = (t, v, rc.ttl(k) > 0)
    return out


def fill_every_type(rc, n):
    keys = []
    for i in range(n):
        kind = i % 7
        k = f"mix{kind}:{i}"
        if kind == 0:
            rc.set(k, f"value-{i}" * (1 + i % 5))
        elif kind == 1:
            rc.rpush(k, *[f"e{j}" for j in range(1 + i % 20)])
        elif kind == 2:
            rc.hset(k, mapping={f"f{j}": str(j) for j in range(1 + i % 30)})
        elif kind == 3:
            rc.sadd(k, *[str(j) if i % 2 else f"s{j}" for j in range(1 + i % 25)])
        elif kind == 4:
            rc.zadd(k, {f"z{j}": j * 1.5 for j in range(1 + i % 25)})
        elif kind == 5:
            for j in range(1 + i % 5):
                rc.xadd(k, {"f": str(j)}, id=f"{j + 1}-0")
        else:
            rc.set(k, str(i), ex=3600)
        keys.append(k)
    return keys


def test_reshard_both_ways_between_strata_and_redis_server():
    need("redis-server")
    servers = []
    try:
        servers.append(strata_node())
        servers.append(redis_node())
        servers.append(strata_node())
        create(servers)
        strata, real = servers[0], servers[1]
        s_id, r_id = node_id(strata), node_id(real)
        rc = cluster_client(strata)
        try:
            keys = fill_every_type(rc, 1400)
            want = snapshot(rc, keys)
        finally:
            rc.close()
        assert len({v[0] for v in want.values()}) == 5 + 1  # string list hash set zset stream
        s_before = slot_count(next(n for n in nodes_of(strata.port) if n[0] == s_id))
        for src, dst, via in [(s_id, r_id, strata), (r_id, s_id, real)]:
            code, out = cli("--cluster", "reshard", addr(via), "--cluster-from", src,
                            "--cluster-to", dst, "--cluster-slots", "1000", "--cluster-yes",
                            timeout=120)
            assert code == 0, out[-3000:]
            assert "Moving slot" in out, out[-3000:]
            wait_check_clean(servers)
        # The slots came back in one piece: Strata's count is what it was.
        assert slot_count(next(n for n in nodes_of(strata.port) if n[0] == s_id)) == s_before
        rc = cluster_client(real)
        try:
            got = snapshot(rc, keys)
        finally:
            rc.close()
        wrong = [(k, want[k], got[k]) for k in keys if got[k] != want[k]]
        assert not wrong, f"{len(wrong)} keys differ, e.g. {wrong[:3]}"
        total = sum(int(text_of(call(s.port, "DBSIZE"))) for s in servers)
        assert total == len(keys)
    finally:
        stop_all(servers)


def test_redis_cli_c_and_redis_benchmark_cluster(strata_nodes):
    need("redis-benchmark")
    create(strata_nodes)
    port = str(strata_nodes[0].port)

    def run(*args):
        r = subprocess.run(["redis-cli", "-c", "-p", port, *args], capture_output=True,
                           text=True, timeout=30)
        assert r.returncode == 0 and not r.stderr, r
        return r.stdout.strip().splitlines()[-1]

    # redis-cli -c follows MOVED to whichever node serves each key.
    for i in range(30):
        assert run("SET", f"cli:{i}", f"v{i}") == "OK"
    served = set()
    for i in range(30):
        assert run("GET", f"cli:{i}") == f"v{i}"
        served.add(int(text_of(call(strata_nodes[0].port, "CLUSTER", "KEYSLOT", f"cli:{i}")))
                   > 5460)
    assert served == {True, False}, "the keys live on more than one node"
    r = subprocess.run(
        ["redis-benchmark", "--cluster", "-p", port, "-t", "set,get", "-n", "20000", "-q"],
        capture_output=True, text=True, timeout=120)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    assert "SET: " in out and "GET: " in out, out
    assert "rror" not in out and "MOVED" not in out and "ASK " not in out, out
    # The load went to all three masters.
    for s in strata_nodes:
        assert int(text_of(call(s.port, "DBSIZE"))) > 0
