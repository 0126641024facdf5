"""Lists in `strata serve` with real clients: redis-py over RESP2 and RESP3 (every list
command, pipelines, errors), and the blocking pops with several clients (a push serves a
blocked client before any later command sees the element, FIFO among blocked clients,
timeouts, BLMOVE, disconnects, CLIENT KILL and CLIENT UNBLOCK).

    python3 -m pytest -q tests/redis/test_lists.py
"""

import threading
import time

import pytest
import redis

from servers import Client, Error, Nil


@pytest.fixture(params=[2, 3], ids=["resp2", "resp3"])
def r(strata_server, request):
    c = redis.Redis(host="127.0.0.1", port=strata_server.port, protocol=request.param,
                    decode_responses=False)
    c.flushall()
    try:
        yield c
    finally:
        c.close()


@pytest.fixture
def raw(strata_server):
    """A raw RESP client factory (closed at the end)."""
    made = []

    def make(proto=2):
        c = Client(strata_server.port)
        if proto == 3:
            c.call("HELLO", "3")
        made.append(c)
        return c

    yield make
    for c in made:
        c.close()


def blocked(r):
    return int(r.info("clients")["blocked_clients"])


def wait_blocked(r, n, timeout=5.0):
    end = time.time() + timeout
    while time.time() < end:
        if blocked(r) == n:
            return
        time.sleep(0.005)
    raise AssertionError(f"blocked_clients never became {n} (is {blocked(r)})")


def test_pushes_pops_and_reads(r):
    assert r.rpush("l", "a", "b", "c") == 3
    assert r.lpush("l", "z") == 4
    assert r.lpushx("nolist", "x") == 0
    assert r.rpushx("l", "d") == 5
    assert r.lrange("l", 0, -1) == [b"z", b"a", b"b", b"c", b"d"]
    assert r.llen("l") == 5
    assert r.lindex("l", -1) == b"d"
    assert r.lindex("l", 99) is None
    assert r.lpop("l") == b"z"
    assert r.rpop("l", 2) == [b"d", b"c"]
    assert r.lpop("l", 0) == []
    assert r.lpop("nolist", 2) is None
    assert r.lpop("nolist") is None
    assert r.lset("l", 0, "A") is True
    assert r.linsert("l", "AFTER", "A", "m") == 3
    assert r.linsert("l", "BEFORE", "nope", "m") == -1
    assert r.lrange("l", 0, -1) == [b"A", b"m", b"b"]
    assert r.rpush("l", "m", "m") == 5
    assert r.lrem("l", -2, "m") == 2
    assert r.lrange("l", 0, -1) == [b"A", b"m", b"b"]
    assert r.lpos("l", "b") == 2
    assert r.lpos("l", "m", count=0) == [1]
    assert r.ltrim("l", 1, 1) is True
    assert r.lrange("l", 0, -1) == [b"m"]
    assert r.lmove("l", "l2", "LEFT", "RIGHT") == b"m"
    assert r.exists("l") == 0, "the emptied list is gone"
    assert r.rpoplpush("l2", "l2") == b"m"
    assert r.lmpop(2, "none", "l2", direction="LEFT", count=5) == [b"l2", [b"m"]]
    assert r.lmpop(1, "none", direction="RIGHT") is None
    r.set("s", "x")
    with pytest.raises(redis.ResponseError, match="^WRONGTYPE"):
        r.lpush("s", "a")
    with pytest.raises(redis.ResponseError, match="^index out of range$"):
        r.rpush("l", "a") and r.lset("l", 5, "x")
    with pytest.raises(redis.ResponseError, match="^value is out of range, must be positive$"):
        r.lpop("l", -1)
    assert r.type("l") == b"list"
    assert r.object("encoding", "l") == b"quicklist"
    # Binary-safe elements.
    assert r.rpush("bin", b"\x00\xff\r\n") == 1
    assert r.lrange("bin", 0, -1) == [b"\x00\xff\r\n"]


