"""Strata as a master: a real redis-server 7.0.15 replica (`--replicaof` a Strata node),
then a Strata replica, each following it through a full sync (both transfers: from disk
and diskless) with a write load running during and after it, the datasets compared key by
key once the replica's offset met the master's; then `CLIENT KILL TYPE replica` on the
master and the replica resuming with a partial resync (`sync_partial_ok` increments,
`sync_full` does not).

Strings only, for now: the full sync's RDB comes from `rdb/dataset.rs`, whose placeholder
body writes strings; the test covers every type once the full dataset writer is merged.

    cargo build --release -p strata-cli
    python3 -m pytest -q tests/redis/test_master.py

Every wait is bounded and every server is stopped at the end.
"""

import random
import threading
import time

import pytest

redis = pytest.importorskip("redis")

from servers import start_redis, start_strata  # noqa: E402

DBS = (0, 2)
FAR_MS = 4102444800000  # 2100-01-01: expiries that do not fire during the test


def wait_for(what, cond, timeout=60, step=0.05):
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(step)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def populate(port, db, n):
    c = redis.Redis(port=port, db=db)
    p = c.pipeline(transaction=False)
    for i in range(n):
        p.set(f"s:{i}", f"value-{i}" * (1 + i % 5))
        p.set(f"int:{i}", i * 1000 - 7)
        if i % 10 == 0:
            p.set(f"ttl:{i}", "expiring", pxat=FAR_MS - i)
    p.execute()


class Writer(threading.Thread):
    """String writes to the master until stopped (absolute expiries only: the plain
    propagation sends commands as they came)."""

    def __init__(self, port, seed):
        super().__init__(daemon=True)
        self.clients = {db: redis.Redis(port=port, db=db) for db in DBS}
        self.rng = random.Random(seed)
        self.stop_flag = threading.Event()
        self.ops = 0
        self.error = None

    def run(self):
        try:
            while not self.stop_flag.is_set():
                c = self.clients[self.rng.choice(DBS)]
                k = self.rng.randrange(300)
                op = self.rng.randrange(6)
                if op == 0:
                    c.set(f"w:{k}", f"v{self.ops}")
                elif op == 1:
                    c.incr(f"n:{k}")
                elif op == 2:
                    c.append(f"a:{k}", "x")
                elif op == 3:
                    c.delete(f"w:{k}")
                elif op == 4:
                    c.set(f"t:{k}", "t", pxat=FAR_MS + k)
                else:
                    p = c.pipeline(transaction=True)
                    p.incr(f"m:{k}")
                    p.set(f"m2:{k}", self.ops)
                    p.execute()
                self.ops += 1
        except Exception as e:  # reported by the test
            self.error = e


def dataset(port, db):
    c = redis.Redis(port=port, db=db)
    out = {}
    for k in c.scan_iter(count=500):
        out[k] = (c.type(k), c.get(k), c.pexpiretime(k) if hasattr(c, "pexpiretime") else None)
    return out


def caught_up(master, replica):
    m = master.info("replication")
    r = replica.info("replication")
    return (
        r.get("master_link_status") == "up"
        and r.get("slave_repl_offset") == m.get("master_repl_offset")
    )


def compare(master_port, replica_port):
    for db in DBS:
        m = dataset(master_port, db)
        r = dataset(replica_port, db)
        assert len(m) > 0
        missing = set(m) - set(r)
        extra = set(r) - set(m)
        assert not missing and not extra, (db, sorted(missing)[:5], sorted(extra)[:5])
        for k in m:
            assert m[k] == r[k], (db, k, m[k], r[k])


def follow_and_resync(replica_kind, diskless):
    mode = "yes" if diskless else "no"
    master = start_strata(["--repl-diskless-sync", mode, "--repl-diskless-sync-delay", "0"])
    replica = None
    writer = None
    try:
        m = redis.Redis(port=master.port)
        for db in DBS:
            populate(master.port, db, 2000)
        writer = Writer(master.port, 7)
        writer.start()
        time.sleep(0.3)
        replicaof = ["--replicaof", "127.0.0.1", str(master.port)]
        if replica_kind == "redis":
            replica = start_redis(replicaof)
        else:
            replica = start_strata(replicaof)
        r = redis.Redis(port=replica.port)
        wait_for("the link up", lambda: r.info("replication").get("master_link_status") == "up")
        time.sleep(0.5)  # writes after the sync, through the stream
        writer.stop_flag.set()
        writer.join(10)
        assert writer.error is None, writer.error
        assert writer.ops > 0
        wait_for("the offsets to meet", lambda: caught_up(m, r))
        compare(master.port, replica.port)
        assert m.info("stats")["sync_full"] == 1
        assert m.info("replication")["connected_slaves"] == 1

        # The link drops; the replica resumes from the log.
        full = m.info("stats")["sync_full"]
        partial = m.info("stats")["sync_partial_ok"]
        assert m.execute_command("CLIENT", "KILL", "TYPE", "replica") == 1
        for i in range(200):
            m.set(f"after:{i}", i)
        wait_for(
            "the partial resync",
            lambda: m.info("stats")["sync_partial_ok"] == partial + 1,
        )
        wait_for("the offsets to meet again", lambda: caught_up(m, r))
        assert m.info("stats")["sync_full"] == full
        compare(master.port, replica.port)
        assert r.get("after:199") == b"199"
    finally:
        if writer is not None:
            writer.stop_flag.set()
        if replica is not None:
            replica.stop()
        master.stop()


@pytest.mark.parametrize("diskless", [False, True])
def test_redis_server_replica_of_strata(diskless):
    follow_and_resync("redis", diskless)


@pytest.mark.parametrize("diskless", [False, True])
def test_strata_replica_of_strata(diskless):
    follow_and_resync("strata", diskless)
