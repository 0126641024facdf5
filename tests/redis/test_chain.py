"""Replication continuity: chained replicas, promotion that keeps the history, a master
that keeps its history across restarts.

- Strata A <- Strata B <- Strata C under a write load of every type in two databases
  (MULTI/EXEC included): C follows B, which serves it from its log (a copy of A's stream,
  same id, same offsets); the three datasets are compared key by key once the offsets met.
- B promoted with REPLICAOF NO ONE: C (disconnected to learn the new id) and A (turned
  into B's replica, asking with its own id and offset) resume with a partial resync: B's
  `sync_partial_ok` grows by two, its `sync_full` does not; B's writes reach both.
- A redis-server 7.0.15 (or Strata) replica of a Strata master that is stopped (SHUTDOWN,
  then `kill -9`) and restarted over the same directory: the master keeps its replication
  id and offset, the replica resumes with a partial resync; killed while writes come, it
  starts a new id and the replica full-syncs to an equal dataset.

    cargo build --release -p strata-cli
    python3 -m pytest -q tests/redis/test_chain.py

Every wait is bounded and every server is stopped at the end.
"""

import shutil
import tempfile
import time

import pytest

redis = pytest.importorskip("redis")

from conftest import need  # noqa: E402
from servers import STRATA_BIN, Client, Error, Server, free_port, start_redis, start_strata  # noqa: E402
from test_replica import DBS, Writer, dataset, info, populate, wait_for  # noqa: E402

# A's PINGs would move its offset past B's once B stops following it; none come during
# the test (Redis's PINGs are no different: only the period makes the test exact).
QUIET_MASTER = ["--repl-ping-replica-period", "3600"]


def same_data(a_port, b_port):
    for db in DBS:
        a = dataset(a_port, db)
        b = dataset(b_port, db)
        assert len(a) > 0
        assert set(a) == set(b), (db, sorted(set(a) ^ set(b))[:5])
        diff = [k for k in a if a[k] != b[k]]
        assert not diff, [(k, a[k], b[k]) for k in diff[:5]]


def at(master, replica):
    """The replica's link is up and its applied offset is the master's."""
    m = info(master)["master_repl_offset"]
    s = info(replica)
    return s.get("master_link_status") == "up" and s["slave_repl_offset"] == m


def stats(r):
    s = info(r, "stats")
    return s["sync_full"], s["sync_partial_ok"]


def test_chained_replicas_then_promotion_keeps_the_history():
    servers = []
    writer = None
    try:
        a_srv = start_strata(QUIET_MASTER)
        servers.append(a_srv)
        a = redis.Redis(port=a_srv.port)
        for db in DBS:
            populate(a, db, 1500)
        writer = Writer(a_srv.port, seed=5)
        writer.start()
        b_srv = start_strata(["--replicaof", "127.0.0.1", str(a_srv.port)])
        servers.append(b_srv)
        b = redis.Redis(port=b_srv.port)
        wait_for("B's link up", lambda: info(b)["master_link_status"] == "up")
        # C asks B while the load runs: a full sync from B's dataset at B's cut.
        c_srv = start_strata(["--replicaof", "127.0.0.1", str(b_srv.port)])
        servers.append(c_srv)
        c = redis.Redis(port=c_srv.port)
        wait_for("C's link up", lambda: info(c)["master_link_status"] == "up")
        time.sleep(1.0)  # writes through A -> B -> C
        writer.stop_flag.set()
        writer.join(30)
        assert writer.error is None, writer.error
        assert writer.count > 0
        wait_for("B at A's offset", lambda: at(a, b))
        wait_for("C at B's offset", lambda: at(b, c))
        same_data(a_srv.port, b_srv.port)
        same_data(a_srv.port, c_srv.port)
        ia, ib, ic = info(a), info(b), info(c)
        # One history: the same id and offsets down the chain.
        assert ib["master_replid"] == ia["master_replid"] == ic["master_replid"]
        assert ib["master_repl_offset"] == ia["master_repl_offset"] == ic["master_repl_offset"]
        assert ib["connected_slaves"] == 1
        assert ib["slave0"]["port"] == c_srv.port and ib["slave0"]["state"] == "online"
        assert ib["repl_backlog_active"] == 1
        assert stats(b)[0] == 1  # C's full sync, served by B

        # B promoted: C learns the new id and continues; A follows B with its own history.
        full, partial = stats(b)
        old_id = ia["master_replid"]
        assert b.execute_command("REPLICAOF", "NO", "ONE") == b"OK"
        ib = info(b)
        assert ib["role"] == "master"
        assert ib["master_replid2"] == old_id
        assert ib["second_repl_offset"] == ia["master_repl_offset"] + 1
        wait_for("C's partial resync", lambda: stats(b)[1] == partial + 1)
        assert a.execute_command("REPLICAOF", "127.0.0.1", str(b_srv.port)) == b"OK"
        wait_for("A's partial resync", lambda: stats(b)[1] == partial + 2)
        for i in range(300):
            b.set(f"after-promotion:{i}", i)
        b.execute_command("SELECT", 2)
        with b.pipeline(transaction=True) as p:
            p.rpush("l:1", "from-b")
            p.incr("int:1")
            p.execute()
        wait_for("A at B's offset", lambda: at(b, a))
        wait_for("C at B's offset", lambda: at(b, c))
        assert stats(b) == (full, partial + 2)
        same_data(b_srv.port, a_srv.port)
        same_data(b_srv.port, c_srv.port)
        ia, ib, ic = info(a), info(b), info(c)
        assert ia["master_replid"] == ib["master_replid"] == ic["master_replid"] != old_id
        assert ia["master_replid2"] == ic["master_replid2"] == old_id
        assert ib["connected_slaves"] == 2
    finally:
        if writer is not None:
            writer.stop_flag.set()
        for srv in reversed(servers):
            srv.stop()