def test_pipeline_and_big_list(r):
    p = r.pipeline(transaction=False)
    for i in range(500):
        p.rpush("big", i)
    p.lrange("big", 0, 2)
    p.lrange("big", -2, -1)
    p.llen("big")
    out = p.execute()
    assert out[:500] == list(range(1, 501))
    assert out[500:] == [[b"0", b"1", b"2"], [b"498", b"499"], 500]
    # Inserts near both ends and removals in the middle keep the order.
    assert r.linsert("big", "BEFORE", "1", "x") == 501
    assert r.linsert("big", "AFTER", "498", "y") == 502
    assert r.lrem("big", 0, "250") == 1
    got = r.lrange("big", 0, -1)
    want = [b"0", b"x"] + [str(i).encode() for i in range(1, 499) if i != 250] + [b"y", b"499"]
    assert got == want
    assert r.lindex("big", 250) == b"250"[:0] + want[250]


def test_blpop_served_by_the_push_before_anyone_else(r, raw):
    c = raw()
    c.send(["BLPOP", "q", "0"])
    wait_blocked(r, 1)
    assert r.lpush("q", "a") == 1
    # The element went to the blocked client as part of the push.
    assert r.llen("q") == 0
    assert r.exists("q") == 0
    assert c.read() == [b"q", b"a"]
    assert blocked(r) == 0


def test_blocked_clients_are_served_in_fifo_order(r, raw):
    c1, c2, c3 = raw(), raw(), raw(3)
    c1.send(["BRPOP", "other", "q", "0"])
    wait_blocked(r, 1)
    c2.send(["BLPOP", "q", "0"])
    wait_blocked(r, 2)
    c3.send(["BLMPOP", "0", "1", "q", "LEFT", "COUNT", "2"])
    wait_blocked(r, 3)
    assert r.rpush("q", "x") == 1
    assert c1.read() == [b"q", b"x"]
    assert r.llen("q") == 0
    assert blocked(r) == 2
    assert r.rpush("q", "y", "z", "w") == 3
    assert c2.read() == [b"q", b"y"]
    assert c3.read() == [b"q", [b"z", b"w"]]
    assert r.llen("q") == 0
    assert blocked(r) == 0


def test_timeouts(r, raw):
    for proto, nil in [(2, Nil("*")), (3, Nil("_"))]:
        c = raw(proto)
        t0 = time.time()
        assert c.call("BLPOP", "q", "0.3") == nil
        assert 0.25 <= time.time() - t0 < 2.0
        assert c.call("BLMOVE", "q", "d", "LEFT", "LEFT", "0.05") == nil
        assert c.call("BLMPOP", "0.05", "2", "q", "q2", "RIGHT") == nil
    assert blocked(r) == 0
    c = raw()
    assert c.call("BLPOP", "q", "-1") == Error(b"ERR timeout is negative")
    assert c.call("BLPOP", "q", "x") == Error(b"ERR timeout is not a float or out of range")
    # Data present: no blocking at all.
    r.rpush("q", "v")
    assert c.call("BRPOP", "q", "0") == [b"q", b"v"]


