"""redis-sentinel 7.0.15 managing a group of Strata nodes: one master and two replicas,
each with a configuration file of its own (Sentinel's reconfiguration ends in CONFIG
REWRITE), watched by three `redis-sentinel` processes (quorum 2).

- The failover end to end: the sentinels find the replicas (the master's INFO) and each
  other (the `__sentinel__:hello` channel on every node); a redis-py `Sentinel` client
  writes; the master is killed with SIGKILL; the sentinels promote the replica that may be
  promoted (the other has `replica-priority 0`) with `MULTI; SLAVEOF NO ONE; CONFIG
  REWRITE; CLIENT KILL TYPE normal; CLIENT KILL TYPE pubsub; EXEC` and point the other at
  it; the client writes again through Sentinel; the old master, restarted, is turned into
  a replica of the new one and catches up.
- A busy script: a master that answers Sentinel's PING with `-BUSY` for longer than
  `down-after-milliseconds` gets `SCRIPT KILL` from Sentinel (one sentinel, quorum 2, so
  that no failover starts) and serves again.
- The crash test: every write of a load is followed by `WAIT 1 0`; the master is killed
  during the load; after the failover every write that WAIT acknowledged is on the new
  master.

The replica moved to the new master resumes with a partial resync: the promoted node
kept the old master's stream and id (`master_replid2`), so the new master counts a
partial resync and no full sync. The old master, killed with writes just before, starts
a new history at its restart and may full-sync.

    cargo build --release -p strata-cli
    python3 -m pytest -q tests/redis/test_sentinel.py

Every wait is bounded; every process is stopped and every directory removed at the end.
"""

import os
import shutil
import tempfile
import threading
import time

import pytest

redis = pytest.importorskip("redis")

from redis.sentinel import Sentinel  # noqa: E402
from servers import STRATA_BIN, Server, free_port  # noqa: E402
from test_replica import wait_for  # noqa: E402

NAME = "group"
DOWN_AFTER_MS = 1500
FAILOVER_TIMEOUT_MS = 20000


def log_of(server):
    try:
        server.log.seek(0)
        return server.log.read().decode(errors="replace")[-4000:]
    except (OSError, ValueError):
        return ""


class Group:
    """Strata nodes and sentinels on loopback ports under one temporary directory."""

    def __init__(self, priorities):
        if shutil.which("redis-sentinel") is None:
            pytest.skip("redis-sentinel not found (apt-get install redis-sentinel)")
        if not os.path.exists(STRATA_BIN):
            pytest.fail(f"{STRATA_BIN} not found: cargo build --release -p strata-cli")
        self.tmp = tempfile.mkdtemp(prefix="strata-sentinel-")
        self.ports = [free_port() for _ in priorities]
        self.priorities = priorities
        self.nodes = {}
        self.sentinels = []

    def conf_path(self, i):
        return os.path.join(self.tmp, f"node-{i}.conf")

    def start_node(self, i, replicaof=None):
        path = self.conf_path(i)
        if not os.path.exists(path):
            lines = [
                "bind 127.0.0.1",
                f"port {self.ports[i]}",
                f"dir {os.path.join(self.tmp, f'node-{i}')}",
                "repl-diskless-sync-delay 0",
                f"replica-priority {self.priorities[i]}",
            ]
            if replicaof is not None:
                lines.append(f"replicaof 127.0.0.1 {replicaof}")
            with open(path, "w") as f:
                f.write("\n".join(lines) + "\n")
        port = self.ports[i]
        self.nodes[i] = Server(f"strata node {i}", [STRATA_BIN, "serve", path], port)
        return self.nodes[i]

    def start(self):
        master = self.ports[0]
        self.start_node(0)
        for i in range(1, len(self.ports)):
            self.start_node(i, replicaof=master)
        m = self.client(0)
        for i in range(1, len(self.ports)):
            r = self.client(i)
            wait_for(f"node {i}'s link", lambda: r.info("replication")["master_link_status"] == "up")
        wait_for("the replicas online", lambda: m.info("replication")["connected_slaves"] == 2)
        for _ in range(3):
            port = free_port()
            d = os.path.join(self.tmp, f"sentinel-{port}")
            os.mkdir(d)
            conf = os.path.join(d, "sentinel.conf")
            with open(conf, "w") as f:
                f.write(
                    "\n".join(
                        [
                            "bind 127.0.0.1",
                            f"port {port}",
                            f"dir {d}",
                            "daemonize no",
                            'logfile ""',
                            f"sentinel monitor {NAME} 127.0.0.1 {master} 2",
                            f"sentinel down-after-milliseconds {NAME} {DOWN_AFTER_MS}",
                            f"sentinel failover-timeout {NAME} {FAILOVER_TIMEOUT_MS}",
                        ]
                    )
                    + "\n"
                )
            self.sentinels.append(Server("redis-sentinel", ["redis-sentinel", conf], port))
        # Each sentinel sees both replicas (from the master's INFO) and the two other
        # sentinels (their hello messages on the nodes' `__sentinel__:hello` channel).
        for s in self.sentinel_clients():
            wait_for("the replicas in Sentinel", lambda: self.seen_replicas(s) == set(self.ports[1:]))
            wait_for("the other sentinels", lambda: len(s.execute_command("SENTINEL", "SENTINELS", NAME)) == 2)

    def client(self, i, **kw):
        return redis.Redis(port=self.ports[i], socket_timeout=10, decode_responses=True, **kw)

    def sentinel_clients(self):
        return [redis.Redis(port=s.port, socket_timeout=5, decode_responses=True) for s in self.sentinels]

    def seen_replicas(self, s, healthy=True):
        out = set()
        for r in s.execute_command("SENTINEL", "REPLICAS", NAME):
            d = dict(zip(r[::2], r[1::2])) if isinstance(r, list) else r
            flags = d["flags"].split(",")
            if not healthy or not ({"s_down", "disconnected"} & set(flags)):
                out.add(int(d["port"]))
        return out

    def master_addr(self):
        """The master's port if every sentinel names the same one, else None."""
        addrs = set()
        for s in self.sentinel_clients():
            a = s.execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", NAME)
            addrs.add(int(a[1]) if a else None)
        return addrs.pop() if len(addrs) == 1 else None

    def kill9(self, i):
        node = self.nodes[i]
        node.proc.kill()
        node.proc.wait(10)

    def logs(self):
        return "\n".join(f"--- {s.name} ({s.port})\n{log_of(s)}" for s in [*self.nodes.values(), *self.sentinels])

    def stop(self):
        for s in [*self.sentinels, *self.nodes.values()]:
            s.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)


