"""DUMP and RESTORE between redis-server and `strata serve`, both ways: every type and
encoding size class made on one server is DUMPed, RESTOREd on the other, and must read
back the same (type, OBJECT ENCODING, contents, TTL); and RESTORE's errors are the same
on both. Uses the raw client of `servers.py`, so payloads are compared as bytes.

    cargo build --release -p strata-cli
    python3 -m pytest -q tests/redis/test_dump.py
"""

import time

import pytest

from servers import Client, Error, Nil

BIG = 600  # above every listpack / intset limit Redis 7.0 has by default


def crc64(data):
    """Redis's CRC-64 (Jones polynomial, reflected), bit by bit."""
    crc = 0
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ 0x95AC9329AC4BC9B5 if crc & 1 else crc >> 1
    return crc


def frame(body, version):
    """A DUMP payload around `body` (type byte and value) with a correct checksum."""
    p = body + version.to_bytes(2, "little")
    return p + crc64(p).to_bytes(8, "little")


def cases():
    """(key, commands making it, config for redis-server while making it)."""
    big = [f"member:{i}" for i in range(BIG)]
    ints = [str(i * 7 - 1000) for i in range(BIG)]
    long = "abcdefghij" * 30
    return [
        ("str", [["SET", "str", "hello"]], []),
        ("str:int", [["SET", "str:int", "-123456"]], []),
        ("str:wideint", [["SET", "str:wideint", "12345678901234"]], []),
        ("str:lzf", [["SET", "str:lzf", long]], []),
        ("str:empty", [["SET", "str:empty", ""]], []),
        ("str:binary", [["SET", "str:binary", bytes(range(256))]], []),
        ("list:small", [["RPUSH", "list:small", "a", "", "1", "-20000", "5000000000"]], []),
        ("list:nodes", [["RPUSH", "list:nodes", *big]], [("list-max-listpack-size", "8")]),
        ("list:longelems", [["RPUSH", "list:longelems", "x" * 10000, "y", long]], []),
        ("hash:small", [["HSET", "hash:small", "f", "v", "n", "12"]], []),
        ("hash:longvalue", [["HSET", "hash:longvalue", "f", long]], []),
        ("hash:big", [["HSET", "hash:big", *[x for m in big for x in (m, m + ":v")]]], []),
        ("set:intset", [["SADD", "set:intset", "1", "-2", "300", "70000", "5000000000"]], []),
        ("set:strings", [["SADD", "set:strings", "a", "b", "1"]], []),
        ("set:bigints", [["SADD", "set:bigints", *ints]], []),
        ("set:big", [["SADD", "set:big", *big]], []),
        ("zset:small", [["ZADD", "zset:small", "1", "a", "-2.5", "b", "inf", "c", "0", "d"]], []),
        ("zset:big", [["ZADD", "zset:big", *[x for i, m in enumerate(big)
                                              for x in (str(i % 50 - 25.5), m)],
                       "-0", "negzero", "-inf", "bottom"]], []),
        ("zset:longmember", [["ZADD", "zset:longmember", "3", long]], []),
    ]


def snapshot(c, key):
    t = c.call("TYPE", key)[1]
    if t == "string":
        body = c.call("GET", key)
    elif t == "list":
        body = c.call("LRANGE", key, "0", "-1")
    elif t == "hash":
        h = c.call("HGETALL", key)
        body = sorted(zip(h[::2], h[1::2]))
    elif t == "set":
        body = sorted(c.call("SMEMBERS", key))
    elif t == "zset":
        body = c.call("ZRANGE", key, "0", "-1", "WITHSCORES")
    else:
        raise AssertionError(f"{key}: type {t}")
    return t, c.call("OBJECT", "ENCODING", key), body


@pytest.fixture(scope="module")
def clients(redis_server, strata_server):
    r, s = Client(redis_server.port), Client(strata_server.port)
    try:
        yield r, s
    finally:
        r.close()
        s.close()


@pytest.fixture(autouse=True)
def flushed(clients):
    for c in clients:
        assert c.call("FLUSHALL") == ("+", "OK")


def make(c, cmds, config, on_redis):
    saved = []
    if on_redis:
        for name, value in config:
            saved.append((name, c.call("CONFIG", "GET", name)[1]))
            assert c.call("CONFIG", "SET", name, value) == ("+", "OK")
    for cmd in cmds:
        r = c.call(*cmd)
        assert not isinstance(r, Error), (cmd, r)
    for name, value in saved:
        c.call("CONFIG", "SET", name, value)


@pytest.mark.parametrize("key,cmds,config", cases(), ids=[k for k, _, _ in cases()])
def test_redis_to_strata(clients, key, cmds, config):
    r, s = clients
    make(r, cmds, config, on_redis=True)
    payload = r.call("DUMP", key)
    assert s.call("RESTORE", key, "0", payload) == ("+", "OK")
    assert snapshot(s, key) == snapshot(r, key)
    # And back: Strata's payload of the restored key restores on Redis as the same value.
    back = s.call("DUMP", key)
    assert r.call("RESTORE", "back", "0", back) == ("+", "OK")
    assert snapshot(r, "back") == snapshot(r, key)


