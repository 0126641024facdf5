"""OBJECT FREQ and OBJECT IDLETIME against redis-server: the access counter of LFU policies
(`crates/strata-server/src/access.rs`) and the idle time of the others.

    python3 -m pytest -q tests/redis/test_access.py
"""

import time

import pytest

from servers import Client, Error


@pytest.fixture
def both(redis_server, strata_server):
    cs = [Client(redis_server.port), Client(strata_server.port)]
    for c in cs:
        assert c.call("FLUSHALL") == ("+", "OK")
        c.call("CONFIG", "SET", "maxmemory-policy", "allkeys-lfu")
        c.call("CONFIG", "SET", "lfu-log-factor", "10")
        c.call("CONFIG", "SET", "lfu-decay-time", "1")
    try:
        yield cs
    finally:
        for c in cs:
            c.call("CONFIG", "SET", "maxmemory-policy", "noeviction")
            c.call("CONFIG", "SET", "lfu-log-factor", "10")
            c.call("CONFIG", "SET", "lfu-decay-time", "1")
            c.close()


def same(cs, *args):
    """Runs `args` on both servers; returns the one reply they agree on."""
    replies = [c.call(*args) for c in cs]
    assert replies[0] == replies[1], (args, replies)
    return replies[0]


def test_config_defaults_and_bounds(both):
    for name in ("lfu-log-factor", "lfu-decay-time"):
        same(both, "CONFIG", "GET", name)
        for bad in ("-1", "2147483648", "x"):
            assert isinstance(same(both, "CONFIG", "SET", name, bad), Error)
        same(both, "CONFIG", "SET", name, "2147483647")
        same(both, "CONFIG", "GET", name)
    same(both, "CONFIG", "SET", "lfu-log-factor", "10")
    same(both, "CONFIG", "SET", "lfu-decay-time", "1")


def test_freq_of_new_key_first_access_and_growth(both):
    same(both, "SET", "k", "v")
    assert same(both, "OBJECT", "FREQ", "k") == 5
    same(both, "GET", "k")
    # The first increment above the initial value is certain.
    assert same(both, "OBJECT", "FREQ", "k") == 6
    # OBJECT itself does not count as an access.
    assert same(both, "OBJECT", "FREQ", "k") == 6
    for c in both:
        for _ in range(2000):
            c.send(["GET", "k"])
        for _ in range(2000):
            c.read()
    f = [c.call("OBJECT", "FREQ", "k") for c in both]
    # Logarithmic: 2000 accesses with factor 10 take the counter to about 16-25.
    for x in f:
        assert 10 <= x <= 40, f
    # Factor 0: every access counts, up to 255.
    for c in both:
        c.call("CONFIG", "SET", "lfu-log-factor", "0")
        for _ in range(400):
            c.send(["GET", "k"])
        for _ in range(400):
            c.read()
    assert same(both, "OBJECT", "FREQ", "k") == 255
    assert same(both, "OBJECT", "FREQ", "missing") == same(both, "GET", "missing")


def test_which_commands_count_as_an_access(both):
    """With `lfu-log-factor 0` every access increments: the counters must match exactly
    after each command (Redis's `lookupKey`, and `LOOKUP_NOTOUCH` for EXISTS, TYPE, TTL,
    OBJECT...). Values are not small integers: Redis shares one object among the keys
    holding 0..9999 while `maxmemory` is 0, and with it one counter. No decay: a minute
    passing between the two servers' calls would decay one counter and not the other."""
    same(both, "CONFIG", "SET", "lfu-log-factor", "0")
    same(both, "CONFIG", "SET", "lfu-decay-time", "0")
    script = [
        ("SET", "k", "10000"),
        ("GET", "k"),
        ("EXISTS", "k"),
        ("TYPE", "k"),
        ("TTL", "k"),
        ("PTTL", "k"),
        ("EXPIRETIME", "k"),
        ("OBJECT", "ENCODING", "k"),
        ("MEMORY", "USAGE", "k"),
        ("STRLEN", "k"),
        ("TOUCH", "k"),
        ("MGET", "k", "nokey"),
        ("INCR", "k"),
        ("APPEND", "k", "x"),
        ("GETRANGE", "k", "0", "1"),
        ("EXPIRE", "k", "100"),
        ("PERSIST", "k"),
        ("SET", "k", "v2"),
        ("MSET", "k", "v5", "k2", "x"),
        ("SETNX", "k", "v3"),
        ("GETSET", "k", "v4"),
        ("DEL", "k"),
        ("SET", "k", "v"),
        ("RPUSH", "l", "a", "b"),
        ("LRANGE", "l", "0", "-1"),
        ("LPOP", "l"),
        ("HSET", "h", "f", "v"),
        ("HGET", "h", "f"),
        ("HGETALL", "h"),
        ("SADD", "s", "m"),
        ("SISMEMBER", "s", "m"),
        ("SMEMBERS", "s"),
        ("ZADD", "z", "1", "m"),
        ("ZSCORE", "z", "m"),
        ("ZRANGE", "z", "0", "-1"),
        ("COPY", "k", "k3"),
        ("SET", "k", "v6", "GET"),
        ("SET", "k", "v7", "XX"),
        ("SET", "k", "v7", "NX"),
        ("SET", "k", "v7", "KEEPTTL"),
        ("GETEX", "k"),
        ("SETRANGE", "k", "0", "x"),
        ("SETEX", "k", "100", "v"),
        ("MSETNX", "k", "a", "k4", "b"),
        ("RENAME", "k", "k2"),
        ("RENAME", "k2", "k"),
        ("GETDEL", "k3"),
        ("RPOPLPUSH", "l", "l"),
        ("LMOVE", "l", "l", "LEFT", "LEFT"),
        ("SADD", "s", "n"),
        ("SMOVE", "s", "s2", "m"),
        ("HINCRBY", "h", "n", "1"),
        ("ZINCRBY", "z", "1", "m"),
    ]
    keys = ["k", "k2", "k3", "k4", "l", "h", "s", "s2", "z"]
    for cmd in script:
        if cmd[0] == "MEMORY":
            # An estimate of its own on each server: only its (absent) access is compared.
            for c in both:
                c.call(*cmd)
        else:
            same(both, *cmd)
        for k in keys:
            same(both, "OBJECT", "FREQ", k)


def test_errors_under_other_policies(both):
    same(both, "SET", "k", "v")
    e = same(both, "OBJECT", "IDLETIME", "k")
    assert isinstance(e, Error)
    same(both, "CONFIG", "SET", "maxmemory-policy", "allkeys-lru")
    e = same(both, "OBJECT", "FREQ", "k")
    assert isinstance(e, Error)
    same(both, "OBJECT", "FREQ", "missing")
    same(both, "OBJECT", "IDLETIME", "missing")
    same(both, "OBJECT", "FREQ")
    same(both, "OBJECT", "IDLETIME", "a", "b")


def test_idletime_grows_and_resets_on_access(both):
    for c in both:
        c.call("CONFIG", "SET", "maxmemory-policy", "noeviction")
        c.call("SET", "k", "v")
        assert c.call("OBJECT", "IDLETIME", "k") <= 1
    time.sleep(2.2)
    for c in both:
        # Neither OBJECT nor TYPE nor EXISTS is an access.
        c.call("TYPE", "k")
        c.call("EXISTS", "k")
        assert 2 <= c.call("OBJECT", "IDLETIME", "k") <= 4
        c.call("GET", "k")
        assert c.call("OBJECT", "IDLETIME", "k") <= 1
