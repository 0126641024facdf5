"""Sorted sets through redis-py, in RESP2 and RESP3: the replies a client library parses
(scores as floats, pairs, nulls), pipelines, and sets larger than the listpack limits
(scores with ties, ranks from both ends, ZSCAN paging across writes); and the blocking
pops (BZPOPMIN, BZPOPMAX, BZMPOP) with several raw clients against redis-server and strata
(a write serves a blocked client before any later command sees the member, FIFO among
blocked clients, every sorted-set write that wakes, EXEC, other types, timeouts, CLIENT
UNBLOCK, races).

    python3 -m pytest -q tests/redis/test_zsets.py
"""

import math
import threading
import time

import pytest
import redis

from servers import Client, Error, Nil


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


# ---- the blocking pops (BZPOPMIN, BZPOPMAX, BZMPOP) -----------------------------------
#
# Each scenario runs against redis-server and strata with raw clients (the exact reply
# shapes: `*-1` against `_`, doubles as `,` in RESP3); the two transcripts must be equal,
# and the expected replies are asserted too.

def _servers(redis_server, strata_server):
    return {"redis": redis_server.port, "strata": strata_server.port}


def _blocked(port):
    c = Client(port)
    try:
        info = c.call("INFO", "clients").decode()
    finally:
        c.close()
    return int(info.split("blocked_clients:")[1].split()[0])


def _wait_blocked(port, n, timeout=5.0):
    end = time.time() + timeout
    while time.time() < end:
        if _blocked(port) == n:
            return
        time.sleep(0.005)
    raise AssertionError(f"blocked_clients never became {n} (is {_blocked(port)})")


class _Session:
    """Raw clients on one server, closed at the end."""

    def __init__(self, port):
        self.port = port
        self.made = []
        self.c = self.client()
        self.c.call("FLUSHALL")

    def client(self, proto=2):
        c = Client(self.port)
        if proto == 3:
            c.call("HELLO", "3")
        self.made.append(c)
        return c

    def close(self):
        for c in self.made:
            c.close()


def _on_both(redis_server, strata_server, scenario):
    """Runs `scenario(session)` on both servers; returns strata's transcript after
    checking it equals redis-server's."""
    out = {}
    for name, port in _servers(redis_server, strata_server).items():
        s = _Session(port)
        try:
            out[name] = scenario(s)
        finally:
            s.close()
    assert out["strata"] == out["redis"]
    return out["strata"]


D = lambda s: (",", s)  # noqa: E731  a RESP3 double


