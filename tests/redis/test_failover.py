"""FAILOVER [TO host port [FORCE]] [ABORT] [TIMEOUT ms], as Redis 7.0.15 does it: the
master holds writes, waits for a replica's ACK of the whole stream, then follows it with
`PSYNC <replid> <offset+1> FAILOVER`, which promotes the replica. Between Strata nodes,
and with redis-server 7.0.15 on either side; the error replies compared with
redis-server's; a replica that never catches up (stopped with SIGSTOP) aborts the
failover at its timeout and the held writes run.

Between Strata nodes nobody full-syncs: the promoted node keeps the old master's stream
and id (`master_replid2`), so the demoted master and the other replicas, moved to it,
resume with `+CONTINUE` (a redis-server on either side may differ and is not counted).

    cargo build --release -p strata-cli
    python3 -m pytest -q tests/redis/test_failover.py

Every wait is bounded and every server is stopped at the end.
"""

import os
import signal
import time

import pytest

redis = pytest.importorskip("redis")

from servers import start_redis, start_strata  # noqa: E402
from test_replica import wait_for  # noqa: E402

FAST = ["--repl-diskless-sync-delay", "0"]


def start(kind, extra=()):
    return (start_redis if kind == "redis" else start_strata)(list(extra))


def conn(server):
    return redis.Redis(port=server.port, socket_timeout=20, decode_responses=True)


def follows(r, port):
    i = r.info("replication")
    return i["role"] == "slave" and int(i["master_port"]) == port and i["master_link_status"] == "up"


def pair(master_kind, replica_kind):
    m = start(master_kind, FAST)
    r = start(replica_kind, FAST + ["--replicaof", "127.0.0.1", str(m.port)])
    mc, rc = conn(m), conn(r)
    wait_for("the replica online", lambda: follows(rc, m.port))
    wait_for("the master sees it", lambda: mc.info("replication")["connected_slaves"] == 1)
    return m, r, mc, rc


@pytest.mark.parametrize(
    "master_kind,replica_kind",
    [("strata", "strata"), ("strata", "redis"), ("redis", "strata")],
)
def test_failover_hands_the_master_role_over(master_kind, replica_kind):
    m, r, mc, rc = pair(master_kind, replica_kind)
    try:
        for i in range(200):
            mc.set(f"k:{i}", i)
        mc.rpush("list", *range(50))
        with_target = master_kind == "strata"
        if with_target:
            assert mc.execute_command("FAILOVER", "TO", "127.0.0.1", r.port, "TIMEOUT", 10000) == "OK"
        else:
            assert mc.execute_command("FAILOVER") == "OK"
        wait_for("the replica promoted", lambda: rc.info("replication")["role"] == "master")
        wait_for("the old master following", lambda: follows(mc, r.port))
        wait_for(
            "the failover over",
            lambda: mc.info("replication")["master_failover_state"] == "no-failover",
        )
        assert rc.info("replication")["master_failover_state"] == "no-failover"
        assert rc.get("k:199") == "199" and rc.llen("list") == 50
        # The new master's writes reach the old one; the old one is read-only now.
        rc.set("after", "1")
        assert rc.execute_command("WAIT", 1, 10000) == 1
        assert mc.get("after") == "1"
        with pytest.raises(redis.ReadOnlyError):
            mc.set("x", "1")
        assert mc.execute_command("ROLE")[0] == "slave"
    finally:
        m.stop()
        r.stop()


def sync_stats(c):
    s = c.info("stats")
    return s["sync_full"], s["sync_partial_ok"]


