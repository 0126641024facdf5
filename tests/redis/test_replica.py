"""Strata as a replica of a real redis-server (the migration path): REPLICAOF on a Strata
node pointed at a redis-server 7.0.15 master with a dataset of every type, a write load of
every type running during and after the full sync, then both datasets compared key by key
once the replica's offset has caught up with the master's; the replica's refusals
(READONLY, MASTERDOWN) and the old dataset served while the RDB loads (no LOADING); the
master's death (the replica keeps serving, link down); REPLICAOF NO ONE (the data stays and
takes writes); an RDB the replica cannot load (the link stays down with the reason, the old
data intact); a replica killed with SIGKILL, or shut down, under a write load resumes with
a partial resync after its restart.

    cargo build --release -p strata-cli
    python3 -m pytest -q tests/redis/test_replica.py

Every wait is bounded and every server is stopped at the end.
"""

import random
import shutil
import tempfile
import threading
import time

import pytest

redis = pytest.importorskip("redis")

from conftest import need  # noqa: E402
from servers import (  # noqa: E402
    STRATA_BIN, Client, Error, Nil, Server, free_port, start_redis, start_strata)

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


def info(r, section="replication"):
    return r.info(section)


def populate(r, db, n):
    """Keys of every type and encoding size class in database `db` of the master."""
    c = redis.Redis(port=r.connection_pool.connection_kwargs["port"], db=db)
    p = c.pipeline(transaction=False)
    for i in range(n):
        p.set(f"s:{i}", f"value-{i}" * (1 + i % 5))
        p.set(f"int:{i}", i * 1000 - 7)
        if i % 10 == 0:
            p.set(f"ttl:{i}", "expiring", px=10_000_000 + i)
            p.pexpireat(f"s:{i}", FAR_MS)
        p.rpush(f"l:{i % 50}", *[f"e{i}-{j}" for j in range(3)])
        p.hset(f"h:{i % 50}", mapping={f"f{i}": i, f"g{i}": "x" * (i % 70)})
        p.sadd(f"is:{i % 40}", i, i + 100000)
        p.sadd(f"ss:{i % 40}", f"m{i}")
        p.zadd(f"z:{i % 40}", {f"m{i}": i / 3, f"n{i}": -i})
        if i % 7 == 0:
            p.pfadd(f"hll:{i % 5}", *[f"x{i}-{j}" for j in range(20)])
    p.rpush("biglist", *[str(j) for j in range(1000)])
    p.hset("bighash", mapping={f"f{j}": "v" * (j % 100) for j in range(800)})
    p.zadd("bigzset", {f"m{j}": j * 1.5 for j in range(800)})
    p.sadd("bigset", *[f"s{j}" for j in range(800)])
    for j in range(250):
        p.xadd(f"x:{j % 3}", {"n": j, "pad": "p" * (j % 40)})
    p.execute()
    # Streams with consumer groups, pending entries and consumers (RDB type 15 in 7.0.15).
    for j in range(3):
        c.xgroup_create(f"x:{j}", "g", id="0")
        c.xreadgroup("g", f"c{j}", {f"x:{j}": ">"}, count=10 + j)
        c.xack(f"x:{j}", "g", *[e[0] for e in c.xrange(f"x:{j}", count=3)])