def test_blmove_and_chains(r, raw):
    # Same hash tag: the move is part of the push; the destination has it at once.
    c = raw()
    c.send(["BLMOVE", "{t}src", "{t}dst", "LEFT", "RIGHT", "0"])
    wait_blocked(r, 1)
    assert r.rpush("{t}src", "e") == 1
    assert r.lrange("{t}dst", 0, -1) == [b"e"]
    assert r.exists("{t}src") == 0
    assert c.read() == b"e"
    # Keys anywhere: the destination has it once the client has its reply.
    c.send(["BRPOPLPUSH", "src", "dst", "0"])
    wait_blocked(r, 1)
    assert r.rpush("src", "f") == 1
    assert r.exists("src") == 0
    assert c.read() == b"f"
    assert r.lrange("dst", 0, -1) == [b"f"]
    # A chain: the move's push serves a client blocked on its destination.
    c1, c2 = raw(), raw()
    c2.send(["BLPOP", "{c}b", "0"])
    wait_blocked(r, 1)
    c1.send(["BLMOVE", "{c}a", "{c}b", "LEFT", "LEFT", "0"])
    wait_blocked(r, 2)
    assert r.lpush("{c}a", "x") == 1
    assert c1.read() == b"x"
    assert c2.read() == [b"{c}b", b"x"]
    assert r.exists("{c}a", "{c}b") == 0
    # A destination of the wrong type: the client gets WRONGTYPE, the element stays.
    r.set("{w}dst", "string")
    c.send(["BLMOVE", "{w}src", "{w}dst", "LEFT", "LEFT", "0"])
    wait_blocked(r, 1)
    assert r.rpush("{w}src", "y") == 1
    assert c.read() == Error(b"WRONGTYPE Operation against a key holding the wrong kind of value")
    assert r.lrange("{w}src", 0, -1) == [b"y"]


def test_pushes_from_other_commands_serve(r, raw):
    # LMOVE (two shards likely), RENAME of a list onto the waited key.
    c = raw()
    c.send(["BLPOP", "w1", "0"])
    wait_blocked(r, 1)
    r.rpush("src", "1", "2")
    assert r.lmove("src", "w1", "LEFT", "LEFT") == b"1"
    assert c.read() == [b"w1", b"1"]
    c.send(["BLPOP", "w2", "0"])
    wait_blocked(r, 1)
    assert r.rename("src", "w2") is True
    assert c.read() == [b"w2", b"2"]
    assert r.exists("w2") == 0


def test_disconnect_and_kill_leave_the_registry(r, raw):
    c = raw()
    c.send(["BLPOP", "q", "0"])
    wait_blocked(r, 1)
    c.close()
    wait_blocked(r, 0)
    assert r.lpush("q", "a") == 1
    assert r.llen("q") == 1, "nobody took it"
    r.delete("q")
    c = raw()
    cid = c.call("CLIENT", "ID")
    c.send(["BLPOP", "q", "0"])
    wait_blocked(r, 1)
    assert f"id={cid} " in r.execute_command("CLIENT", "LIST").decode()
    assert " flags=b " in [l for l in r.execute_command("CLIENT", "LIST").decode().splitlines()
                           if f"id={cid} " in l][0]
    assert r.client_kill_filter(_id=cid) == 1
    wait_blocked(r, 0)
    assert r.lpush("q", "a") == 1
    assert r.llen("q") == 1


def test_client_unblock(r, raw):
    c = raw()
    cid = c.call("CLIENT", "ID")
    assert r.client_unblock(cid) is False
    c.send(["BLPOP", "q", "0"])
    wait_blocked(r, 1)
    assert r.client_unblock(cid) is True
    assert c.read() == Nil("*")
    c.send(["BRPOPLPUSH", "q", "d", "0"])
    wait_blocked(r, 1)
    assert r.client_unblock(cid, error=True) is True
    assert c.read() == Error(b"UNBLOCKED client unblocked via CLIENT UNBLOCK")
    assert blocked(r) == 0
    with pytest.raises(redis.ResponseError, match="reason should be TIMEOUT or ERROR"):
        r.execute_command("CLIENT", "UNBLOCK", cid, "maybe")


def test_pipeline_behind_a_blocked_command_waits(r, raw):
    c = raw()
    c.send_raw(Client.encode(["BLPOP", "q", "0"]) + Client.encode(["RPUSH", "mine", "1"]))
    wait_blocked(r, 1)
    assert r.exists("mine") == 0, "the pipelined command waits behind the blocked one"
    r.rpush("q", "v")
    assert c.read() == [b"q", b"v"]
    assert c.read() == 1
    assert r.lrange("mine", 0, -1) == [b"1"]