def test_bzpop_immediate_replies_and_errors(redis_server, strata_server):
    def scenario(s):
        c, c3 = s.c, s.client(3)
        got = []
        for cl in (c, c3):
            cl.call("ZADD", "z", "1", "a", "2", "b", "3", "c", "4.5", "d")
            got.append(cl.call("BZPOPMIN", "none", "z", "0"))
            got.append(cl.call("BZPOPMAX", "z", "none", "0"))
            got.append(cl.call("BZMPOP", "0", "2", "none", "z", "MIN", "COUNT", "10"))
            got.append(cl.call("EXISTS", "z"))
            cl.call("ZADD", "z", "-inf", "x", "inf", "y")
            got.append(cl.call("BZMPOP", "0", "1", "z", "max"))
            got.append(cl.call("BZMPOP", "0.01", "1", "z", "MIN", "COUNT", "1"))
        c.call("SET", "s", "str")
        for args in (
            ["BZPOPMIN", "none", "s", "0"],          # WRONGTYPE
            ["BZPOPMIN", "s", "x"],                  # the timeout is checked first
            ["BZPOPMAX", "s", "-1"],
            ["BZPOPMAX", "none", "inf"],
            ["BZPOPMIN", "none", "nan"],
            ["BZPOPMIN", "none", ""],
            ["BZPOPMIN", "0"],                       # arity
            ["BZMPOP", "0", "1", "none"],            # arity
            ["BZMPOP", "x", "0", "k", "MIN"],        # numkeys before the timeout
            ["BZMPOP", "x", "1", "k", "MIN"],
            ["BZMPOP", "-1", "1", "k", "MIN"],
            ["BZMPOP", "0", "1", "s", "MIN"],
            ["BZMPOP", "0", "2", "k", "MIN"],
            ["BZMPOP", "0", "1", "k", "MID"],
            ["BZMPOP", "0", "1", "k", "MIN", "COUNT"],
            ["BZMPOP", "0", "1", "k", "MIN", "COUNT", "0"],
            ["BZMPOP", "0", "1", "k", "MIN", "COUNT", "-1"],
            ["BZMPOP", "0", "1", "k", "MIN", "COUNT", "1", "COUNT", "1"],
            ["BZMPOP", "0", "9223372036854775807", "k", "MIN"],
        ):
            got.append(c.call(*args))
        return got

    got = _on_both(redis_server, strata_server, scenario)
    assert got[:6] == [[b"z", b"a", b"1"], [b"z", b"d", b"4.5"],
                       [b"z", [[b"b", b"2"], [b"c", b"3"]]], 0,
                       [b"z", [[b"y", b"inf"]]], [b"z", [[b"x", b"-inf"]]]]
    assert got[6:12] == [[b"z", b"a", D("1")], [b"z", b"d", D("4.5")],
                         [b"z", [[b"b", D("2")], [b"c", D("3")]]], 0,
                         [b"z", [[b"y", D("inf")]]], [b"z", [[b"x", D("-inf")]]]]
    wrongtype = Error(b"WRONGTYPE Operation against a key holding the wrong kind of value")
    assert got[12] == wrongtype
    assert got[13] == Error(b"ERR timeout is not a float or out of range")
    assert got[14] == Error(b"ERR timeout is negative")
    assert got[18] == Error(b"ERR wrong number of arguments for 'bzpopmin' command")
    assert got[20] == Error(b"ERR numkeys should be greater than 0")
    assert got[23] == wrongtype
    assert got[27] == Error(b"ERR count should be greater than 0")
    assert got[29] == Error(b"ERR syntax error")


def test_bzpop_served_by_zadd_before_anyone_else(redis_server, strata_server):
    def scenario(s):
        w = s.client()
        w.send(["BZPOPMIN", "q", "0"])
        _wait_blocked(s.port, 1)
        got = [s.c.call("ZADD", "q", "2", "b", "1", "a")]
        # The member went to the blocked client as part of the ZADD.
        got.append(s.c.call("ZRANGE", "q", "0", "-1"))
        got.append(w.read())
        got.append(_blocked(s.port))
        return got

    assert _on_both(redis_server, strata_server, scenario) == [
        2, [b"b"], [b"q", b"a", b"1"], 0]


def test_bzpop_fifo_and_reply_shapes(redis_server, strata_server):
    def scenario(s):
        c1, c2, c3 = s.client(), s.client(3), s.client(3)
        c1.send(["BZPOPMAX", "other", "q", "0"])
        _wait_blocked(s.port, 1)
        c2.send(["BZPOPMIN", "q", "0"])
        _wait_blocked(s.port, 2)
        c3.send(["BZMPOP", "0", "2", "q", "other", "MIN", "COUNT", "2"])
        _wait_blocked(s.port, 3)
        got = [s.c.call("ZADD", "q", "1", "x")]
        got.append(c1.read())
        got += [s.c.call("EXISTS", "q"), _blocked(s.port)]
        got.append(s.c.call("ZADD", "q", "3", "w", "1", "y", "2", "z"))
        got += [c2.read(), c3.read(), s.c.call("EXISTS", "q"), _blocked(s.port)]
        return got

    assert _on_both(redis_server, strata_server, scenario) == [
        1, [b"q", b"x", b"1"], 0, 2, 3,
        [b"q", b"y", D("1")], [b"q", [[b"z", D("2")], [b"w", D("3")]]], 0, 0]


