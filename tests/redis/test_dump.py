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
    ] + stream_cases()


def stream_cases():
    """Streams: one node with master fields, nodes with deleted entries, groups with PELs
    and consumers, an empty stream with a group, many nodes with every listpack encoding.
    Node sizes are set by commands, so that both servers make the same layout."""
    def node_max(n):
        return ["CONFIG", "SET", "stream-node-max-entries", str(n)]

    big = []
    for i in range(1, BIG + 1):
        f = ["a", str(i), "b", "x" * (i % 70)] if i % 3 else ["n", str(i * 1000003), "c", "-7"]
        big.append(["XADD", "stream:big", f"{i}-{i % 4}", *f])
    return [
        ("stream:small", [["XADD", "stream:small", "1-1", "a", "1", "b", "x"],
                          ["XADD", "stream:small", "1-2", "a", "2", "b", "y"],
                          ["XADD", "stream:small", "2-0", "c", "z"]], []),
        ("stream:nodes", [node_max(4)]
         + [["XADD", "stream:nodes", f"{i}-0", "f", f"v{i}"] for i in range(1, 15)]
         + [["XDEL", "stream:nodes", "2-0", "5-0", "6-0", "7-0", "8-0", "14-0"], node_max(100)], []),
        ("stream:groups", [["XADD", "stream:groups", f"{i}-0", "f", "v"] for i in range(1, 6)]
         + [["XGROUP", "CREATE", "stream:groups", "g1", "0"],
            ["XREADGROUP", "GROUP", "g1", "alice", "COUNT", "2", "STREAMS", "stream:groups", ">"],
            ["XREADGROUP", "GROUP", "g1", "bob", "COUNT", "2", "STREAMS", "stream:groups", ">"],
            ["XCLAIM", "stream:groups", "g1", "bob", "0", "1-0", "TIME", "1700000000000",
             "RETRYCOUNT", "7"],
            ["XACK", "stream:groups", "g1", "3-0"],
            ["XGROUP", "CREATE", "stream:groups", "g2", "$"],
            ["XGROUP", "CREATECONSUMER", "stream:groups", "g2", "carol"],
            ["XGROUP", "CREATE", "stream:groups", "g3", "2-0"]], []),
        ("stream:empty", [["XADD", "stream:empty", "5-0", "f", "v"],
                          ["XDEL", "stream:empty", "5-0"],
                          ["XGROUP", "CREATE", "stream:empty", "g", "0"]], []),
        ("stream:big", big + [["XTRIM", "stream:big", "MAXLEN", "~", "450"]], []),
    ]


# Fields a STREAM_LISTPACKS payload (RDB 9, what Strata's DUMP writes) does not carry: Redis
# 7 derives them on load, as for a payload of Redis 5-6.2.
NOT_IN_TYPE_15 = ([b"entries-added", b"max-deleted-entry-id"], [b"entries-read", b"lag"])
# Streams whose derived fields equal the source's (no deletions; groups at the last ID).
FULLY_CARRIED = {"stream:small"}


def stream_snapshot(c, key):
    """XINFO STREAM FULL as dicts, without radix-tree-nodes (an estimate in Strata)."""
    def pairs(flat):
        return dict(zip(flat[::2], flat[1::2]))

    info = pairs(c.call("XINFO", "STREAM", key, "FULL", "COUNT", "0"))
    del info[b"radix-tree-nodes"]
    info[b"groups"] = [pairs(g) for g in info[b"groups"]]
    for g in info[b"groups"]:
        g[b"consumers"] = [pairs(x) for x in g[b"consumers"]]
    return info