def test_a_replica_refuses_sync_until_its_link_is_up():
    need("redis-server")
    srv = start_strata(["--replicaof", "127.0.0.1", str(free_port())])
    try:
        c = Client(srv.port)
        reply = c.call("PSYNC", "?", "-1")
        assert reply == Error(b"NOMASTERLINK Can't SYNC while not connected with my master")
        c.close()
    finally:
        srv.stop()


@pytest.mark.parametrize("replica_kind", ["redis", "strata"])
@pytest.mark.parametrize("how", ["shutdown", "kill"])
def test_a_restarted_master_keeps_its_history(how, replica_kind):
    """SHUTDOWN (or, once idle, `kill -9`) of a Strata master, then a restart over the same
    directory and port: the same id and offset, and its replica (redis-server or Strata)
    resumes with a partial resync (`+CONTINUE`): the master counts one, and no full sync."""
    if replica_kind == "redis":
        need("redis-server")
    servers = []
    tmp = tempfile.mkdtemp(prefix="strata-serve-")
    port = free_port()

    def master_server():
        argv = [STRATA_BIN, "serve", "--bind", "127.0.0.1", "--port", str(port),
                "--dir", tmp] + QUIET_MASTER
        srv = Server("strata serve", argv, port)
        servers.append(srv)
        return srv

    writer = None
    try:
        first = master_server()
        m = redis.Redis(port=port)
        for db in DBS:
            populate(m, db, 800)
        writer = Writer(port, seed=3)
        writer.start()
        start_replica = start_redis if replica_kind == "redis" else start_strata
        r_srv = start_replica(["--replicaof", "127.0.0.1", str(port)])
        servers.append(r_srv)
        r = redis.Redis(port=r_srv.port)
        wait_for("the replica's link up", lambda: info(r)["master_link_status"] == "up")
        time.sleep(1.0)
        writer.stop_flag.set()
        writer.join(30)
        assert writer.error is None, writer.error
        wait_for("the replica at the master's offset", lambda: at(m, r))
        before = info(m)
        if how == "kill":
            time.sleep(1.5)  # idle: the history file is written (repl/history.rs)
            first.proc.kill()
        else:
            Client(port).send(["SHUTDOWN"])
        first.proc.wait(timeout=30)
        master_server()
        m = redis.Redis(port=port)
        after = info(m)
        assert after["master_replid"] == before["master_replid"], (before, after)
        assert after["master_repl_offset"] == before["master_repl_offset"]
        wait_for("the partial resync", lambda: stats(m)[1] == 1)
        for i in range(200):
            m.set(f"after-restart:{i}", i)
        wait_for("the replica at the master's offset again", lambda: at(m, r))
        assert stats(m) == (0, 1)
        for db in DBS:
            want, got = dataset(port, db), dataset(r_srv.port, db)
            assert set(got) == set(want), (db, sorted(set(got) ^ set(want))[:5])
            diff = [k for k in want if want[k] != got[k]]
            assert not diff, [(k, want[k], got[k]) for k in diff[:5]]
    finally:
        if writer is not None:
            writer.stop_flag.set()
        for srv in reversed(servers):
            srv.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def test_a_master_killed_under_load_starts_a_new_history():
    """`kill -9` of a Strata master while writes come: the data may hold writes its log
    never got to disk, so the restarted master takes a new id and its redis-server replica
    full-syncs (never a partial resync that would miss them); the datasets end equal."""
    need("redis-server")
    servers = []
    tmp = tempfile.mkdtemp(prefix="strata-serve-")
    port = free_port()

    def master_server():
        argv = [STRATA_BIN, "serve", "--bind", "127.0.0.1", "--port", str(port),
                "--dir", tmp] + QUIET_MASTER
        srv = Server("strata serve", argv, port)
        servers.append(srv)
        return srv

    writer = None
    try:
        first = master_server()
        m = redis.Redis(port=port)
        for db in DBS:
            populate(m, db, 500)
        r_srv = start_redis(["--replicaof", "127.0.0.1", str(port)])
        servers.append(r_srv)
        r = redis.Redis(port=r_srv.port)
        wait_for("the replica's link up", lambda: info(r)["master_link_status"] == "up")
        old_id = info(m)["master_replid"]
        writer = Writer(port, seed=9)
        writer.start()
        time.sleep(1.0)
        first.proc.kill()
        first.proc.wait(timeout=30)
        writer.join(30)  # it ends on the lost connection
        master_server()
        m = redis.Redis(port=port)
        assert info(m)["master_replid"] != old_id
        wait_for("the replica at the master's offset", lambda: at(m, r))
        assert stats(m) == (1, 0)
        for db in DBS:
            want, got = dataset(port, db), dataset(r_srv.port, db)
            assert set(got) == set(want), (db, sorted(set(got) ^ set(want))[:5])
            diff = [k for k in want if want[k] != got[k]]
            assert not diff, [(k, want[k], got[k]) for k in diff[:5]]
    finally:
        if writer is not None:
            writer.stop_flag.set()
        for srv in reversed(servers):
            srv.stop()
        shutil.rmtree(tmp, ignore_errors=True)
