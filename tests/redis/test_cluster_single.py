"""Cluster mode on one node: `strata serve --cluster-enabled yes` with every slot added
(`CLUSTER ADDSLOTSRANGE 0 16383`), used by redis-py's `RedisCluster` and `redis-cli -c`
for every data type, its CLUSTER INFO / SLOTS / SHARDS / NODES read by redis-py, and the
replies of the cluster commands compared with a redis-server 7.0.15 in cluster mode
where they are deterministic (node ids differ: they are replaced by `<id>`).

    cargo build --release -p strata-cli
    python3 -m pytest -q tests/redis/test_cluster_single.py
"""

import os
import shutil
import subprocess
import time

import pytest

from conftest import need
from servers import STRATA_BIN, Client, start_redis, start_strata


OK = ("+", "OK")


def all_slots(c):
    assert c.call("CLUSTER", "ADDSLOTSRANGE", "0", "16383") == OK


def wait_ok(c):
    # Redis leaves the cluster down for a few seconds after its slots are added (its
    # rejoin delay); Strata is ok at once.
    deadline = time.time() + 20
    while b"cluster_state:ok" not in c.call("CLUSTER", "INFO"):
        assert time.time() < deadline, "the cluster never became ok"
        time.sleep(0.2)


@pytest.fixture(scope="module")
def strata_cluster():
    if not os.path.exists(STRATA_BIN):
        pytest.fail(f"{STRATA_BIN} not found: cargo build --release -p strata-cli")
    s = start_strata(["--cluster-enabled", "yes"])
    c = Client(s.port)
    all_slots(c)
    wait_ok(c)
    c.close()
    try:
        yield s
    finally:
        assert s.stop(), "strata serve did not stop within 10 s of SIGTERM"


@pytest.fixture(scope="module")
def redis_cluster():
    need("redis-server")
    s = start_redis(["--cluster-enabled", "yes"])
    c = Client(s.port)
    all_slots(c)
    wait_ok(c)
    c.close()
    try:
        yield s
    finally:
        s.stop()


def test_redis_py_cluster_client_every_type(strata_cluster):
    import redis
    from redis.cluster import RedisCluster

    rc = RedisCluster(host="127.0.0.1", port=strata_cluster.port, decode_responses=True)
    try:
        assert len(rc.get_nodes()) == 1
        for i in range(200):
            rc.set(f"k{i}", i)
        assert [rc.get(f"k{i}") for i in range(200)] == [str(i) for i in range(200)]
        assert rc.mset_nonatomic({f"m{i}": i for i in range(50)}) is not None
        assert rc.mget_nonatomic([f"m{i}" for i in range(50)]) == [str(i) for i in range(50)]
        rc.hset("{u1}h", mapping={"a": "1", "b": "2"})
        assert rc.hgetall("{u1}h") == {"a": "1", "b": "2"}
        rc.rpush("{u1}l", "x", "y", "z")
        assert rc.lrange("{u1}l", 0, -1) == ["x", "y", "z"]
        rc.sadd("{u1}s", "p", "q")
        assert rc.smembers("{u1}s") == {"p", "q"}
        rc.zadd("{u1}z", {"a": 1, "b": 2})
        assert rc.zrange("{u1}z", 0, -1, withscores=True) == [("a", 1.0), ("b", 2.0)]
        rc.xadd("{u1}x", {"f": "v"}, id="1-1")
        assert rc.xrange("{u1}x") == [("1-1", {"f": "v"})]
        rc.pfadd("{u1}hll", "a", "b", "c")
        assert rc.pfcount("{u1}hll") == 3
        rc.geoadd("{u1}g", (13.361389, 38.115556, "Palermo"))
        assert rc.geopos("{u1}g", "Palermo")[0] is not None
        # Same-slot multi-key commands and transactions.
        assert rc.sunionstore("{u1}s2", ["{u1}s", "{u1}s"]) == 2
        with rc.pipeline() as p:
            p.set("{u1}a", 1).incr("{u1}a")
            assert p.execute() == [True, 2]
        with pytest.raises(redis.exceptions.RedisClusterException):
            rc.sunionstore("a", ["b", "c"])
        raw = redis.Redis(port=strata_cluster.port, decode_responses=True)
        with pytest.raises(redis.exceptions.ResponseError, match="hash to the same slot"):
            raw.mset({"a": 1, "b": 2})
        raw.close()
        info = rc.cluster_info()
        assert info["cluster_state"] == "ok"
        assert int(info["cluster_slots_assigned"]) == 16384
        slots = rc.cluster_slots()
        assert list(slots.keys()) == [(0, 16383)]
        shards = rc.execute_command("CLUSTER SHARDS")
        assert len(shards) == 1
        nodes = rc.cluster_nodes()
        assert len(nodes) == 1
        (node,) = nodes.values()
        assert "myself" in node["flags"] and node["slots"] == [["0", "16383"]]
        assert rc.cluster_keyslot("{u1}h") == rc.cluster_keyslot("u1")
        assert rc.cluster_countkeysinslot(rc.cluster_keyslot("u1")) >= 9
    finally:
        rc.close()


