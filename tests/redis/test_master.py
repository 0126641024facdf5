"""Strata as a master: a real redis-server 7.0.15 replica (`--replicaof` a Strata node),
then a Strata replica, each following it through a full sync (both transfers: from disk
and diskless) with a write load running during and after it, the datasets compared key by
key once the replica's offset met the master's; then `CLIENT KILL TYPE replica` on the
master and the replica resuming with a partial resync (`sync_partial_ok` increments,
`sync_full` does not).

Every type, in two databases: the keys and the write load are `test_replica.py`'s (the
load includes what Redis propagates as effects: EXPIRE, SET EX, INCRBYFLOAT, SPOP,
XREADGROUP, MULTI/EXEC), so both directions are checked with the same data.

    cargo build --release -p strata-cli
    python3 -m pytest -q tests/redis/test_master.py

Every wait is bounded and every server is stopped at the end.
"""

import time

import pytest

redis = pytest.importorskip("redis")

from servers import start_redis, start_strata  # noqa: E402
from test_replica import DBS, Writer, dataset, populate, wait_for  # noqa: E402


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


def synced_under_load(m, r, writer, master_port, replica_port):
    """Waits for replica `r`'s link to `m` to come up while `writer` writes, lets the
    stream carry writes made after the sync, stops the writer, and checks that the replica
    caught up to the same data through one full sync."""
    wait_for("the link up", lambda: r.info("replication").get("master_link_status") == "up")
    time.sleep(0.5)  # writes after the sync, through the stream
    writer.stop_flag.set()
    writer.join(10)
    assert writer.error is None, writer.error
    assert writer.count > 0
    wait_for("the offsets to meet", lambda: caught_up(m, r))
    compare(master_port, replica_port)
    assert m.info("stats")["sync_full"] == 1


def follow_and_resync(replica_kind, diskless):
    mode = "yes" if diskless else "no"
    master = start_strata(["--repl-diskless-sync", mode, "--repl-diskless-sync-delay", "0"])
    replica = None
    writer = None
    try:
        m = redis.Redis(port=master.port)
        for db in DBS:
            populate(m, db, 2000)
        writer = Writer(master.port, 7)
        writer.start()
        time.sleep(0.3)
        replicaof = ["--replicaof", "127.0.0.1", str(master.port)]
        if replica_kind == "redis":
            replica = start_redis(replicaof)
        else:
            replica = start_strata(replicaof)
        r = redis.Redis(port=replica.port)
        synced_under_load(m, r, writer, master.port, replica.port)
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
