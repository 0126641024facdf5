"""The full sync between two Strata nodes by snapshot stream (`repl/ship.rs`,
`docs/format/snapshot-stream.md`) instead of an RDB, and where an RDB is still used:

- a Strata master under a write load of every type (`test_replica.py`'s), a Strata replica
  that announces `capa strata-snapshot`: the master's log says it sent the snapshot
  stream, the replica's that it loaded it, and the datasets are equal key by key once the
  offsets meet; a replica started with `repl-strata-snapshot no` gets an RDB;
- a Strata replica of a redis-server master: an RDB (redis-server ignores the capability);
- a snapshot stream damaged, then cut, on its way (a proxy between the nodes flips a byte,
  then closes the link midway): the replica refuses each, keeps serving its old data, and
  the third, whole transfer installs the master's dataset;
- a replica killed while it loads the stream as it arrives: restarted, its old dataset and
  nothing of the master's, no spool left behind; then a full resync installs the master's.

    cargo build --release -p strata-server
    python3 -m pytest -q tests/redis/test_snapshot_sync.py

Every wait is bounded and every server and proxy is stopped at the end.
"""

import os
import shutil
import socket
import tempfile
import threading
import time

import pytest

redis = pytest.importorskip("redis")

from servers import STRATA_BIN, Server, free_port, start_redis, start_strata  # noqa: E402
from test_master import caught_up, compare, synced_under_load  # noqa: E402
from test_replica import DBS, Writer, dataset, populate, wait_for  # noqa: E402


def log_of(server):
    server.log.flush()
    server.log.seek(0)
    return server.log.read().decode(errors="replace")


def follow(master_args, replica_args):
    """A Strata master under a write load, a Strata replica following it; returns the
    two logs once the datasets compared equal."""
    master = start_strata(master_args)
    replica = None
    writer = None
    try:
        m = redis.Redis(port=master.port)
        for db in DBS:
            populate(m, db, 2000)
        writer = Writer(master.port, 11)
        writer.start()
        time.sleep(0.3)
        replica = start_strata(["--replicaof", "127.0.0.1", str(master.port)] + replica_args)
        r = redis.Redis(port=replica.port)
        synced_under_load(m, r, writer, master.port, replica.port)
        return log_of(master), log_of(replica)
    finally:
        if writer is not None:
            writer.stop_flag.set()
        if replica is not None:
            replica.stop()
        master.stop()


@pytest.mark.parametrize("diskless", ["yes", "no"])
def test_a_strata_replica_syncs_by_snapshot_stream_under_load(diskless):
    mlog, rlog = follow(
        ["--repl-diskless-sync", diskless, "--repl-diskless-sync-delay", "0"], []
    )
    assert "sent the snapshot stream" in mlog, mlog
    assert "loaded" in rlog and "from the master" in rlog, rlog


def test_a_replica_that_does_not_ask_gets_an_rdb():
    mlog, rlog = follow(
        ["--repl-diskless-sync-delay", "0"], ["--repl-strata-snapshot", "no"]
    )
    assert "snapshot stream" not in mlog, mlog
    assert "snapshot stream" not in rlog, rlog


def test_a_strata_replica_of_redis_server_gets_an_rdb():
    master = start_redis(["--repl-diskless-sync-delay", "0"])
    replica = None
    try:
        m = redis.Redis(port=master.port)
        for db in DBS:
            populate(m, db, 500)
        replica = start_strata(["--replicaof", "127.0.0.1", str(master.port)])
        r = redis.Redis(port=replica.port)
        wait_for("the link up", lambda: r.info("replication").get("master_link_status") == "up")
        wait_for("the offsets to meet", lambda: caught_up(m, r))
        compare(master.port, replica.port)
        rlog = log_of(replica)
        assert "snapshot stream" not in rlog, rlog
        assert "loaded" in rlog, rlog
    finally:
        if replica is not None:
            replica.stop()
        master.stop()


class Proxy(threading.Thread):
    """Forwards 127.0.0.1:port to the master. Of the master's bytes on the n-th connection
    (from 0), `plan[n]` says what happens past byte `at`: "flip" one bit of that byte,
    "cut" the connection there; past the plan, everything is forwarded."""

    def __init__(self, master_port, plan, at):
        super().__init__(daemon=True)
        self.master_port = master_port
        self.plan = plan
        self.at = at
        self.conns = 0
        self.done = []  # what happened on each connection
        self.stop_flag = threading.Event()
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.open = []

    def run(self):
        while not self.stop_flag.is_set():
            try:
                down, _ = self.sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            up = socket.create_connection(("127.0.0.1", self.master_port), timeout=10)
            self.open += [down, up]
            action = self.plan[self.conns] if self.conns < len(self.plan) else "pass"
            self.conns += 1
            threading.Thread(target=self.pipe, args=(down, up, None), daemon=True).start()
            threading.Thread(target=self.pipe, args=(up, down, action), daemon=True).start()

    def pipe(self, src, dst, action):
        seen = 0
        try:
            while not self.stop_flag.is_set():
                b = src.recv(1 << 16)
                if not b:
                    break
                if action in ("flip", "cut") and seen + len(b) > self.at:
                    i = self.at - seen
                    if action == "cut":
                        dst.sendall(b[:i])
                        self.done.append("cut")
                        break
                    b = b[:i] + bytes([b[i] ^ 0x20]) + b[i + 1:]
                    self.done.append("flip")
                    action = "pass"
                seen += len(b)
                dst.sendall(b)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def stop(self):
        self.stop_flag.set()
        self.sock.close()
        for s in self.open:
            try:
                s.close()
            except OSError:
                pass