def test_bzpop_woken_by_every_sorted_set_write(redis_server, strata_server):
    def scenario(s):
        c, w = s.c, s.client()
        c.call("ZADD", "{t}src", "5", "m", "6", "n")
        c.call("ZADD", "{t}src2", "6", "n")
        got = []
        for write in (
            ["ZINCRBY", "{t}w", "2.5", "m"],
            ["ZUNIONSTORE", "{t}w", "2", "{t}src", "{t}src2"],
            ["ZINTERSTORE", "{t}w", "2", "{t}src", "{t}src2", "WEIGHTS", "1", "2"],
            ["ZDIFFSTORE", "{t}w", "2", "{t}src", "{t}src2"],
            ["ZRANGESTORE", "{t}w", "{t}src", "0", "0"],
            ["COPY", "{t}src", "{t}w"],
        ):
            w.send(["BZPOPMAX", "{t}w", "0"])
            _wait_blocked(s.port, 1)
            got.append(c.call(*write))
            got.append(w.read())
            c.call("DEL", "{t}w")
        # RENAME of a sorted set onto the waited key (last).
        w.send(["BZMPOP", "0", "1", "{t}w", "MIN", "COUNT", "5"])
        _wait_blocked(s.port, 1)
        got.append(c.call("RENAME", "{t}src2", "{t}w"))
        got.append(w.read())
        got.append(c.call("EXISTS", "{t}w", "{t}src2"))
        return got

    assert _on_both(redis_server, strata_server, scenario) == [
        b"2.5", [b"{t}w", b"m", b"2.5"],
        2, [b"{t}w", b"n", b"12"],
        1, [b"{t}w", b"n", b"18"],
        1, [b"{t}w", b"m", b"5"],
        1, [b"{t}w", b"m", b"5"],
        1, [b"{t}w", b"n", b"6"],
        ("+", "OK"), [b"{t}w", [[b"n", b"6"]]], 0]


def test_bzpop_served_after_exec(redis_server, strata_server):
    def scenario(s):
        w = s.client()
        w.send(["BZPOPMIN", "xq", "0"])
        _wait_blocked(s.port, 1)
        t = s.client()
        got = [t.call("MULTI"), t.call("ZADD", "xq", "1", "a"), t.call("ZCARD", "xq"),
               t.call("EXEC")]
        got += [w.read(), s.c.call("EXISTS", "xq")]
        # Inside MULTI the blocking pops do not block: a null array at once, or a pop.
        t.call("MULTI")
        t.call("BZPOPMIN", "none", "0")
        t.call("BZMPOP", "0", "1", "none", "MAX")
        t.call("ZADD", "mq", "1", "a")
        t.call("BZPOPMAX", "none", "mq", "0")
        got.append(t.call("EXEC"))
        t3 = s.client(3)
        t3.call("MULTI")
        t3.call("BZPOPMIN", "none", "0")
        got.append(t3.call("EXEC"))
        got.append(_blocked(s.port))
        return got

    assert _on_both(redis_server, strata_server, scenario) == [
        ("+", "OK"), ("+", "QUEUED"), ("+", "QUEUED"), [1, 1],
        [b"xq", b"a", b"1"], 0,
        [Nil("*"), Nil("*"), 1, [b"mq", b"a", b"1"]], [Nil("_")], 0]


def test_bzpop_ignores_other_types_while_blocked(redis_server, strata_server):
    def scenario(s):
        c, zw, lw = s.c, s.client(), s.client()
        zw.send(["BZPOPMIN", "k", "0"])
        _wait_blocked(s.port, 1)
        lw.send(["BLPOP", "k", "0"])
        _wait_blocked(s.port, 2)
        # A list at the key serves the list waiter only, though it blocked second.
        got = [c.call("RPUSH", "k", "a", "b"), lw.read(), _blocked(s.port)]
        got.append(c.call("LRANGE", "k", "0", "-1"))
        got.append(c.call("DEL", "k"))
        got.append(c.call("SET", "k", "str"))
        got.append(_blocked(s.port))
        got.append(c.call("DEL", "k"))
        got.append(c.call("ZADD", "k", "7", "m"))
        got.append(zw.read())
        return got

    assert _on_both(redis_server, strata_server, scenario) == [
        2, [b"k", b"a"], 1, [b"b"], 1, ("+", "OK"), 1, 1, 1, [b"k", b"m", b"7"]]


def test_bzpop_waits_in_its_database(redis_server, strata_server):
    def scenario(s):
        c, w = s.c, s.client()
        w.call("SELECT", "1")
        w.send(["BZPOPMIN", "k", "0"])
        _wait_blocked(s.port, 1)
        got = [c.call("ZADD", "k", "1", "a"), _blocked(s.port)]
        c.call("SELECT", "1")
        got += [c.call("ZADD", "k", "2", "b"), w.read(), c.call("EXISTS", "k")]
        c.call("SELECT", "0")
        got.append(c.call("ZCARD", "k"))
        return got

    assert _on_both(redis_server, strata_server, scenario) == [
        1, 1, 1, [b"k", b"b", b"2"], 0, 1]