class Writer(threading.Thread):
    """Writes of every type to the master until stopped; counts what it did."""

    def __init__(self, port, seed):
        super().__init__(daemon=True)
        self.clients = {db: redis.Redis(port=port, db=db) for db in DBS}
        self.rng = random.Random(seed)
        self.stop_flag = threading.Event()
        self.count = 0
        self.error = None

    def run(self):
        try:
            while not self.stop_flag.is_set():
                self.step()
                self.count += 1
        except Exception as e:  # reported by the test
            self.error = e

    def step(self):
        r, c = self.rng, self.clients[self.rng.choice(DBS)]
        i = r.randrange(60)
        op = r.randrange(16)
        if op == 0:
            c.set(f"s:{i}", f"w{r.random()}")
        elif op == 1:
            c.incrby(f"int:{i}", r.randrange(-5, 6))
        elif op == 2:
            c.rpush(f"l:{i % 50}", f"w{i}")
        elif op == 3:
            c.lpop(f"l:{i % 50}")
        elif op == 4:
            c.hset(f"h:{i % 50}", f"w{r.randrange(10)}", r.random())
        elif op == 5:
            c.hdel(f"h:{i % 50}", f"f{i}")
        elif op == 6:
            c.sadd(f"is:{i % 40}", r.randrange(1000))
        elif op == 7:
            c.srem(f"ss:{i % 40}", f"m{i}")
        elif op == 8:
            c.zadd(f"z:{i % 40}", {f"w{r.randrange(20)}": r.random()})
        elif op == 9:
            c.zincrby(f"z:{i % 40}", 2.5, f"m{i}")
        elif op == 10:
            c.pfadd(f"hll:{i % 5}", f"w{r.random()}")
        elif op == 11:
            c.expire(f"int:{i}", 100000)
        elif op == 12:
            c.set(f"ex:{i}", "with-ex", ex=100000)
        elif op == 13:
            c.incrbyfloat(f"f:{i}", 1.5)
        elif op == 14:
            c.spop(f"ss:{i % 40}")
        elif op == 15 and r.randrange(2) == 0:
            c.xadd(f"x:{i % 3}", {"w": i}, maxlen=400, approximate=False)
        elif op == 15:
            # Propagated by Redis as XCLAIM ... LASTID and XGROUP SETID.
            c.xreadgroup("g", "cw", {f"x:{i % 3}": ">"}, count=2)
        else:
            c.delete(f"s:{r.randrange(200)}")
        if r.randrange(50) == 0:
            p = c.pipeline(transaction=True)
            p.set(f"tx:{i}", "in-multi")
            p.rpush(f"l:{i % 50}", "tx")
            p.execute()


def dataset(port, db):
    """Every key of `db` with its type, contents and whether it has a TTL."""
    c = redis.Redis(port=port, db=db)
    out = {}
    for k in c.scan_iter(count=1000):
        t = c.type(k).decode()
        if t == "string":
            v = c.get(k)
        elif t == "list":
            v = c.lrange(k, 0, -1)
        elif t == "hash":
            v = c.hgetall(k)
        elif t == "set":
            v = c.smembers(k)
        elif t == "zset":
            v = c.zrange(k, 0, -1, withscores=True)
        elif t == "stream":
            groups = [(g["name"], g["pending"], g["last-delivered-id"])
                      for g in c.xinfo_groups(k)]
            v = (c.xrange(k), groups)
        else:
            v = None
        out[k] = (t, v, c.pttl(k) > 0)
    return out


def offsets_equal(master, replica):
    m = info(master)["master_repl_offset"]
    s = info(replica)
    return s["master_link_status"] == "up" and s["slave_repl_offset"] == m


@pytest.fixture
def pair(request):
    """A redis-server master (extra arguments: the test's indirect parameter) and a Strata
    node, both stopped at the end."""
    need("redis-server")
    extra = list(getattr(request, "param", []))
    servers = []
    try:
        servers.append(start_redis(extra))
        servers.append(start_strata())
        yield servers[0], servers[1]
    finally:
        for s in reversed(servers):
            s.stop()


