"""Multi-node clusters for the cluster tests (`test_cluster_bus.py`,
`test_cluster_tools.py`): Strata and redis-server nodes in cluster mode on loopback
ports, `redis-cli --cluster` run against them, their CLUSTER NODES and INFO read, and
bounded waits.
"""

import os
import subprocess
import threading
import time

import pytest

from conftest import need
from servers import STRATA_BIN, Client, start_redis, start_strata

# A short node timeout keeps failure detection within the tests' waits.
NODE_TIMEOUT_MS = 2000
CLUSTER = ["--cluster-enabled", "yes", "--cluster-node-timeout", str(NODE_TIMEOUT_MS)]


def need_strata():
    if not os.path.exists(STRATA_BIN):
        pytest.fail(f"{STRATA_BIN} not found: cargo build --release -p strata-cli")


def strata_node(node_timeout_ms=NODE_TIMEOUT_MS):
    need_strata()
    return start_strata(["--cluster-enabled", "yes",
                         "--cluster-node-timeout", str(node_timeout_ms)])


def redis_node():
    need("redis-server")
    return start_redis(CLUSTER)


def cli(*args, timeout=60):
    """`redis-cli` with `args`, answering "yes" to its questions: (exit code, output)."""
    need("redis-cli")
    r = subprocess.run(
        ["redis-cli", *args], input="yes\n", capture_output=True, text=True, timeout=timeout
    )
    return r.returncode, r.stdout + r.stderr


def addr(s):
    return f"127.0.0.1:{s.port}"


def call(port, *args):
    c = Client(port)
    try:
        return c.call(*args)
    finally:
        c.close()


def text_of(reply):
    return reply.decode() if isinstance(reply, bytes) else reply


def nodes_of(port):
    """CLUSTER NODES of the node on `port`, each line split on spaces."""
    text = text_of(call(port, "CLUSTER", "NODES"))
    return [line.split() for line in text.strip().splitlines()]


def info_of(port):
    text = text_of(call(port, "CLUSTER", "INFO"))
    return dict(line.split(":", 1) for line in text.strip().splitlines())


def node_id(s):
    return text_of(call(s.port, "CLUSTER", "MYID"))


def port_of_line(n):
    """The client port of a CLUSTER NODES line (`ip:port@cport[,hostname]`)."""
    return int(n[1].split("@")[0].rsplit(":", 1)[1])


def owner_of(port, slot):
    """The node id and client port of the master serving `slot`, as the node on `port`
    sees it (open slots `[...]` are not ownership)."""
    for n in nodes_of(port):
        if "master" not in n[2]:
            continue
        for r in n[8:]:
            if r.startswith("["):
                continue
            a, _, b = r.partition("-")
            if int(a) <= slot <= int(b or a):
                return n[0], port_of_line(n)
    return None


def slot_count(line):
    """How many slots a CLUSTER NODES line says its node serves (ranges and singles;
    open slots `[...]` are not counted)."""
    n = 0
    for r in line[8:]:
        if r.startswith("["):
            continue
        a, _, b = r.partition("-")
        n += int(b or a) - int(a) + 1
    return n


def wait_until(what, pred, timeout=30):
    deadline = time.time() + timeout
    while True:
        got = pred()
        if got:
            return got
        assert time.time() < deadline, f"{what}: not within {timeout} s"
        time.sleep(0.2)


def sees_all(s, count):
    """Whether the node knows `count` nodes, all connected, and the cluster is ok."""
    lines = nodes_of(s.port)
    return (info_of(s.port).get("cluster_state") == "ok" and len(lines) == count
            and all(n[7] == "connected" for n in lines))


def create(servers):
    code, out = cli("--cluster", "create", *[addr(s) for s in servers], "--cluster-yes")
    assert code == 0, out
    assert "[OK] All 16384 slots covered." in out, out
    # Every node sees every node, connected, and the cluster ok.
    for s in servers:
        wait_until(f"node {s.port} sees the whole cluster",
                   lambda s=s: sees_all(s, len(servers)))


def check_clean(servers):
    code, out = cli("--cluster", "check", addr(servers[0]))
    assert code == 0, out
    assert "[OK] All nodes agree about slots configuration." in out, out
    assert "[OK] All 16384 slots covered." in out, out
    assert "[ERR]" not in out and "[WARNING]" not in out, out
    return out