def test_bzpop_timeouts_and_client_unblock(redis_server, strata_server):
    def scenario(s):
        got = []
        for proto in (2, 3):
            cl = s.client(proto)
            t0 = time.time()
            got.append(cl.call("BZPOPMIN", "q", "0.2"))
            got.append(0.15 <= time.time() - t0 < 2.0)
            got.append(cl.call("BZMPOP", "0.01", "2", "q", "q2", "MAX", "COUNT", "3"))
            got.append(cl.call("BZPOPMAX", "q", "q2", "0.001"))
        c = s.client()
        cid = c.call("CLIENT", "ID")
        c.send(["BZPOPMAX", "q", "0"])
        _wait_blocked(s.port, 1)
        line = [ln for ln in s.c.call("CLIENT", "LIST").decode().splitlines()
                if f"id={cid} " in ln][0]
        got.append(" flags=b " in line)
        got.append(s.c.call("CLIENT", "UNBLOCK", str(cid)))
        got.append(c.read())
        c.send(["BZMPOP", "0", "1", "q", "MIN"])
        _wait_blocked(s.port, 1)
        got.append(s.c.call("CLIENT", "UNBLOCK", str(cid), "ERROR"))
        got.append(c.read())
        got.append(s.c.call("CLIENT", "UNBLOCK", str(cid)))
        # A client that disconnects leaves no waiter behind.
        c.send(["BZPOPMIN", "q", "0"])
        _wait_blocked(s.port, 1)
        c.close()
        _wait_blocked(s.port, 0)
        got.append(s.c.call("ZADD", "q", "1", "a"))
        got.append(s.c.call("ZCARD", "q"))
        return got

    assert _on_both(redis_server, strata_server, scenario) == [
        Nil("*"), True, Nil("*"), Nil("*"), Nil("_"), True, Nil("_"), Nil("_"),
        True, 1, Nil("*"), 1, Error(b"UNBLOCKED client unblocked via CLIENT UNBLOCK"), 0,
        1, 1]


def test_bzpop_no_member_lost_or_duplicated_under_races(strata_server):
    """ZADDs and blocked BZPOPMIN/BZPOPMAX/BZMPOP clients with short timeouts race (timeouts
    against serves, keys in different shards): every member added ends with exactly one
    client or in a set."""
    port = strata_server.port
    Client(port).call("FLUSHALL")
    keys = ["zr:a", "zr:b", "{zr}c"]
    added, got = [], []
    lock = threading.Lock()
    stop = threading.Event()

    def consumer(i):
        c = Client(port)
        try:
            while not stop.is_set():
                ks = keys[i % 3:] + keys[:i % 3]
                if i % 3 == 2:
                    reply = c.call("BZMPOP", "0.01", str(len(ks)), *ks, "MIN", "COUNT", "2")
                    if isinstance(reply, list):
                        with lock:
                            got.extend(m for m, _ in reply[1])
                    continue
                reply = c.call("BZPOPMIN" if i % 2 else "BZPOPMAX", *ks, "0.01")
                if isinstance(reply, list):
                    with lock:
                        got.append(reply[1])
        finally:
            c.close()

    def producer(i):
        c = Client(port)
        for j in range(150):
            m = f"{i}-{j}".encode()
            with lock:
                added.append(m)
            assert c.call("ZADD", keys[j % 3], str(j), m) == 1
        c.close()

    cs = [threading.Thread(target=consumer, args=(i,)) for i in range(6)]
    ps = [threading.Thread(target=producer, args=(i,)) for i in range(3)]
    for t in cs + ps:
        t.start()
    for t in ps:
        t.join()
    time.sleep(0.2)
    stop.set()
    for t in cs:
        t.join()
    c = Client(port)
    left = [m for k in keys for m in c.call("ZRANGE", k, "0", "-1")]
    c.close()
    assert sorted(got + left) == sorted(added)
    _wait_blocked(port, 0)
