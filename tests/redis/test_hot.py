"""The hot tier (`crates/strata/src/hot.rs`) and the server's memory bound, through a real
client.

    python3 -m pytest -q tests/redis/test_hot.py
"""

import random
import time
import shutil
import tempfile

import pytest
import redis

from servers import start_strata

MB = 1 << 20


def hot(r):
    return {k: v for k, v in r.info("strata").items() if k.startswith("hot_")}


def test_working_set_inside_the_budget_is_served_from_ram():
    data = tempfile.mkdtemp(prefix="strata-hot-")
    try:
        s = start_strata(["--dir", data, "--hot-memory", "64mb"])
        r = redis.Redis(port=s.port)
        keys = [b"user:%d" % i for i in range(5000)]
        p = r.pipeline(transaction=False)
        for k in keys:
            p.set(k, k * 8)
        p.execute()
        assert s.stop()
        # Restarted, the tier is empty: the first pass reads the engine and promotes, the
        # second never reaches it.
        s = start_strata(["--dir", data, "--hot-memory", "64mb"])
        r = redis.Redis(port=s.port)
        for round_ in range(2):
            before = hot(r)
            p = r.pipeline(transaction=False)
            for k in keys:
                p.get(k)
            assert p.execute() == [k * 8 for k in keys]
            after = hot(r)
            if round_ == 0:
                assert after["hot_misses"] - before["hot_misses"] >= len(keys)
            else:
                assert after["hot_misses"] == before["hot_misses"], (before, after)
                assert after["hot_hits"] - before["hot_hits"] >= len(keys)
        assert hot(r)["hot_memory_bytes"] == 64 * MB
        assert hot(r)["hot_records"] >= len(keys)
        # Shrunk live: evicts at once, and the data is all still there.
        assert r.config_set("hot-memory", "64kb")
        h = hot(r)
        assert h["hot_memory_used"] <= 64 * 1024 and h["hot_evictions"] > 0, h
        assert r.config_get("hot-memory") == {"hot-memory": str(64 * 1024)}
        assert r.mget(keys[:100]) == [k * 8 for k in keys[:100]]
        assert s.stop()
    finally:
        shutil.rmtree(data, ignore_errors=True)


def test_writes_do_not_fill_the_tier_and_never_leave_a_stale_value():
    s = start_strata(["--hot-memory", "64mb"])
    try:
        r = redis.Redis(port=s.port)
        keys = [b"w:%d" % i for i in range(200)]
        p = r.pipeline(transaction=False)
        for k in keys:
            p.set(k, b"old")
        p.execute()
        # Writes insert nothing; reads that miss fill the tier.
        assert hot(r)["hot_records"] == 0, hot(r)
        assert r.mget(keys) == [b"old"] * len(keys)  # a snapshot read: bypasses the tier
        assert hot(r)["hot_records"] == 0, hot(r)
        for k in keys:
            assert r.get(k) == b"old"
        assert hot(r)["hot_records"] >= len(keys), hot(r)
        # Every kind of write of a cached key: the next read sees it, through GET, MGET, a
        # script, and inside a transaction.
        p = r.pipeline(transaction=False)
        for i, k in enumerate(keys):
            [lambda: p.set(k, b"new"), lambda: p.append(k, b"+"), lambda: p.delete(k),
             lambda: p.getset(k, b"gs"), lambda: p.setrange(k, 0, b"N")][i % 5]()
        p.execute()
        want = [[b"new", b"old+", None, b"gs", b"Nld"][i % 5] for i in range(len(keys))]
        for _ in range(2):
            assert [r.get(k) for k in keys] == want
            assert r.mget(keys) == want
            assert r.eval("return redis.call('get', KEYS[1])", 1, keys[0]) == want[0]
            t = r.pipeline(transaction=True)
            t.get(keys[1])
            assert t.execute() == [want[1]]
        # Counters: SET then INCR of a cached key, in one pipeline and one by one.
        r.set(b"c", 1)
        assert r.get(b"c") == b"1"
        p = r.pipeline(transaction=False)
        p.set(b"c", 10)
        p.incr(b"c")
        p.get(b"c")
        assert p.execute() == [True, 11, b"11"]
        assert r.get(b"c") == b"11"
        r.incr(b"c")
        assert r.get(b"c") == b"12"
        # Expiry and FLUSHALL drop what the tier holds.
        r.set(b"e", b"v", px=50)
        assert r.get(b"e") == b"v"
        time.sleep(0.12)
        assert r.get(b"e") is None
        assert r.flushall()
        assert [r.get(k) for k in keys[:20]] == [None] * 20
    finally:
        assert s.stop()