def test_failover_leaves_every_replica_partially_resynced():
    """A Strata master M with Strata replicas R1 and R2; FAILOVER TO R1. M continues R1's
    stream (R1 kept M's history); R2 stays M's replica, as with Redis, and resumes from M
    when M's id changes; moved to R1 by REPLICAOF it resumes there too. R1 counts two
    partial resyncs and no full sync, and its writes reach both."""
    m = start("strata", FAST)
    r1 = start("strata", FAST + ["--replicaof", "127.0.0.1", str(m.port)])
    r2 = start("strata", FAST + ["--replicaof", "127.0.0.1", str(m.port)])
    mc, c1, c2 = conn(m), conn(r1), conn(r2)
    try:
        wait_for("both replicas online", lambda: follows(c1, m.port) and follows(c2, m.port))
        wait_for("the master sees them", lambda: mc.info("replication")["connected_slaves"] == 2)
        for i in range(300):
            mc.set(f"k:{i}", i)
        mc.hset("h", mapping={f"f{i}": i for i in range(50)})
        assert mc.execute_command("WAIT", 2, 10000) == 2
        old_id = mc.info("replication")["master_replid"]
        assert sync_stats(c1) == (0, 0)
        assert mc.execute_command("FAILOVER", "TO", "127.0.0.1", r1.port, "TIMEOUT", 10000) == "OK"
        wait_for("R1 promoted", lambda: c1.info("replication")["role"] == "master")
        wait_for("M following R1", lambda: follows(mc, r1.port))
        wait_for(
            "the failover over",
            lambda: mc.info("replication")["master_failover_state"] == "no-failover",
        )
        wait_for("M's partial resync on R1", lambda: sync_stats(c1)[1] == 1)
        new_id = c1.info("replication")["master_replid"]
        assert new_id != old_id and c1.info("replication")["master_replid2"] == old_id
        # R2 learnt the new id from M (disconnected, then `+CONTINUE`), then moves to R1.
        wait_for("R2 on M's new id", lambda: follows(c2, m.port)
                 and c2.info("replication")["master_replid"] == new_id)
        assert c2.execute_command("REPLICAOF", "127.0.0.1", r1.port) == "OK"
        wait_for("R2 following R1", lambda: follows(c2, r1.port))
        assert sync_stats(c1) == (0, 2)
        c1.set("after", "1")
        assert c1.execute_command("WAIT", 2, 10000) == 2
        for c in (mc, c2):
            assert c.get("after") == "1" and c.get("k:299") == "299" and c.hlen("h") == 50
        assert sync_stats(c1) == (0, 2)
    finally:
        for srv in (r2, r1, m):
            srv.stop()


def replies(c, *cmds):
    out = []
    for cmd in cmds:
        try:
            out.append(c.execute_command(*cmd))
        except redis.ResponseError as e:
            out.append(f"-{e}")
    return out


def test_failover_errors_as_redis():
    without = [
        ("FAILOVER", "ABORT"),
        ("FAILOVER",),
        ("FAILOVER", "TIMEOUT", 0),
        ("FAILOVER", "TIMEOUT", "x"),
        ("FAILOVER", "TO", "127.0.0.1"),
        ("FAILOVER", "TO", "127.0.0.1", "x"),
        ("FAILOVER", "FORCE", "FORCE"),
        ("FAILOVER", "ABORT", "TIMEOUT", 10),
        ("FAILOVER", "BOGUS"),
    ]
    with_replica = [
        ("FAILOVER", "FORCE"),
        ("FAILOVER", "TO", "127.0.0.1", 1, "FORCE"),
        ("FAILOVER", "TIMEOUT", 100, "FORCE"),
        ("FAILOVER", "TO", "127.0.0.1", 1),
        ("FAILOVER", "ABORT"),
    ]
    got = {}
    for kind in ("redis", "strata"):
        alone = start(kind)
        try:
            got[kind] = replies(conn(alone), *without)
        finally:
            alone.stop()
        m, r, mc, rc = pair(kind, kind)
        try:
            got[kind] += replies(mc, *with_replica)
            got[kind] += replies(rc, ("FAILOVER",))
        finally:
            m.stop()
            r.stop()
    assert len(got["redis"]) == 15
    assert got["strata"] == got["redis"], got


def test_failover_times_out_when_the_replica_never_catches_up():
    m, r, mc, rc = pair("strata", "strata")
    try:
        mc.set("before", "1")
        os.kill(r.proc.pid, signal.SIGSTOP)
        try:
            mc.set("unseen", "1")  # the stopped replica never ACKs this
            started = time.time()
            assert mc.execute_command("FAILOVER", "TIMEOUT", 3000) == "OK"
            assert mc.info("replication")["master_failover_state"] == "waiting-for-sync"
            # Writes are held meanwhile, then run once the failover is aborted.
            assert mc.set("held", "1")
            assert time.time() - started >= 2.9
            assert mc.info("replication")["master_failover_state"] == "no-failover"
            assert mc.info("replication")["role"] == "master"
            assert replies(mc, ("FAILOVER", "ABORT")) == ["-No failover in progress."]
            # ABORT while waiting; REPLICAOF refused meanwhile, as Redis refuses it.
            assert mc.execute_command("FAILOVER") == "OK"
            assert replies(mc, ("FAILOVER",), ("REPLICAOF", "NO", "ONE")) == [
                "-FAILOVER already in progress.",
                "-REPLICAOF not allowed while failing over.",
            ]
            assert mc.execute_command("FAILOVER", "ABORT") == "OK"
            assert mc.set("after-abort", "1")
        finally:
            os.kill(r.proc.pid, signal.SIGCONT)
        wait_for("the replica caught up", lambda: rc.get("after-abort") == "1")
        assert mc.info("replication")["role"] == "master"
    finally:
        m.stop()
        r.stop()


