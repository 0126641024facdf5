"""Sorted sets through redis-py, in RESP2 and RESP3: the replies a client library parses
(scores as floats, pairs, nulls), pipelines, and sets larger than the listpack limits
(scores with ties, ranks from both ends, ZSCAN paging across writes).

    python3 -m pytest -q tests/redis/test_zsets.py
"""

import math

import pytest
import redis


@pytest.fixture(params=[2, 3], ids=["resp2", "resp3"])
def r(strata_server, request):
    c = redis.Redis(host="127.0.0.1", port=strata_server.port, protocol=request.param,
                    decode_responses=True)
    c.flushall()
    try:
        yield c
    finally:
        c.close()


def pairs(reply):
    """(member, score) pairs whether redis-py parsed them as tuples (RESP2) or lists."""
    return [tuple(p) for p in reply]


def test_add_score_rank_and_flags(r):
    assert r.zadd("z", {"a": 1, "b": 2, "c": 3}) == 3
    assert r.zadd("z", {"a": 5, "d": 0}, ch=True) == 2
    assert r.zadd("z", {"a": 4}, gt=True) == 0
    assert r.zscore("z", "a") == 5.0
    assert r.zadd("z", {"a": 1}, incr=True) == 6.0
    assert r.zadd("z", {"a": 1}, nx=True, incr=True) is None
    assert r.zincrby("z", 2.5, "b") == 4.5
    assert r.zmscore("z", ["a", "x", "d"]) == [6.0, None, 0.0]
    assert r.zcard("z") == 4
    assert r.zrank("z", "d") == 0 and r.zrevrank("z", "d") == 3
    assert r.zrank("z", "nope") is None
    with pytest.raises(redis.ResponseError, match="not compatible"):
        r.execute_command("ZADD", "z", "NX", "XX", 1, "a")
    with pytest.raises(redis.ResponseError, match="not compatible"):
        r.execute_command("ZADD", "z", "GT", "LT", 1, "a")
    assert r.zadd("z", {"a": float("inf")}) == 0
    with pytest.raises(redis.ResponseError, match="NaN"):
        r.zadd("z", {"a": float("-inf")}, incr=True)
    assert r.zscore("z", "a") == math.inf
    r.set("s", "x")
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        r.zadd("s", {"a": 1})


def test_ranges(r):
    r.zadd("z", {"a": 1, "b": 2, "c": 3, "d": 4})
    assert r.zrange("z", 0, -1) == ["a", "b", "c", "d"]
    assert pairs(r.zrange("z", 0, 1, desc=True, withscores=True)) == [("d", 4.0), ("c", 3.0)]
    assert r.zrangebyscore("z", "(1", 3) == ["b", "c"]
    assert r.zrevrangebyscore("z", "+inf", "-inf", start=1, num=2) == ["c", "b"]
    assert r.zrange("z", "(1", "+inf", byscore=True, offset=1, num=1) == ["c"]
    assert r.zcount("z", 2, "(4") == 2
    assert r.zrangestore("dst", "z", 1, 2) == 2
    assert pairs(r.zrange("dst", 0, -1, withscores=True)) == [("b", 2.0), ("c", 3.0)]
    assert r.zrangestore("dst", "z", 10, 20) == 0 and r.exists("dst") == 0
    r.zadd("lex", {m: 0 for m in "abcdefg"})
    assert r.zrangebylex("lex", "[b", "(e") == ["b", "c", "d"]
    assert r.zrevrangebylex("lex", "+", "(e") == ["g", "f"]
    assert r.zlexcount("lex", "-", "+") == 7
    assert r.zremrangebylex("lex", "[a", "[c") == 3
    assert r.zremrangebyrank("z", 0, 0) == 1
    assert r.zremrangebyscore("z", 4, 4) == 1
    assert pairs(r.zrange("z", 0, -1, withscores=True)) == [("b", 2.0), ("c", 3.0)]
    with pytest.raises(redis.ResponseError, match="min or max is not a float"):
        r.zcount("z", "x", 1)


def test_pops_remove_the_key_when_empty(r):
    r.zadd("z", {"a": 1, "b": 2, "c": 3})
    assert pairs(r.zpopmin("z", 1)) == [("a", 1.0)]
    assert pairs(r.zpopmax("z", 5)) == [("c", 3.0), ("b", 2.0)]
    assert r.exists("z") == 0
    assert pairs(r.zpopmin("z", 1)) == []
    r.zadd("y", {"x": 1, "y": 2})
    key, popped = r.zmpop(2, ["z", "y"], max=True, count=1)
    assert key == "y" and [(m, float(s)) for m, s in popped] == [("y", 2.0)]
    assert r.zmpop(1, ["z"], min=True) is None


