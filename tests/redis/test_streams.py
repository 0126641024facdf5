"""Differential test of the stream commands: seeded random sequences of XADD, XRANGE,
XDEL, XTRIM, XSETID, XGROUP, XREADGROUP, XACK, XPENDING, XCLAIM, XAUTOCLAIM, XINFO, XREAD
go to a real redis-server 7.0 and to `strata serve`, and every reply must be the same
(clock-dependent numbers zeroed, see diff_streams.py). Also: python-rq-like use through
redis-py (`xadd`, `xreadgroup`, `xack`).

    cargo build --release -p strata-cli
    python3 -m pytest -q tests/redis/test_streams.py
    STRATA_STREAMS_SEED=7 STRATA_STREAMS_COMMANDS=20000 python3 -m pytest -q tests/redis/test_streams.py

On a difference the sequence is shrunk (test_differential.py's shrinker) and printed.
"""

import os

import pytest

import diff_streams as gens
from diff_streams import Ids
from servers import Client
from test_differential import Gen, Op, Pair, fail_shrunk

SEED = int(os.environ.get("STRATA_STREAMS_SEED", "20261126"))
COMMANDS = int(os.environ.get("STRATA_STREAMS_COMMANDS", "4000"))


class StreamGen(Gen):
    def __init__(self, seed):
        super().__init__(seed)
        self.clock = {}
        self.stream_ids = Ids(self.r, self)
        self.queued = []

    def key(self):
        return self.r.choice(gens.STREAM_KEYS)

    def op(self):
        r = self.r
        x = r.random()
        if x < 0.01:
            return Op([b"DEL", self.key()])
        if x < 0.013:
            # A string for a few commands, then gone again.
            k = self.key()
            self.queued.append(Op([b"DEL", k]))
            return Op([b"SET", k, b"x"])
        if x < 0.02:
            return Op([b"XLEN", self.key()])
        if x < 0.03:
            return Op([b"TYPE", self.key()])
        if x < 0.04:
            return Op([b"OBJECT", b"ENCODING", self.key()])
        if x < 0.05:
            return Op([b"RENAME", self.key(), self.key()])
        if x < 0.06:
            return Op([b"COPY", self.key(), self.key(), b"REPLACE"])
        if x < 0.07:
            # Small nodes, so that `~` trimming has whole nodes to remove.
            return Op([b"CONFIG", b"SET", b"stream-node-max-entries",
                       r.choice([b"1", b"2", b"3", b"5", b"100"])])
        names = list(gens.GENERATORS)
        weights = [w for w, _ in gens.GENERATORS.values()]
        c = r.choices(names, weights=weights)[0]
        return gens.GENERATORS[c][1](self)

    def ops(self, n):
        out = []
        while len(out) < n:
            out.append(self.op())
            if self.queued and self.r.random() < 0.2:
                out.append(self.queued.pop())
        return out


def run(redis_server, strata_server, seed, n, resp3):
    ops = StreamGen(seed).ops(n)
    pair = Pair(redis_server.port, strata_server.port, resp3)
    try:
        pair.reset()
        pair.call([b"CONFIG", b"SET", b"stream-node-max-entries", b"100"])
        res = pair.run(ops)
        if res is None:
            return
        fail_shrunk(pair, ops, res, seed, resp3)
    finally:
        pair.call([b"CONFIG", b"SET", b"stream-node-max-entries", b"100"])
        pair.close()


def test_streams_resp2(redis_server, strata_server):
    run(redis_server, strata_server, SEED, COMMANDS, resp3=False)


def test_streams_resp3(redis_server, strata_server):
    run(redis_server, strata_server, SEED + 1, COMMANDS // 2, resp3=True)


def test_streams_more_seeds(redis_server, strata_server):
    for s in range(3):
        run(redis_server, strata_server, SEED + 100 + s, COMMANDS // 4, resp3=False)


def test_redis_py_job_queue(strata_server):
    """python-rq-like use through redis-py: results written with XADD, a worker group
    reading with XREADGROUP and acknowledging with XACK, a blocking read woken by an add."""
    redis = pytest.importorskip("redis")
    r = redis.Redis(port=strata_server.port)
    r.flushall()
    ids = [r.xadd("rq:results", {"job": f"j{i}", "status": "finished"}) for i in range(5)]
    assert r.xlen("rq:results") == 5
    assert [e[0] for e in r.xrange("rq:results")] == ids
    r.xgroup_create("rq:results", "workers", id="0")
    got = r.xreadgroup("workers", "w1", {"rq:results": ">"}, count=3)
    assert got[0][0] == b"rq:results" and len(got[0][1]) == 3
    assert got[0][1][0][1] == {b"job": b"j0", b"status": b"finished"}
    assert r.xack("rq:results", "workers", *[e[0] for e in got[0][1]]) == 3
    pending = r.xpending("rq:results", "workers")
    assert pending["pending"] == 0
    rest = r.xreadgroup("workers", "w2", {"rq:results": ">"})
    assert len(rest[0][1]) == 2
    assert r.xpending("rq:results", "workers")["pending"] == 2
    # A blocking read is woken by an add from another connection.
    import threading
    other = redis.Redis(port=strata_server.port)
    t = threading.Timer(0.2, lambda: other.xadd("rq:results", {"job": "late"}))
    t.start()
    woken = r.xreadgroup("workers", "w1", {"rq:results": ">"}, block=5000)
    t.join()
    assert woken[0][1][0][1] == {b"job": b"late"}
    assert r.xtrim("rq:results", maxlen=2, approximate=False) == 4
    assert r.type("rq:results") == b"stream"
    info = r.xinfo_stream("rq:results")
    assert info["length"] == 2 and info["entries-added"] == 6
    r.close()
    other.close()