def carried(snap):
    """A snapshot without what a type-15 payload cannot carry."""
    t, enc, info = snap
    if t != "stream":
        return snap
    info = dict(info)
    for f in NOT_IN_TYPE_15[0]:
        info.pop(f)
    if info[b"length"] == 0:
        # Redis 7 loading an empty stream of type 15 records the largest ID as its first.
        info.pop(b"recorded-first-entry-id")
    info[b"groups"] = [{k: v for k, v in g.items() if k not in NOT_IN_TYPE_15[1]}
                       for g in info[b"groups"]]
    return t, enc, info


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
    elif t == "stream":
        body = stream_snapshot(c, key)
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
    if key.startswith("stream:"):
        # The restored nodes fill and trim as Redis's: more entries, then `~` trimming.
        for c in (r, s):
            for i in range(1, 250):
                assert not isinstance(c.call("XADD", key, f"{10**6 + i}-0", "x", "y"), Error)
            assert not isinstance(c.call("XTRIM", key, "MAXLEN", "~", "120"), Error)
        assert snapshot(s, key) == snapshot(r, key)
    # And back: Strata's payload of the restored key restores on Redis as the same value.
    back = s.call("DUMP", key)
    assert r.call("RESTORE", "back", "0", back) == ("+", "OK")
    assert carried(snapshot(r, "back")) == carried(snapshot(r, key))


@pytest.mark.parametrize("key,cmds,config", cases(), ids=[k for k, _, _ in cases()])
def test_strata_to_redis(clients, key, cmds, config):
    r, s = clients
    make(s, cmds, config, on_redis=False)
    payload = s.call("DUMP", key)
    # Strata writes RDB 9: every Redis from 5.0 on accepts it.
    assert payload[-10:-8] == (9).to_bytes(2, "little")
    assert r.call("RESTORE", key, "0", payload) == ("+", "OK")
    assert carried(snapshot(r, key)) == carried(snapshot(s, key))
    if key in FULLY_CARRIED:
        assert snapshot(r, key) == snapshot(s, key)
    assert r.call("RESTORE", "again", "0", r.call("DUMP", key)) == ("+", "OK")
    assert s.call("RESTORE", "again", "0", r.call("DUMP", key)) == ("+", "OK")
    assert carried(snapshot(s, "again")) == carried(snapshot(s, key))


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


def test_hostile_streams_agree(clients):
    """Stream payloads Redis refuses with sanitize-dump-payload yes (its deep checks) are
    refused by Strata too, with the same error; Strata always checks this deeply."""
    r, s = clients
    r.call("XADD", "one", "1-0", "f", "v")
    r.call("XGROUP", "CREATE", "one", "g", "0")
    r.call("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "one", ">")
    good = r.call("DUMP", "one")
    body = good[:-10]
    version = int.from_bytes(good[-10:-8], "little")
    # alice's own PEL (count, then the ID) is the body's end.
    assert body[-17] == 1
    no_owner = frame(body[:-17] + b"\x00", version)
    stray = frame(body[:-16] + (9).to_bytes(8, "big") + bytes(8), version)
    # The node's master count (the listpack's first element) says 2 for 1 entry.
    assert body[:3] == b"\x13\x01\x10" and body[26] == 1
    miscounted = frame(body[:26] + b"\x02" + body[27:], version)
    huge = frame(b"\x13\x80\xff\xff\xff\xff", version)
    cut = good[:-11] + good[-10:]
    saved = r.call("CONFIG", "GET", "sanitize-dump-payload")[1]
    assert r.call("CONFIG", "SET", "sanitize-dump-payload", "yes") == ("+", "OK")
    try:
        for name, p in [("no owner", no_owner), ("stray", stray), ("miscounted", miscounted),
                        ("huge", huge), ("cut", cut)]:
            got_r, got_s = r.call("RESTORE", "n", "0", p), s.call("RESTORE", "n", "0", p)
            assert isinstance(got_r, Error), (name, got_r)
            assert got_s == got_r, (name, got_r, got_s)
        assert r.call("RESTORE", "n", "0", good) == ("+", "OK")
        assert s.call("RESTORE", "n", "0", good) == ("+", "OK")
    finally:
        r.call("CONFIG", "SET", "sanitize-dump-payload", saved)