def test_set_operations(r):
    r.zadd("a", {"x": 1, "y": 2, "z": 3})
    r.zadd("b", {"y": 10, "z": 20, "w": 5})
    assert pairs(r.zunion(["a", "b"], withscores=True)) == [
        ("x", 1.0), ("w", 5.0), ("y", 12.0), ("z", 23.0)]
    assert pairs(r.zinter({"a": 2, "b": 1}, aggregate="MAX", withscores=True)) == [
        ("y", 10.0), ("z", 20.0)]
    assert r.zdiff(["a", "b"]) == ["x"]
    assert r.zunionstore("u", ["a", "b"], aggregate="MIN") == 4
    assert r.zscore("u", "z") == 3.0
    assert r.zinterstore("i", ["a", "nope"]) == 0 and r.exists("i") == 0
    assert r.zdiffstore("d", ["b", "a"]) == 1
    assert r.zintercard(2, ["a", "b"]) == 2
    assert r.zintercard(2, ["a", "b"], limit=1) == 1


def test_randmember_and_scan(r):
    r.zadd("z", {"a": 1, "b": 2, "c": 3})
    assert r.zrandmember("z") in ("a", "b", "c")
    assert sorted(r.zrandmember("z", 5)) == ["a", "b", "c"]
    two = r.zrandmember("z", 2)
    assert len(set(two)) == 2
    assert len(r.zrandmember("z", -7)) == 7
    cur, items = r.zscan("z", 0)
    assert cur == 0 and sorted(items) == [("a", 1.0), ("b", 2.0), ("c", 3.0)]


def test_large_set_is_a_skiplist(r):
    members = {f"m{i:04}": i % 10 for i in range(300)}
    r.zadd("big", members)
    assert r.object("encoding", "big") == "skiplist"
    order = sorted(members, key=lambda m: (members[m], m))
    assert r.zrange("big", 0, -1) == order
    assert r.zrange("big", -5, -1) == order[-5:]
    assert r.zrange("big", 100, 104, desc=True) == list(reversed(order))[100:105]
    assert r.zrank("big", order[123]) == 123
    assert r.zrevrank("big", order[123]) == 300 - 1 - 123
    assert r.zrangebyscore("big", 3, 3) == [m for m in order if members[m] == 3]
    # ZSCAN pages through the members; members present all along come back, even with
    # writes between the pages.
    seen, cur, first = set(), 0, True
    while first or cur != 0:
        first = False
        cur, items = r.zscan("big", cur, count=17)
        seen.update(m for m, _ in items)
        r.zadd("big", {f"new{cur % 1000}": 1})
        r.zrem("big", "m0299")
    assert set(members) - {"m0299"} <= seen
    # Never converted back, as Redis.
    r.zremrangebyrank("big", 0, -3)
    assert r.zcard("big") == 2 and r.object("encoding", "big") == "skiplist"
    r.zadd("small", {"a": 1})
    assert r.object("encoding", "small") == "listpack"
    r.zadd("small", {"x" * 65: 1})
    assert r.object("encoding", "small") == "skiplist"


def test_pipeline(r):
    p = r.pipeline(transaction=False)
    p.zadd("z", {"a": 1, "b": 2})
    p.zincrby("z", 1.5, "a")
    p.zrange("z", 0, -1, withscores=True)
    p.zpopmin("z", 1)
    p.zcard("z")
    p.zscore("z", "a")
    out = p.execute()
    out[2], out[3] = pairs(out[2]), pairs(out[3])
    assert out == [2, 2.5, [("b", 2.0), ("a", 2.5)], [("b", 2.0)], 1, 2.5]


def test_members_survive_rename_and_overwrite(r):
    r.zadd("z", {"a": 1, "b": 2})
    r.rename("z", "z2")
    assert pairs(r.zrange("z2", 0, -1, withscores=True)) == [("a", 1.0), ("b", 2.0)]
    r.set("z2", "str")
    r.delete("z2")
    r.zadd("z2", {"c": 3})
    assert r.zrange("z2", 0, -1) == ["c"], "a new incarnation sees no old members"