@pytest.mark.parametrize("key,cmds,config", cases(), ids=[k for k, _, _ in cases()])
def test_strata_to_redis(clients, key, cmds, config):
    r, s = clients
    make(s, cmds, config, on_redis=False)
    payload = s.call("DUMP", key)
    # Strata writes RDB 9: every Redis from 5.0 on accepts it.
    assert payload[-10:-8] == (9).to_bytes(2, "little")
    assert r.call("RESTORE", key, "0", payload) == ("+", "OK")
    assert snapshot(r, key) == snapshot(s, key)
    assert r.call("RESTORE", "again", "0", r.call("DUMP", key)) == ("+", "OK")
    assert s.call("RESTORE", "again", "0", r.call("DUMP", key)) == ("+", "OK")
    assert snapshot(s, "again") == snapshot(s, key)


def test_ttl_and_options_agree(clients):
    r, s = clients
    for c in clients:
        c.call("SET", "k", "v")
    payload = r.call("DUMP", "k")
    future = str(int(time.time() * 1000) + 100_000)
    for c in clients:
        assert c.call("RESTORE", "t", "5000", payload) == ("+", "OK")
        assert 4000 <= c.call("PTTL", "t") <= 5000
        assert c.call("RESTORE", "a", future, payload, "ABSTTL") == ("+", "OK")
        assert c.call("PEXPIRETIME", "a") == int(future)
        assert c.call("RESTORE", "k", "1", payload, "ABSTTL", "REPLACE") == ("+", "OK")
        assert c.call("EXISTS", "k") == 0
        assert c.call("RESTORE", "i", "0", payload, "IDLETIME", "500") == ("+", "OK")
        assert 500 <= c.call("OBJECT", "IDLETIME", "i") < 510


def test_errors_agree(clients):
    r, s = clients
    for c in clients:
        c.call("SET", "k", "v")
    good = r.call("DUMP", "k")
    flipped = bytes([good[0], good[1] ^ 1]) + good[2:]
    bad_value = frame(b"\x00\x40\xffa", 9)  # a 255-byte string holding 1 byte
    empty_set = frame(b"\x02\x00", 9)
    unknown_type = frame(b"\xc8", 9)
    requests = [
        ["RESTORE", "k", "0", good],
        ["RESTORE", "k", "0", good, "bogus"],
        ["RESTORE", "k", "0", good, "IDLETIME"],
        ["RESTORE", "k", "0", good, "IDLETIME", "1", "FREQ", "1"],
        ["RESTORE", "k", "0", good, "IDLETIME", "x"],
        ["RESTORE", "k", "0", good, "IDLETIME", "-1"],
        ["RESTORE", "k", "0", good, "FREQ", "256"],
        ["RESTORE", "n", "-1", good],
        ["RESTORE", "n", "1.5", good],
        ["RESTORE", "k", "-1", good],
        ["RESTORE", "n", "0", "short"],
        ["RESTORE", "n", "0", flipped],
        ["RESTORE", "n", "0", frame(b"\x00\x01a", 13)],
        ["RESTORE", "n", "0", bad_value],
        ["RESTORE", "n", "0", empty_set],
        ["RESTORE", "n", "0", unknown_type],
        ["RESTORE", "k", "0"],
        ["DUMP"],
        ["DUMP", "nosuchkey"],
    ]
    for req in requests:
        got_r, got_s = r.call(*req), s.call(*req)
        assert got_s == got_r, (req, got_r, got_s)
        assert isinstance(got_r, (Error, Nil)), (req, got_r)
    assert r.call("EXISTS", "n") == 0 and s.call("EXISTS", "n") == 0
    # A value that runs into the footer: Redis reads the footer's bytes as the value's (a
    # 5-byte string "a" + 4 footer bytes); Strata reads values only up to the footer.
    overrun = frame(b"\x00\x05a", 9)
    assert r.call("RESTORE", "n", "0", overrun) == ("+", "OK")
    assert s.call("RESTORE", "n", "0", overrun) == Error(b"ERR Bad data format")


def test_newer_payload_versions(clients):
    """Redis 7.0.15 refuses payloads newer than its RDB 10; Strata reads up to 12 (7.4)."""
    r, s = clients
    p = frame(b"\x00\x03abc", 11)
    assert r.call("RESTORE", "k", "0", p) == Error(b"ERR DUMP payload version or checksum are wrong")
    assert s.call("RESTORE", "k", "0", p) == ("+", "OK")
    assert s.call("GET", "k") == b"abc"
    # A listpack set (RDB 11, Redis 7.2) of "x", "yy".
    lp = bytes([0x80 | 1]) + b"x" + b"\x02" + bytes([0x80 | 2]) + b"yy" + b"\x03"
    lp = (6 + len(lp) + 1).to_bytes(4, "little") + (2).to_bytes(2, "little") + lp + b"\xff"
    p = frame(b"\x14" + bytes([len(lp)]) + lp, 11)
    assert s.call("RESTORE", "s", "0", p) == ("+", "OK")
    assert sorted(s.call("SMEMBERS", "s")) == [b"x", b"yy"]
