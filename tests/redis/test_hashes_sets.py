"""Hashes and sets through redis-py, over RESP2 and RESP3, against `strata serve`: replies as
a client library decodes them, pipelines, random commands (checked by invariants, since
their results cannot be compared with Redis's), HSCAN/SSCAN iterations over hashtable-
encoded collections with writes in between, multi-shard set operations, and the generic
commands on collections.

    python3 -m pytest -q tests/redis/test_hashes_sets.py
"""

import pytest
import redis

from servers import start_strata  # noqa: F401  (the fixture lives in conftest.py)


@pytest.fixture(params=[2, 3], ids=["resp2", "resp3"])
def r(strata_server, request):
    c = redis.Redis(host="127.0.0.1", port=strata_server.port, protocol=request.param,
                    decode_responses=False)
    c.flushall()
    try:
        yield c
    finally:
        c.close()


def test_hash_basics(r):
    assert r.hset("h", mapping={"a": "1", "b": "2"}) == 2
    assert r.hset("h", "a", "3") == 0
    assert r.hget("h", "a") == b"3"
    assert r.hget("h", "zz") is None
    assert r.hmget("h", ["a", "zz", "b"]) == [b"3", None, b"2"]
    assert r.hgetall("h") == {b"a": b"3", b"b": b"2"}
    assert sorted(r.hkeys("h")) == [b"a", b"b"]
    assert sorted(r.hvals("h")) == [b"2", b"3"]
    assert r.hlen("h") == 2
    assert r.hexists("h", "a") is True or r.hexists("h", "a") == 1
    assert r.hstrlen("h", "a") == 1
    assert r.hsetnx("h", "a", "x") == 0
    assert r.hsetnx("h", "c", "x") == 1
    assert r.hincrby("h", "n", 5) == 5
    assert r.hincrby("h", "n", -7) == -2
    assert r.hincrbyfloat("h", "f", "10.5") == 10.5
    assert r.hincrbyfloat("h", "f", "0.1") == pytest.approx(10.6)
    assert r.hget("h", "f") == b"10.6"
    with pytest.raises(redis.ResponseError, match="hash value is not an integer"):
        r.hincrby("h", "c", 1)
    with pytest.raises(redis.ResponseError, match="hash value is not a float"):
        r.hincrbyfloat("h", "c", 1)
    assert r.hdel("h", "a", "b", "zz", "a") == 2
    assert r.hdel("h", "c", "n", "f") == 3
    assert r.exists("h") == 0, "the last field's deletion deletes the key"
    assert r.hgetall("nokey") == {}
    r.set("s", "v")
    with pytest.raises(redis.ResponseError, match="^WRONGTYPE"):
        r.hset("s", "a", "1")
    with pytest.raises(redis.ResponseError, match="^WRONGTYPE"):
        r.hget("s", "a")


def test_hash_binary_and_encodings(r):
    r.hset("b", b"\x00\xff", b"\r\n\x00")
    r.hset("b", b"", b"")
    assert r.hgetall("b") == {b"\x00\xff": b"\r\n\x00", b"": b""}
    assert r.object("encoding", "b") == b"listpack"
    r.hset("b", "long", "x" * 65)
    assert r.object("encoding", "b") == b"hashtable"
    r.hdel("b", "long")
    assert r.object("encoding", "b") == b"hashtable", "Redis never converts back"
    limit = int(r.config_get("hash-max-listpack-entries")["hash-max-listpack-entries"])
    r.hset("many", mapping={f"f{i}": i for i in range(limit)})
    assert r.object("encoding", "many") == b"listpack"
    r.hincrby("many", "one-more", 1)
    assert r.object("encoding", "many") == b"hashtable"
    assert r.memory_usage("many") > (limit + 1) * 2