def test_a_damaged_or_cut_stream_keeps_the_old_data_then_a_whole_one_installs():
    master = start_strata(["--repl-diskless-sync-delay", "0"])
    # A damaged length could leave the replica waiting for bytes that never come: the
    # master's silence ends the attempt after repl-timeout.
    replica = start_strata(["--repl-timeout", "10"])
    proxy = None
    try:
        m = redis.Redis(port=master.port)
        for db in DBS:
            populate(m, db, 2000)
        # Large values, so the stream is well past the proxy's byte of damage.
        for i in range(400):
            m.set(f"big:{i}", "x" * 4096)
        r = redis.Redis(port=replica.port)
        for i in range(100):
            r.set(f"old:{i}", i)
        proxy = Proxy(master.port, ["flip", "cut"], 600_000)
        proxy.start()
        r.replicaof("127.0.0.1", proxy.port)

        def old_data_served():
            # Never LOADING, never a part of the master's dataset.
            assert r.dbsize() == 100, r.dbsize()
            assert r.get("old:7") == b"7"
            assert r.get("big:1") is None
            return True

        wait_for("the damaged transfer", lambda: "flip" in proxy.done and old_data_served())
        wait_for(
            "the damaged stream refused",
            lambda: "snapshot stream is invalid" in log_of(replica) and old_data_served(),
        )
        wait_for("the cut transfer", lambda: "cut" in proxy.done and old_data_served())
        wait_for(
            "the whole transfer installed",
            lambda: r.info("replication").get("master_link_status") == "up",
            timeout=120,
        )
        wait_for("the offsets to meet", lambda: caught_up(m, r))
        compare(master.port, replica.port)
        assert r.get("old:7") is None
        assert r.get("big:399") == b"x" * 4096
        assert proxy.conns >= 3
        rlog = log_of(replica)
        refused = rlog.count("snapshot stream is invalid") + rlog.count("reading the snapshot")
        assert refused >= 2, rlog
    finally:
        if proxy is not None:
            proxy.stop()
        replica.stop()
        master.stop()


def test_a_replica_killed_while_it_loads_the_stream_keeps_its_old_data_then_resyncs():
    """SIGKILL of a Strata replica while it loads a snapshot stream as it arrives (INFO's
    master_sync_loaded_bytes past zero): restarted over the same directory without
    REPLICAOF it serves its own old dataset and none of the master's keys, in every
    database, and no spool file is left in its directory; REPLICAOF then installs the
    master's whole dataset."""
    master = start_strata(["--repl-diskless-sync-delay", "0"])
    tmp = tempfile.mkdtemp(prefix="strata-serve-")
    servers = []

    def replica_server():
        port = free_port()
        argv = [STRATA_BIN, "serve", "--bind", "127.0.0.1", "--port", str(port), "--dir", tmp]
        srv = Server("strata serve", argv, port)
        servers.append(srv)
        return srv

    try:
        m = redis.Redis(port=master.port)
        # Enough that the load is seen under way: about 160 MB of values.
        pipe = m.pipeline(transaction=False)
        for i in range(40_000):
            pipe.set(f"big:{i}", "x" * 4096)
            if i % 1000 == 999:
                pipe.execute()
        pipe.execute()
        first = replica_server()
        r = redis.Redis(port=first.port)
        for i in range(100):
            r.set(f"old:{i}", i)
        r.replicaof("127.0.0.1", master.port)
        wait_for("the load to be under way",
                 lambda: int(r.info("replication").get("master_sync_loaded_bytes", 0)) > 0,
                 timeout=60, step=0.005)
        first.proc.kill()
        first.proc.wait(timeout=30)
        second = replica_server()
        r = redis.Redis(port=second.port)
        # Never a part of the master's dataset: the old one, whole, in database 0 only.
        keyspace = r.info("keyspace")
        assert set(keyspace) == {"db0"} and keyspace["db0"]["keys"] == 100, keyspace
        assert r.get("old:7") == b"7" and r.get("big:1") is None
        assert not [f for f in os.listdir(tmp) if f.startswith("replica-sync.")], os.listdir(tmp)
        r.replicaof("127.0.0.1", master.port)
        wait_for("the resync", lambda: r.info("replication").get("master_link_status") == "up",
                 timeout=120)
        wait_for("the offsets to meet", lambda: caught_up(m, r))
        # The master's keys are all in database 0.
        assert dataset(master.port, 0) == dataset(second.port, 0)
        assert r.get("old:7") is None and r.dbsize() == 40_000
    finally:
        for srv in reversed(servers):
            srv.stop()
        master.stop()
        shutil.rmtree(tmp, ignore_errors=True)