def test_full_sync_under_load_then_stream(pair):
    master_srv, replica_srv = pair
    master = redis.Redis(port=master_srv.port)
    replica = redis.Redis(port=replica_srv.port)
    for db in DBS:
        populate(master, db, 3000)
    # Data the full sync must replace.
    replica.set("only-on-replica", "gone after the sync")
    writer = Writer(master_srv.port, seed=7)
    writer.start()
    try:
        time.sleep(0.3)
        assert replica.execute_command("REPLICAOF", "127.0.0.1", master_srv.port) == b"OK"
        role = replica.execute_command("ROLE")
        assert role[0] == b"slave" and role[1] == b"127.0.0.1" and role[2] == master_srv.port
        # Writes from clients are refused from the moment it is a replica.
        with pytest.raises(redis.ResponseError, match="^You can't write against a read only replica.$"):
            replica.set("k", "v")
        wait_for("master_link_status:up", lambda: info(replica)["master_link_status"] == "up")
        # Writes keep coming after the sync: the stream carries them.
        time.sleep(1.5)
    finally:
        writer.stop_flag.set()
        writer.join(timeout=30)
    assert writer.error is None, writer.error
    assert writer.count > 100, writer.count
    wait_for("the replica's offset to reach the master's", lambda: offsets_equal(master, replica), 30)
    for db in DBS:
        want, got = dataset(master_srv.port, db), dataset(replica_srv.port, db)
        assert set(got) == set(want), (db, set(got) ^ set(want))
        diff = [k for k in want if want[k] != got[k]]
        assert not diff, [(k, want[k], got[k]) for k in diff[:5]]
    assert replica.get("only-on-replica") is None

    s = info(replica)
    for field in ["role", "master_host", "master_port", "master_link_status",
                  "master_last_io_seconds_ago", "master_sync_in_progress",
                  "slave_read_repl_offset", "slave_repl_offset", "slave_priority",
                  "slave_read_only", "replica_announced", "connected_slaves",
                  "master_failover_state", "master_replid", "master_replid2",
                  "master_repl_offset", "second_repl_offset", "repl_backlog_active",
                  "repl_backlog_size", "repl_backlog_first_byte_offset",
                  "repl_backlog_histlen"]:
        assert field in s, field
    assert s["role"] == "slave" and s["master_sync_in_progress"] == 0
    assert s["master_replid"] == info(master)["master_replid"]
    assert replica.execute_command("ROLE")[3] == b"connected"
    # The master sees the replica's ACKs.
    slave0 = wait_for("the master to list the replica",
                      lambda: info(master).get("slave0"), 10)
    assert slave0["state"] == "online", slave0

    # A stale replica that must not serve: MASTERDOWN once the link is down.
    master_srv.proc.kill()
    master_srv.proc.wait(timeout=10)
    wait_for("master_link_status:down", lambda: info(replica)["master_link_status"] == "down", 30)
    key = next(iter(dataset(replica_srv.port, 0)))
    assert replica.exists(key) == 1
    replica.config_set("replica-serve-stale-data", "no")
    with pytest.raises(redis.ResponseError, match="Link with MASTER is down and "
                       "replica-serve-stale-data is set to 'no'."):
        replica.get(key)
    replica.config_set("replica-serve-stale-data", "yes")
    assert replica.exists(key) == 1

    # Promotion: the data stays and takes writes.
    before = dataset(replica_srv.port, 0)
    assert replica.execute_command("REPLICAOF", "NO", "ONE") == b"OK"
    assert replica.execute_command("ROLE")[0] == b"master"
    assert info(replica)["role"] == "master"
    assert dataset(replica_srv.port, 0) == before
    assert replica.set("after-promotion", "v")
    assert replica.get("after-promotion") == b"v"


@pytest.mark.parametrize("pair", [["--repl-diskless-sync", "no"]], indirect=True)
def test_the_old_data_is_served_while_the_rdb_loads(pair):
    """Also the `$<len>` form of the payload (the master writes the RDB to disk first).
    Strata loads the RDB beside the served dataset and switches at once (Redis's
    `repl-diskless-load swapdb` behaviour): never LOADING, never a partial dataset."""
    master_srv, replica_srv = pair
    master = redis.Redis(port=master_srv.port)
    replica = redis.Redis(port=replica_srv.port)
    replica.set("mine", "kept")
    # Enough keys that the load takes a while (the probe below polls throughout).
    p = master.pipeline(transaction=False)
    for i in range(200_000):
        p.set(f"key:{i}", i)
        if i % 10_000 == 0:
            p.execute()
    p.execute()
    seen = set()
    loading = []
    stop = threading.Event()

    def probe():
        c = Client(replica_srv.port)
        while not stop.is_set():
            size = c.call("DBSIZE")
            r = c.call("GET", "mine")
            seen.add((size, r.text.decode() if isinstance(r, Error) else r))
            if not loading and b"async_loading:1" in c.call("INFO", "persistence"):
                loading.append(True)

    t = threading.Thread(target=probe, daemon=True)
    t.start()
    try:
        replica.execute_command("REPLICAOF", "127.0.0.1", master_srv.port)
        wait_for("master_link_status:up", lambda: info(replica)["master_link_status"] == "up", 120)
    finally:
        stop.set()
        t.join(timeout=10)
    nil = Nil("$")
    # (1, nil): the switch came between the two reads; a partial dataset has another size.
    assert seen <= {(1, b"kept"), (1, nil), (200_000, nil)}, seen
    assert (1, b"kept") in seen and loading, (seen, loading)
    assert replica.dbsize() == 200_000
    assert replica.get("key:199999") == b"199999"