def test_hrandfield(r):
    r.hset("h", mapping={f"f{i}": f"v{i}" for i in range(10)})
    one = r.hrandfield("h")
    assert one.startswith(b"f")
    some = r.hrandfield("h", 5)
    assert len(some) == 5 and len(set(some)) == 5
    assert sorted(r.hrandfield("h", 50)) == sorted(r.hkeys("h"))
    rep = r.hrandfield("h", -30)
    assert len(rep) == 30 and set(rep) <= set(r.hkeys("h"))
    pairs = r.execute_command("HRANDFIELD", "h", -4, "WITHVALUES")
    if r.get_connection_kwargs().get("protocol") == 3:
        assert len(pairs) == 4 and all(len(p) == 2 for p in pairs)
        pairs = [x for p in pairs for x in p]
    assert len(pairs) == 8
    for f, v in zip(pairs[0::2], pairs[1::2]):
        assert v == b"v" + f[1:]
    assert r.hrandfield("nokey") is None
    assert r.hrandfield("nokey", 3) == []


def test_set_basics(r):
    assert r.sadd("s", "1", "2", "3", "2") == 3
    assert r.sadd("s", "3", "4") == 1
    assert r.smembers("s") == {b"1", b"2", b"3", b"4"}
    assert r.object("encoding", "s") == b"intset"
    assert r.sismember("s", "1") in (True, 1)
    assert r.smismember("s", ["1", "9"]) in ([1, 0], [True, False])
    assert r.scard("s") == 4
    assert r.srem("s", "1", "9") == 1
    r.sadd("s", "x")
    assert r.object("encoding", "s") == b"hashtable"
    assert r.srem("s", "2", "3", "4", "x") == 4
    assert r.exists("s") == 0
    assert r.smembers("nokey") == set()
    r.sadd("n", *[str(i) for i in (10, 9, -3, 100)])
    # An intset is sorted; so is its SMEMBERS (RESP2 keeps the order).
    assert r.execute_command("SMEMBERS", "n") in (
        [b"-3", b"9", b"10", b"100"], {b"-3", b"9", b"10", b"100"})


def test_spop_and_srandmember(r):
    members = {str(i).encode() for i in range(50)}
    r.sadd("s", *members)
    popped = r.spop("s")
    assert popped in members and r.sismember("s", popped) in (0, False)
    many = r.spop("s", 10)
    assert len(many) == 10 and not (set(many) & set(r.smembers("s")))
    assert r.scard("s") == 39
    # Popping most of the set (Redis rebuilds it from the members left).
    rest = r.spop("s", 35)
    assert len(set(rest)) == 35 and r.scard("s") == 4
    left = r.smembers("s")
    assert left | set(rest) | set(many) | {popped} == members
    assert set(r.srandmember("s", 3)) <= left and len(set(r.srandmember("s", 3))) == 3
    assert len(r.srandmember("s", -20)) == 20
    assert set(r.srandmember("s", 100)) == left
    assert r.srandmember("s") in left
    assert set(r.spop("s", 100)) == left
    assert r.exists("s") == 0
    assert r.spop("s") is None
    with pytest.raises(redis.ResponseError, match="must be positive"):
        r.spop("s", -1)


def test_set_algebra_across_shards(r):
    # Keys without a common hash tag live in different shards: the commands run under stripe
    # locks and write through one atomic batch.
    r.sadd("a", "1", "2", "3", "x")
    r.sadd("b", "2", "3", "4")
    r.sadd("{t}c", "3", "x", "9")
    assert r.sinter("a", "b") == {b"2", b"3"}
    assert r.sunion("a", "b", "{t}c") == {b"1", b"2", b"3", b"4", b"x", b"9"}
    assert r.sdiff("a", "b", "{t}c") == {b"1"}
    assert r.sinter("a", "nokey") == set()
    assert r.sintercard(2, ["a", "b"]) == 2
    assert r.sintercard(2, ["a", "b"], limit=1) == 1
    r.set("str", "v")
    assert r.sinterstore("str", ["a", "b"]) == 2, "overwrites whatever type"
    assert r.type("str") == b"set"
    assert r.sunionstore("u", ["a", "b"]) == 5
    assert r.object("encoding", "u") == b"hashtable"
    assert r.sdiffstore("d", ["b", "a"]) == 1
    assert r.object("encoding", "d") == b"intset"
    r.expire("d", 100)
    assert r.sinterstore("d", ["a", "nokey"]) == 0
    assert r.exists("d") == 0, "an empty result deletes the destination"
    assert r.smove("a", "b", "1") in (1, True)
    assert r.smove("a", "b", "nope") in (0, False)
    assert r.sismember("b", "1") in (1, True) and r.sismember("a", "1") in (0, False)
    assert r.smove("{t}c", "new", "9") in (1, True)
    assert r.smembers("new") == {b"9"}
    with pytest.raises(redis.ResponseError, match="^WRONGTYPE"):
        r.sunion("a", "str2") if r.set("str2", "v") else None