# Everything the server holds beyond its budgets: the runtime and its threads, allocator
# arenas, connection buffers of a few clients, the engine's open-table and file metadata.
# Documented in docs/design.md (the hot tier and the memory bound).
RSS_CONSTANT = 56 * MB


def rss_bytes(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def strata_info(r):
    return {k: int(v) for k, v in r.info("strata").items()
            if k.startswith(("hot_", "strata_")) and str(v).isdigit()}


@pytest.mark.parametrize("n,size", [
    (50000, 4096),   # 195 MiB of values: 24x the hot tier, 2x every bound together
    (600000, 128),   # 73 MiB of values in 600k records: per-record overheads dominate
])
def test_rss_stays_within_the_budgets_with_far_more_data(n, size):
    hot_bytes, buffer_bytes, cache_bytes, shards = 8 * MB, 4 * MB, 8 * MB, 2
    s = start_strata(["--hot-memory", "8mb", "--engine-write-buffer-size", "4mb",
                      "--engine-block-cache-size", "8mb", "--shards", str(shards)])
    try:
        r = redis.Redis(port=s.port)
        p = r.pipeline(transaction=False)
        for i in range(n):
            p.set(b"key:%d" % i, (b"%08d" % i) * (size // 8))
            if i % 500 == 499:
                p.execute()
        p.execute()
        order = list(range(n))
        random.Random(1).shuffle(order)
        # Pipelined GETs, not MGET: a GET reads through the tier (misses promote, so the
        # tier churns), where an MGET over both shards reads a snapshot of the engines.
        for start in range(0, n, 500):
            chunk = order[start:start + 500]
            for i in chunk:
                p.get(b"key:%d" % i)
            assert p.execute() == [(b"%08d" % i) * (size // 8) for i in chunk]
        # Writes do not fill the tier and each key was read once: the last few keys read
        # (still in the cache's small section for new entries), read again, are served
        # from it.
        for i in chunk[-20:]:
            p.get(b"key:%d" % i)
        assert p.execute() == [(b"%08d" % i) * (size // 8) for i in chunk[-20:]]
        h = strata_info(r)
        assert h["hot_memory_used"] <= hot_bytes and h["hot_evictions"] > 0, h
        assert h["hot_misses"] > n // 2 and h["hot_hits"] > 0, h
        # The open tables' indexes and filters grow with the data (a few bytes per key):
        # the bound takes them from INFO, where the server counts them.
        readers = h["strata_table_readers_bytes"]
        access_table = max(hot_bytes // 32, 4096 * 8)  # one word per 256 bytes of the tier
        assert 0 < readers < 16 * MB, h
        # The other parts INFO shows are within their budgets and in use.
        assert 0 < h["strata_memtables_bytes"] <= shards * 3 * buffer_bytes, h
        assert 0 < h["strata_block_cache_bytes"] <= shards * cache_bytes, h
        assert h["strata_threads"] > 2, h
        # Per shard: the active memtable and at most two immutable ones waiting for flush.
        bound = (hot_bytes + shards * cache_bytes + shards * 3 * buffer_bytes + readers
                 + access_table + RSS_CONSTANT)
        rss = rss_bytes(s.proc.pid)
        print(f"\nRSS {rss / MB:.1f} MiB for {n * size / MB:.0f} MiB of values in {n} records, "
              f"bound {bound / MB:.0f} MiB; {h}")
        assert rss <= bound, f"RSS {rss / MB:.1f} MiB > bound {bound / MB:.1f} MiB"
    finally:
        assert s.stop()