def test_redis_cli_follows_the_cluster(strata_cluster):
    need("redis-cli")
    cli = shutil.which("redis-cli")

    def run(*args):
        out = subprocess.run([cli, "-c", "-p", str(strata_cluster.port), *args],
                             capture_output=True, timeout=30, check=True)
        return out.stdout.decode().strip()

    assert run("SET", "cli-key", "v") == "OK"
    assert run("GET", "cli-key") == "v"
    assert run("HSET", "cli-h", "f", "v") == "1"
    assert run("CLUSTER", "KEYSLOT", "cli-key") == str(
        Client(strata_cluster.port).call("CLUSTER", "KEYSLOT", "cli-key"))
    assert "cluster_state:ok" in run("CLUSTER", "INFO")


# Commands whose replies do not depend on the node id, the clock or the hash order.
SAME = [
    ["CLUSTER", "KEYSLOT", "{user1000}.following"],
    ["CLUSTER", "KEYSLOT", "foo{}{bar}"],
    ["CLUSTER", "KEYSLOT", "foo{{bar}}zap"],
    ["CLUSTER", "KEYSLOT", ""],
    ["CLUSTER", "ADDSLOTS", "0"],
    ["CLUSTER", "ADDSLOTS", "x"],
    ["CLUSTER", "ADDSLOTS", "16384"],
    ["CLUSTER", "ADDSLOTSRANGE", "10", "5"],
    ["CLUSTER", "ADDSLOTSRANGE", "10"],
    ["CLUSTER", "DELSLOTS", "5", "5"],
    ["CLUSTER", "COUNTKEYSINSLOT", "x"],
    ["CLUSTER", "COUNTKEYSINSLOT", "16384"],
    ["CLUSTER", "GETKEYSINSLOT", "1", "x"],
    ["CLUSTER", "GETKEYSINSLOT", "16384", "1"],
    ["CLUSTER", "GETKEYSINSLOT", "1", "-1"],
    ["CLUSTER", "SETSLOT", "1", "MIGRATING", "abc"],
    ["CLUSTER", "SETSLOT", "1", "IMPORTING", "abc"],
    ["CLUSTER", "SETSLOT", "1", "NODE", "abc"],
    ["CLUSTER", "SETSLOT", "1", "foo"],
    ["CLUSTER", "SETSLOT", "x", "STABLE"],
    ["CLUSTER", "SETSLOT", "1", "STABLE"],
    ["CLUSTER", "FORGET", "abc"],
    ["CLUSTER", "COUNT-FAILURE-REPORTS", "abc"],
    ["CLUSTER", "SET-CONFIG-EPOCH", "-1"],
    ["CLUSTER", "REPLICATE", "abc"],
    ["CLUSTER", "REPLICAS", "abc"],
    ["CLUSTER", "FAILOVER"],
    ["CLUSTER", "FAILOVER", "foo"],
    ["CLUSTER", "MEET", "x", "1"],
    ["CLUSTER", "MEET", "127.0.0.1", "99999"],
    ["CLUSTER", "MEET", "127.0.0.1", "1", "x"],
    ["CLUSTER", "RESET", "foo"],
    ["CLUSTER", "LINKS"],
    ["CLUSTER", "HELP"],
    ["CLUSTER", "NOSUCH"],
    ["CLUSTER", "INFO", "x"],
    ["SELECT", "1"],
    ["SELECT", "0"],
    ["SWAPDB", "0", "1"],
    ["SET", "a", "1"],
    ["MOVE", "a", "1"],
    ["COPY", "a", "{a}b", "DB", "1"],
    ["COPY", "a", "b"],
    ["MSET", "a", "1", "b", "2"],
    ["MSET", "a", "1", "{a}x", "2"],
    ["CLUSTER", "COUNTKEYSINSLOT", "15495"],
    ["CLUSTER", "FLUSHSLOTS"],
    ["CLUSTER", "RESET"],
    ["EVAL", "return 1", "2", "a", "b"],
    ["READONLY"],
    ["READWRITE"],
    ["ASKING"],
    ["CONFIG", "GET", "cluster-require-full-coverage"],
    ["CONFIG", "GET", "cluster-node-timeout"],
    ["CONFIG", "GET", "cluster-enabled"],
    ["CONFIG", "SET", "cluster-enabled", "no"],
    ["CONFIG", "SET", "cluster-node-timeout", "5000"],
    ["CONFIG", "GET", "cluster-node-timeout"],
]