def test_scan_guarantee_with_writes(r):
    # A hashtable-encoded hash and set (over 512 elements): iterated in pages, with
    # writes between the calls; every element present throughout must be returned.
    r.hset("h", mapping={f"field:{i:05d}": "v" for i in range(700)})
    r.sadd("s", *[f"member:{i:05d}" for i in range(700)])
    assert r.object("encoding", "h") == b"hashtable"
    assert r.object("encoding", "s") == b"hashtable"
    for key, scan in (("h", r.hscan), ("s", r.sscan)):
        cursor, seen, calls = 0, set(), 0
        while True:
            cursor, items = scan(key, cursor, count=25)
            seen.update(items if isinstance(items, list) else items.keys())
            calls += 1
            # Churn: delete and add other elements between calls.
            if key == "h":
                r.hdel("h", f"field:{calls * 7 + 1:05d}")
                r.hset("h", f"new:{calls}", "v")
            else:
                r.srem("s", f"member:{calls * 7 + 1:05d}")
                r.sadd("s", f"new:{calls}")
            if cursor == 0:
                break
        assert calls > 10, "paged, not returned whole"
        prefix = "field" if key == "h" else "member"
        stayed = {f"{prefix}:{i:05d}".encode() for i in range(700) if i % 7 != 1}
        assert stayed <= seen
    # Small collections come back whole with cursor 0, MATCH applied.
    r.hset("small", mapping={"a1": "1", "a2": "2", "b": "3"})
    assert r.hscan("small", 0, match="a*", count=1) == (0, {b"a1": b"1", b"a2": b"2"})
    with pytest.raises(redis.ResponseError, match="syntax error"):
        r.execute_command("HSCAN", "small", 0, "NOVALUES")
    with pytest.raises(redis.ResponseError, match="invalid cursor"):
        r.execute_command("SSCAN", "s", "x")


def test_pipeline_and_generic_commands(r):
    p = r.pipeline(transaction=False)
    p.hset("h", "a", "1")
    p.hincrby("h", "a", 2)
    p.sadd("s", "m1", "m2")
    p.hgetall("h")
    p.smembers("s")
    p.type("h")
    p.type("s")
    out = p.execute()
    assert out[:3] == [1, 3, 2]
    assert out[3] == {b"a": b"3"}
    assert out[4] == {b"m1", b"m2"}
    assert out[5:] == [b"hash", b"set"]
    assert r.rename("h", "h2") in (True, b"OK")
    assert r.hgetall("h2") == {b"a": b"3"} and r.exists("h") == 0
    assert r.copy("s", "s2") in (1, True)
    r.sadd("s2", "m3")
    assert r.smembers("s") == {b"m1", b"m2"}, "COPY copies members"
    assert r.smembers("s2") == {b"m1", b"m2", b"m3"}
    assert sorted(r.scan_iter(_type="set")) == [b"s", b"s2"]
    assert r.delete("s2") == 1 and r.exists("s2") == 0
    r.sadd("s2", "fresh")
    assert r.smembers("s2") == {b"fresh"}, "a new incarnation sees no old members"
    r.pexpire("h2", 30)
    import time
    time.sleep(0.06)
    assert r.hgetall("h2") == {} and r.exists("h2") == 0