def follows(r, master_port):
    i = r.info("replication")
    return (
        i.get("role") == "slave"
        and int(i.get("master_port", -1)) == master_port
        and i.get("master_link_status") == "up"
    )


def caught_up(m, r):
    return r.info("replication").get("slave_repl_offset") == m.info("replication")["master_repl_offset"]


def retry_write(conn, key, value, timeout=60):
    """A write through the Sentinel client, retried while the failover is under way."""
    deadline = time.time() + timeout
    while True:
        try:
            return conn.set(key, value)
        except (redis.ConnectionError, redis.TimeoutError, redis.ReadOnlyError) as e:
            if time.time() > deadline:
                raise AssertionError(f"no write through Sentinel within {timeout} s: {e}")
            time.sleep(0.2)


def test_sentinel_fails_over_a_strata_group():
    # Node 2 may never be promoted: Sentinel reads `slave_priority:0` from its INFO.
    g = Group(priorities=[100, 100, 0])
    try:
        g.start()
        old, new, other = g.ports
        assert g.master_addr() == old
        sentinel = Sentinel([("127.0.0.1", s.port) for s in g.sentinels], socket_timeout=5)
        assert sentinel.discover_master(NAME) == ("127.0.0.1", old)
        assert {p for _, p in sentinel.discover_slaves(NAME)} == {new, other}
        conn = sentinel.master_for(NAME, socket_timeout=5, decode_responses=True)
        for i in range(100):
            assert conn.set(f"before:{i}", i)
        assert conn.wait(2, 10000) == 2

        g.kill9(0)
        wait_for("Sentinel to promote node 1", lambda: g.master_addr() == new, timeout=90)
        n = g.client(1)
        wait_for("node 1 a master", lambda: n.info("replication")["role"] == "master")
        o = g.client(2)
        wait_for("node 2 to follow node 1", lambda: follows(o, new), timeout=90)
        stats = n.info("stats")
        assert (stats["sync_full"], stats["sync_partial_ok"]) == (0, 1), stats

        # The client finds the new master through Sentinel and writes again.
        for i in range(100):
            assert retry_write(conn, f"after:{i}", i)
        assert conn.connection_pool.get_master_address() == ("127.0.0.1", new)
        for i in range(100):
            assert n.get(f"before:{i}") == str(i)
            assert n.get(f"after:{i}") == str(i)
        wait_for("node 2 caught up", lambda: caught_up(n, o))
        assert o.get("after:99") == "99"

        # CONFIG REWRITE in Sentinel's transaction: the promoted node's file names no
        # master, the other's names the new one.
        with open(g.conf_path(1)) as f:
            assert not [ln for ln in f if ln.startswith("replicaof")]
        with open(g.conf_path(2)) as f:
            assert f"replicaof 127.0.0.1 {new}\n" in f.readlines()

        # The old master comes back as a master with its old data; Sentinel turns it into
        # a replica of the new one.
        g.nodes[0].stop()
        g.start_node(0)
        m = g.client(0)
        wait_for("the old master to follow node 1", lambda: follows(m, new), timeout=90)
        wait_for("the old master caught up", lambda: caught_up(n, m))
        assert m.get("after:0") == "0" and m.get("before:99") == "99"
        for s in g.sentinel_clients():
            wait_for("Sentinel to list the old master", lambda: g.seen_replicas(s) == {old, other})
        assert retry_write(conn, "last", "1")
        assert conn.wait(2, 10000) == 2
        assert m.get("last") == "1"
    except BaseException:
        print(g.logs())
        raise
    finally:
        g.stop()