def test_replies_match_redis_cluster_mode(strata_cluster, redis_cluster):
    s, r = Client(strata_cluster.port), Client(redis_cluster.port)
    try:
        diffs = []
        for cmd in SAME:
            got, want = s.call(*cmd), r.call(*cmd)
            if got != want:
                diffs.append(f"{cmd}: strata {got!r} redis {want!r}")
        # CLUSTER INFO field by field (the epochs and message counters aside).
        fields = lambda c: [l.split(":")[0] for l in c.call("CLUSTER", "INFO").decode().split("\r\n") if l]
        if fields(s) != fields(r):
            diffs.append(f"CLUSTER INFO fields: {fields(s)} vs {fields(r)}")
        # SLOTS and SHARDS with the ids replaced.
        for cmd in (["CLUSTER", "SLOTS"], ["CLUSTER", "SHARDS"]):
            sid, rid = s.call("CLUSTER", "MYID"), r.call("CLUSTER", "MYID")
            a = repr(s.call(*cmd)).replace(repr(sid)[1:-1], "<id>").replace(str(strata_cluster.port), "<port>")
            b = repr(r.call(*cmd)).replace(repr(rid)[1:-1], "<id>").replace(str(redis_cluster.port), "<port>")
            if a != b:
                diffs.append(f"{cmd}: strata {a} redis {b}")
        assert not diffs, "\n".join(diffs)
    finally:
        s.close()
        r.close()


def fill(c, prefix):
    """Keys of every type under `prefix`; returns their names."""
    p = prefix
    c.call("SET", f"{p}s", "v")
    c.call("SET", f"{p}ttl", "v", "PX", "600000")
    c.call("RPUSH", f"{p}l", "a", "b", "c")
    c.call("HSET", f"{p}h", "f", "1", "g", "2")
    c.call("SADD", f"{p}set", "x", "y", "1", "2")
    c.call("ZADD", f"{p}z", "1", "a", "2.5", "b")
    c.call("XADD", f"{p}x", "1-1", "f", "v")
    c.call("XGROUP", "CREATE", f"{p}x", "g", "0")
    c.call("PFADD", f"{p}hll", "a", "b")
    return [f"{p}{k}" for k in ("s", "ttl", "l", "h", "set", "z", "x", "hll")]


def snapshot(c, key):
    t = c.call("TYPE", key)
    read = {
        "string": ["GET", key],
        "list": ["LRANGE", key, "0", "-1"],
        "hash": ["HGETALL", key],
        "set": ["SMEMBERS", key],
        "zset": ["ZRANGE", key, "0", "-1", "WITHSCORES"],
        "stream": ["XRANGE", key, "-", "+"],
    }[t[1]]
    v = c.call(*read)
    if isinstance(v, list) and read[0] in ("SMEMBERS", "HGETALL"):
        v = sorted(v, key=repr)
    ttl = c.call("PTTL", key)
    return (t, v, ttl > 0)


@pytest.mark.parametrize("direction", ["strata-to-redis", "redis-to-strata"])
def test_migrate_between_standalone_servers(direction, strata_server, redis_server):
    s, r = Client(strata_server.port), Client(redis_server.port)
    src, dst, dst_port = (s, r, redis_server.port) if direction == "strata-to-redis" else (r, s, strata_server.port)
    try:
        p = f"mig-{direction}-"
        keys = fill(src, p)
        before = {k: snapshot(src, k) for k in keys}
        # One key, then the rest with KEYS, COPY first (nothing deleted) then REPLACE.
        assert src.call("MIGRATE", "127.0.0.1", str(dst_port), keys[0], "0", "5000") == OK
        assert src.call("EXISTS", keys[0]) == 0
        assert src.call("MIGRATE", "127.0.0.1", str(dst_port), "", "0", "5000",
                        "COPY", "KEYS", *keys[1:]) == OK
        assert src.call("EXISTS", *keys[1:]) == len(keys) - 1
        err = src.call("MIGRATE", "127.0.0.1", str(dst_port), "", "0", "5000", "KEYS", keys[1])
        assert "BUSYKEY" in repr(err), err
        assert src.call("MIGRATE", "127.0.0.1", str(dst_port), "", "0", "5000",
                        "REPLACE", "KEYS", *keys[1:]) == OK
        assert src.call("EXISTS", *keys) == 0
        assert {k: snapshot(dst, k) for k in keys} == before
        assert src.call("MIGRATE", "127.0.0.1", str(dst_port), "nokey", "0", "5000") == ("+", "NOKEY")
        # Into another database, and with AUTH against a server that needs it.
        src.call("SET", f"{p}db", "1")
        assert src.call("MIGRATE", "127.0.0.1", str(dst_port), f"{p}db", "2", "5000") == OK
        dst.call("SELECT", "2")
        assert dst.call("GET", f"{p}db") == b"1"
        dst.call("SELECT", "0")
        assert dst.call("CONFIG", "SET", "requirepass", "sekret") == OK
        try:
            # The cached connection authenticated before the password was set stays so (as
            # on Redis); AUTH is sent before the RESTOREs all the same.
            src.call("SET", f"{p}auth", "1")
            assert src.call("MIGRATE", "127.0.0.1", str(dst_port), f"{p}auth", "0", "5000",
                            "AUTH", "sekret") == OK
            assert src.call("EXISTS", f"{p}auth") == 0
            src.call("SET", f"{p}auth2", "1")
            assert src.call("MIGRATE", "127.0.0.1", str(dst_port), f"{p}auth2", "0", "5000",
                            "AUTH2", "default", "sekret") == OK
        finally:
            dst.call("AUTH", "sekret")
            dst.call("CONFIG", "SET", "requirepass", "")
    finally:
        s.close()
        r.close()