def test_many_clients_each_get_one(r, raw):
    n = 8
    clients = [raw() for _ in range(n)]
    for c in clients:
        c.send(["BLPOP", "jobs", "5"])
    wait_blocked(r, n)
    got = []
    lock = threading.Lock()

    def push(i):
        rr = redis.Redis(host="127.0.0.1", port=r.connection_pool.connection_kwargs["port"])
        rr.rpush("jobs", f"j{i}")
        rr.close()

    ts = [threading.Thread(target=push, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for c in clients:
        reply = c.read()
        with lock:
            got.append(reply[1])
    assert sorted(got) == sorted(f"j{i}".encode() for i in range(n))
    assert r.llen("jobs") == 0


def test_no_element_lost_or_duplicated_under_races(r, raw):
    """Pushers and blocked clients with short timeouts race (timeouts against serves,
    keys in different shards): every pushed element ends with exactly one client or in a
    list."""
    port = r.connection_pool.connection_kwargs["port"]
    keys = ["race:a", "race:b", "{race}c"]
    pushed, got = [], []
    lock = threading.Lock()
    stop = threading.Event()

    def consumer(i):
        c = Client(port)
        try:
            while not stop.is_set():
                ks = keys[i % 3:] + keys[:i % 3]
                reply = c.call("BLPOP" if i % 2 else "BRPOP", *ks, "0.01")
                if isinstance(reply, list):
                    with lock:
                        got.append(reply[1])
        finally:
            c.close()

    def producer(i):
        rr = redis.Redis(host="127.0.0.1", port=port)
        for j in range(150):
            e = f"{i}-{j}".encode()
            with lock:
                pushed.append(e)
            rr.rpush(keys[j % 3], e)
        rr.close()

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
    left = [e for k in keys for e in r.lrange(k, 0, -1)]
    assert sorted(got + left) == sorted(pushed)
    wait_blocked(r, 0)


def test_blmove_races_keep_every_element(r, raw):
    """BLMOVE clients with short timeouts, sources and destinations in any shard: every
    pushed element ends in exactly one list."""
    port = r.connection_pool.connection_kwargs["port"]
    srcs, dsts = ["mv:s1", "{mv}s2"], ["mv:d1", "{mv}d2"]
    pushed = []
    stop = threading.Event()

    def mover(i):
        c = Client(port)
        try:
            while not stop.is_set():
                c.call("BLMOVE", srcs[i % 2], dsts[(i // 2) % 2], "LEFT", "RIGHT", "0.01")
        finally:
            c.close()

    ms = [threading.Thread(target=mover, args=(i,)) for i in range(4)]
    for t in ms:
        t.start()
    rr = redis.Redis(host="127.0.0.1", port=port)
    for j in range(300):
        e = f"e{j}".encode()
        pushed.append(e)
        rr.lpush(srcs[j % 2], e)
    rr.close()
    time.sleep(0.2)
    stop.set()
    for t in ms:
        t.join()
    wait_blocked(r, 0)
    left = [e for k in srcs + dsts for e in r.lrange(k, 0, -1)]
    assert sorted(left) == sorted(pushed)


@pytest.mark.parametrize("server", ["redis", "strata"])
def test_clients_blocked_on_a_key_an_exec_pushes_are_served_after_the_exec(
        server, redis_server, strata_server):
    # As Redis serves blocked clients after the whole transaction: the transaction's own
    # LLEN still sees the element; the blocked client gets it once EXEC has replied.
    port = redis_server.port if server == "redis" else strata_server.port
    r = redis.Redis(host="127.0.0.1", port=port)
    r.delete("xq")
    c = Client(port)
    try:
        c.send(["BLPOP", "xq", "0"])
        wait_blocked(r, 1)
        t = Client(port)
        try:
            for cmd in (["MULTI"], ["LPUSH", "xq", "a"], ["LLEN", "xq"]):
                t.send(cmd)
                t.read()
            t.send(["EXEC"])
            assert t.read() == [1, 1]
        finally:
            t.close()
        assert c.read() == [b"xq", b"a"]
        assert r.exists("xq") == 0
    finally:
        c.close()
        r.close()