class AckedWriter(threading.Thread):
    """SET then `WAIT 1 0` in a loop on the master; remembers what WAIT acknowledged."""

    def __init__(self, port):
        super().__init__(daemon=True)
        self.conn = redis.Redis(port=port, socket_timeout=10, decode_responses=True)
        self.acked = []
        self.sent = 0
        self.error = None

    def run(self):
        i = 0
        try:
            while True:
                self.conn.set(f"w:{i}", i)
                self.sent = i + 1
                if self.conn.execute_command("WAIT", 1, 0) >= 1:
                    self.acked.append(i)
                i += 1
        except (redis.ConnectionError, redis.TimeoutError) as e:
            self.error = e  # the master died: the load ends


def test_acknowledged_writes_survive_failover():
    g = Group(priorities=[100, 100, 100])
    try:
        g.start()
        old = g.ports[0]
        w = AckedWriter(old)
        w.start()
        wait_for("a load under way", lambda: len(w.acked) >= 300, timeout=60, step=0.01)
        g.kill9(0)
        w.join(30)
        assert not w.is_alive() and w.error is not None
        wait_for("a new master", lambda: g.master_addr() not in (None, old), timeout=90)
        new = g.master_addr()
        n = g.client(g.ports.index(new))
        wait_for("the new master promoted", lambda: n.info("replication")["role"] == "master")
        missing = [i for i in w.acked if n.get(f"w:{i}") != str(i)]
        assert not missing, (len(missing), missing[:10], len(w.acked), w.sent)
    except BaseException:
        print(g.logs())
        raise
    finally:
        g.stop()


def test_sentinel_kills_a_busy_script():
    if shutil.which("redis-sentinel") is None:
        pytest.skip("redis-sentinel not found (apt-get install redis-sentinel)")
    tmp = tempfile.mkdtemp(prefix="strata-sentinel-")
    port, sport = free_port(), free_port()
    master = sentinel = None
    try:
        master = Server(
            "strata",
            [STRATA_BIN, "serve", "--bind", "127.0.0.1", "--port", str(port), "--dir",
             os.path.join(tmp, "node"), "--busy-reply-threshold", "100"],
            port,
        )
        conf = os.path.join(tmp, "sentinel.conf")
        with open(conf, "w") as f:
            f.write(
                f"bind 127.0.0.1\nport {sport}\ndir {tmp}\nlogfile \"\"\n"
                f"sentinel monitor {NAME} 127.0.0.1 {port} 2\n"
                f"sentinel down-after-milliseconds {NAME} 1000\n"
            )
        sentinel = Server("redis-sentinel", ["redis-sentinel", conf], sport)
        s = redis.Redis(port=sport, socket_timeout=5, decode_responses=True)
        # Connected, with the master's INFO read (its run id known).
        wait_for("Sentinel connected", lambda: s.sentinel_master(NAME).get("runid"))
        c = redis.Redis(port=port, socket_timeout=60, decode_responses=True)
        started = time.time()
        with pytest.raises(redis.ResponseError, match="Script killed by user with SCRIPT KILL"):
            c.eval("while true do end", 0)
        assert time.time() - started < 30
        # Sentinel sends SCRIPT KILL to a master it holds subjectively down for -BUSY.
        assert "+sdown master" in log_of(sentinel)
        assert redis.Redis(port=port, socket_timeout=5).ping()
    except BaseException:
        for x in (master, sentinel):
            if x is not None:
                print(f"--- {x.name}\n{log_of(x)}")
        raise
    finally:
        for x in (sentinel, master):
            if x is not None:
                x.stop()
        shutil.rmtree(tmp, ignore_errors=True)