def plain(x):
    if isinstance(x, Exception):
        return f"-{x}"
    if isinstance(x, list):
        return [plain(y) for y in x]
    return x


def test_sentinel_reconfiguration_transaction_as_redis():
    """The transaction Sentinel sends to promote a replica and to point a node at a new
    master: the same replies as redis-server's, the other normal and pub/sub clients
    disconnected, the sender kept."""
    got = {}
    for kind in ("redis", "strata"):
        m, r, mc, rc = pair(kind, kind)
        other = conn(r)
        sub = conn(r).pubsub()
        try:
            other.ping()
            sub.subscribe("__sentinel__:hello")
            sub.get_message(timeout=5)
            sender = conn(r).pipeline(transaction=False)
            for cmd in (
                ("MULTI",),
                ("SLAVEOF", "NO", "ONE"),
                ("CONFIG", "REWRITE"),
                ("CLIENT", "KILL", "TYPE", "normal"),
                ("CLIENT", "KILL", "TYPE", "pubsub"),
                ("EXEC",),
            ):
                sender.execute_command(*cmd)
            out = sender.execute(raise_on_error=False)
            got[kind] = plain(out)
            assert rc.info("replication")["role"] == "master"
            # Left: the sender and rc (reconnected by redis-py).
            assert rc.info("clients")["connected_clients"] == 2
            # Back under the master, by the same transaction.
            back = conn(r).pipeline(transaction=True)
            back.execute_command("SLAVEOF", "127.0.0.1", m.port)
            back.execute_command("CLIENT", "KILL", "TYPE", "normal")
            assert back.execute()[0] is True
            wait_for("the replica back", lambda: follows(rc, m.port))
        finally:
            m.stop()
            r.stop()
    assert got["strata"] == got["redis"], got


def test_replicas_are_known_by_their_announced_address():
    """`replica-announce-ip/port`: the address the master's INFO shows (Sentinel's view)
    and the one FAILOVER TO names."""
    m = start("strata", FAST)
    r = start("strata", FAST + ["--replicaof", "127.0.0.1", str(m.port),
                                "--replica-announce-ip", "127.0.0.2",
                                "--replica-announce-port", "7777"])
    try:
        mc, rc = conn(m), conn(r)
        wait_for("the replica online", lambda: follows(rc, m.port))
        wait_for("the master sees it", lambda: mc.info("replication").get("slave0", {}).get("state") == "online")
        s0 = mc.info("replication")["slave0"]
        assert (s0["ip"], s0["port"]) == ("127.0.0.2", 7777)
        assert replies(mc, ("FAILOVER", "TO", "127.0.0.1", r.port)) == [
            "-FAILOVER target HOST and PORT is not a replica."
        ]
        assert mc.execute_command("FAILOVER", "TO", "127.0.0.2", 7777, "TIMEOUT", 200) == "OK"
        # The announced address is not where the replica listens: the hand-over cannot
        # reach it; ABORT makes the node a master again.
        wait_for("the hand-over", lambda: mc.info("replication")["master_failover_state"] != "waiting-for-sync")
        assert mc.execute_command("FAILOVER", "ABORT") == "OK"
        assert mc.info("replication")["role"] == "master"
        assert mc.set("k", "1")
    finally:
        m.stop()
        r.stop()


def test_force_fails_over_to_a_replica_that_is_behind():
    """FORCE: past the timeout the master hands over to the target even though it did not
    acknowledge everything (its writes after the target's last ACK are lost, as in Redis)."""
    m, r, mc, rc = pair("strata", "strata")
    try:
        mc.set("seen", "1")
        assert mc.execute_command("WAIT", 1, 10000) == 1
        os.kill(r.proc.pid, signal.SIGSTOP)
        try:
            mc.set("unseen", "1")
            cmd = ("FAILOVER", "TO", "127.0.0.1", r.port, "FORCE", "TIMEOUT", 500)
            assert mc.execute_command(*cmd) == "OK"
            wait_for(
                "the hand-over",
                lambda: mc.info("replication")["master_failover_state"] == "failover-in-progress",
                timeout=30,
            )
        finally:
            os.kill(r.proc.pid, signal.SIGCONT)
        wait_for("the replica promoted", lambda: rc.info("replication")["role"] == "master")
        wait_for("the old master following", lambda: follows(mc, r.port))
        assert mc.info("replication")["master_failover_state"] == "no-failover"
        assert rc.get("seen") == "1"
        rc.set("new", "1")
        assert rc.execute_command("WAIT", 1, 10000) == 1
        assert mc.get("new") == "1"
    finally:
        m.stop()
        r.stop()