def wait_check_clean(servers, timeout=30):
    """`--cluster check` clean once the nodes' views have converged (a slot's new owner
    reaches the others by gossip)."""
    last = [""]

    def clean():
        code, out = cli("--cluster", "check", addr(servers[0]))
        last[0] = out
        return (code == 0 and "[OK] All nodes agree about slots configuration." in out
                and "[OK] All 16384 slots covered." in out
                and "[ERR]" not in out and "[WARNING]" not in out)

    try:
        wait_until("--cluster check clean", clean, timeout=timeout)
    except AssertionError:
        raise AssertionError(last[0])
    return last[0]


def stop_all(servers):
    for s in servers:
        s.stop()


def cluster_client(s):
    """A redis-py `RedisCluster` entering the cluster at `s`."""
    from redis.cluster import RedisCluster

    return RedisCluster(host="127.0.0.1", port=s.port, decode_responses=True,
                        socket_timeout=10)


KINDS = ["str", "cnt", "list", "hash", "set", "zset"]


class Writer(threading.Thread):
    """Writes of six kinds (SET, INCR, RPUSH, HSET, SADD, ZADD) round-robin over `nkeys`
    keys spread over all slots (or, given `tags`, over the slots of those hash tags), each
    recorded in `model` once acknowledged. A write that raised is recorded in `errors` and
    its key in `unsure` (it may or may not have happened)."""

    def __init__(self, port, nkeys, tags=None):
        super().__init__(daemon=True)
        from redis.cluster import RedisCluster

        self.rc = RedisCluster(host="127.0.0.1", port=port, decode_responses=True,
                               socket_timeout=10)
        self.nkeys = nkeys
        self.tags = tags
        self.stopping = threading.Event()
        self.model = {}
        self.errors = []
        self.unsure = set()
        self.ops = 0

    def one(self, i):
        k = i % self.nkeys
        n = i // self.nkeys
        kind = KINDS[k % len(KINDS)]
        key = f"{kind}:{k}"
        if self.tags:
            key = f"{kind}:{{{self.tags[k % len(self.tags)]}}}{k}"
        if key in self.unsure:
            return
        rc, m = self.rc, self.model
        try:
            if kind == "str":
                rc.set(key, f"v{n}")
                m[key] = f"v{n}"
            elif kind == "cnt":
                rc.incr(key)
                m[key] = m.get(key, 0) + 1
            elif kind == "list":
                rc.rpush(key, str(n))
                m.setdefault(key, []).append(str(n))
            elif kind == "hash":
                rc.hset(key, f"f{n}", str(n))
                m.setdefault(key, {})[f"f{n}"] = str(n)
            elif kind == "set":
                rc.sadd(key, f"m{n}")
                m.setdefault(key, set()).add(f"m{n}")
            else:
                rc.zadd(key, {f"m{n}": n})
                m.setdefault(key, {})[f"m{n}"] = float(n)
            self.ops += 1
        except Exception as e:  # noqa: BLE001 (every failure is recorded and asserted on)
            self.errors.append((key, repr(e)))
            self.unsure.add(key)

    def run(self):
        i = 0
        while not self.stopping.is_set():
            self.one(i)
            i += 1

    def stop(self):
        self.stopping.set()
        self.join(timeout=30)
        assert not self.is_alive(), "the writer did not stop"
        self.rc.close()


def read_key(rc, key):
    kind = key.split(":", 1)[0]
    if kind == "str":
        return rc.get(key)
    if kind == "cnt":
        v = rc.get(key)
        return None if v is None else int(v)
    if kind == "list":
        return rc.lrange(key, 0, -1)
    if kind == "hash":
        return rc.hgetall(key)
    if kind == "set":
        return rc.smembers(key)
    return dict(rc.zrange(key, 0, -1, withscores=True))


def check_model(s, writer):
    """Every acknowledged write is there exactly once: each key reads back as the model
    built from the acknowledged writes alone."""
    rc = cluster_client(s)
    try:
        wrong = []
        for key, want in writer.model.items():
            if key in writer.unsure:
                continue
            got = read_key(rc, key)
            if got != want:
                wrong.append((key, want, got))
        assert not wrong, f"{len(wrong)} keys differ, e.g. {wrong[:3]}"
    finally:
        rc.close()


@pytest.fixture
def strata_nodes():
    """Three Strata nodes in cluster mode, not yet joined."""
    need_strata()
    servers = []
    try:
        for _ in range(3):
            servers.append(start_strata(CLUSTER))
        yield servers
    finally:
        stop_all(servers)