@pytest.mark.parametrize("pair", [["--databases", "32"]], indirect=True)
def test_rdb_the_replica_cannot_load_keeps_the_old_data(pair):
    master_srv, replica_srv = pair
    master = redis.Redis(port=master_srv.port)
    replica = redis.Redis(port=replica_srv.port)
    master.set("a", "1")
    # A database the replica does not have (16 databases) makes the RDB unloadable here.
    redis.Redis(port=master_srv.port, db=20).set("far", "away")
    replica.set("mine", "kept")
    replica.execute_command("REPLICAOF", "127.0.0.1", master_srv.port)
    reason = wait_for("the link to fail with a reason",
                      lambda: info(replica).get("master_link_down_reason"), 30)
    assert "database 20" in str(reason), reason
    assert info(replica)["master_link_status"] == "down"
    assert replica.get("mine") == b"kept"
    assert replica.get("a") is None
    replica.execute_command("REPLICAOF", "NO", "ONE")


def sync_stats(master):
    s = info(master, "stats")
    return s["sync_full"], s["sync_partial_ok"]


@pytest.mark.parametrize("how", ["kill", "shutdown"])
def test_a_restarted_replica_resumes_with_a_partial_resync(how):
    """SIGKILL (or SHUTDOWN) of the Strata replica under a write load of every type, then
    a restart over the same directory: the redis-server master counts a partial resync and
    no full one, and the datasets are equal after catch-up."""
    need("redis-server")
    servers = []
    tmp = tempfile.mkdtemp(prefix="strata-serve-")
    try:
        master_srv = start_redis(["--repl-backlog-size", "64mb"])
        servers.append(master_srv)
        master = redis.Redis(port=master_srv.port)
        for db in DBS:
            populate(master, db, 500)

        def replica_server():
            port = free_port()
            argv = [STRATA_BIN, "serve", "--bind", "127.0.0.1", "--port", str(port),
                    "--dir", tmp, "--replicaof", "127.0.0.1", str(master_srv.port)]
            srv = Server("strata serve", argv, port)
            servers.append(srv)
            return srv

        first = replica_server()
        replica = redis.Redis(port=first.port)
        wait_for("master_link_status:up", lambda: info(replica)["master_link_status"] == "up")
        writer = Writer(master_srv.port, seed=11)
        writer.start()
        try:
            time.sleep(1.0)
            before = sync_stats(master)
            if how == "kill":
                first.proc.kill()
            else:
                Client(first.port).send(["SHUTDOWN"])
            first.proc.wait(timeout=30)
            time.sleep(0.5)
            second = replica_server()
            replica = redis.Redis(port=second.port)
            s = info(replica)
            assert s["master_replid"] == info(master)["master_replid"], s
            assert s["slave_repl_offset"] > 0, s
            wait_for("master_link_status:up", lambda: info(replica)["master_link_status"] == "up")
            time.sleep(1.0)
        finally:
            writer.stop_flag.set()
            writer.join(timeout=30)
        assert writer.error is None, writer.error
        wait_for("the replica's offset to reach the master's",
                 lambda: offsets_equal(master, replica), 30)
        full, partial = sync_stats(master)
        assert (full, partial) == (before[0], before[1] + 1), (before, full, partial)
        for db in DBS:
            want, got = dataset(master_srv.port, db), dataset(second.port, db)
            assert set(got) == set(want), (db, set(got) ^ set(want))
            diff = [k for k in want if want[k] != got[k]]
            assert not diff, [(k, want[k], got[k]) for k in diff[:5]]
    finally:
        for srv in reversed(servers):
            srv.stop()
        shutil.rmtree(tmp, ignore_errors=True)
