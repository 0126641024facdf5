"""Pub/sub in `strata serve`: redis-py's PubSub in RESP2 and RESP3, message order, PUBSUB
introspection, RESET, killed and slow subscribers, and a scripted two-connection scenario
run against both redis-server 7.0 and Strata whose every reply must be the same bytes.

    python3 -m pytest -q tests/redis/test_pubsub.py

The scenario avoids what Redis orders by hash (its dicts): UNSUBSCRIBE without arguments
from several channels, a message matching several patterns of one client, PUBSUB
CHANNELS with several channels; those are checked on Strata alone, as sets.
"""

import socket
import time

import pytest
import redis

from servers import Client, Error


def wait_for(pred, timeout=5.0):
    end = time.time() + timeout
    while time.time() < end:
        if pred():
            return True
        time.sleep(0.02)
    return pred()


@pytest.fixture(params=[2, 3], ids=["resp2", "resp3"])
def r(request, strata_server):
    c = redis.Redis(port=strata_server.port, protocol=request.param)
    yield c
    c.close()


def next_message(p, timeout=5.0):
    end = time.time() + timeout
    while time.time() < end:
        m = p.get_message(timeout=0.2)
        if m is not None:
            return m
    raise AssertionError("no message")


def test_subscribe_publish_and_patterns(r, strata_server):
    p = r.pubsub()
    p.subscribe("news", "sport")
    assert next_message(p) == {"type": "subscribe", "pattern": None, "channel": b"news",
                               "data": 1}
    assert next_message(p)["data"] == 2
    p.psubscribe("n*")
    assert next_message(p) == {"type": "psubscribe", "pattern": None, "channel": b"n*",
                               "data": 3}
    pub = redis.Redis(port=strata_server.port)
    # The channel subscription and the pattern: one client counted twice.
    assert pub.publish("news", "hello") == 2
    assert next_message(p) == {"type": "message", "pattern": None, "channel": b"news",
                               "data": b"hello"}
    assert next_message(p) == {"type": "pmessage", "pattern": b"n*", "channel": b"news",
                               "data": b"hello"}
    assert pub.publish("nothing-here", "x") == 1
    assert next_message(p)["channel"] == b"nothing-here"
    assert pub.publish("other", "x") == 0
    p.unsubscribe("news")
    assert next_message(p) == {"type": "unsubscribe", "pattern": None, "channel": b"news",
                               "data": 2}
    p.punsubscribe()
    assert next_message(p)["type"] == "punsubscribe"
    p.unsubscribe()
    m = next_message(p)
    assert (m["type"], m["channel"], m["data"]) == ("unsubscribe", b"sport", 0)
    assert pub.publish("sport", "x") == 0
    p.close()
    pub.close()


def test_introspection(r, strata_server):
    a = redis.Redis(port=strata_server.port).pubsub()
    b = redis.Redis(port=strata_server.port).pubsub()
    a.subscribe("c1", "c2")
    b.subscribe("c1")
    a.psubscribe("c*", "x?")
    b.psubscribe("c*")
    for p, n in ((a, 4), (b, 2)):
        for _ in range(n):
            next_message(p)
    assert set(r.pubsub_channels()) == {b"c1", b"c2"}
    assert r.pubsub_channels("*2") == [b"c2"]
    assert r.pubsub_numsub("c1", "c2", "c*", "none") == [
        (b"c1", 2), (b"c2", 1), (b"c*", 0), (b"none", 0)]
    assert r.pubsub_numpat() == 2  # unique patterns
    stats = r.info("stats")
    assert (stats["pubsub_channels"], stats["pubsub_patterns"]) == (2, 2)
    line = [c for c in r.client_list() if c["sub"] == "2"][0]
    assert (line["psub"], line["flags"]) == ("2", "P")
    assert len(r.client_list(_type="pubsub")) == 2
    assert all(c["flags"] != "P" for c in r.client_list(_type="normal"))
    a.close()
    b.close()
    assert wait_for(lambda: r.pubsub_numpat() == 0 and r.pubsub_channels() == [])


def test_resp2_subscriber_is_restricted_resp3_is_not(strata_server):
    c = Client(strata_server.port)
    c.send(["SUBSCRIBE", "a"])
    assert c.read() == [b"subscribe", b"a", 1]
    e = c.call("GET", "x")
    assert isinstance(e, Error) and e.text == (
        b"ERR Can't execute 'get': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / "
        b"RESET are allowed in this context")
    assert c.call("CLIENT", "LIST").text.startswith(b"ERR Can't execute 'client|list'")
    assert c.call("PING") == [b"pong", b""]
    assert c.call("PING", "hi") == [b"pong", b"hi"]
    assert c.call("RESET") == ("+", "RESET")
    assert c.call("GET", "x").kind == "$"
    c.close()
    c = Client(strata_server.port)
    c.call("HELLO", "3")
    c.send(["SUBSCRIBE", "a"])
    assert c.read() == (">", [b"subscribe", b"a", 1])
    assert c.call("SET", "pubsub-k", "v") == ("+", "OK")
    assert c.call("GET", "pubsub-k") == b"v"
    assert c.call("PING") == ("+", "PONG")
    # Its own publication arrives before PUBLISH's reply.
    c.send(["PUBLISH", "a", "self"])
    assert c.read() == (">", [b"message", b"a", b"self"])
    assert c.read() == 1
    c.close()


def test_order_of_10000_messages(strata_server):
    sub = redis.Redis(port=strata_server.port).pubsub(ignore_subscribe_messages=True)
    sub.subscribe("order")
    pub = redis.Redis(port=strata_server.port)
    assert wait_for(lambda: pub.pubsub_numsub("order") == [(b"order", 1)])
    pipe = pub.pipeline(transaction=False)
    for i in range(10000):
        pipe.publish("order", str(i))
    assert pipe.execute() == [1] * 10000
    got = []
    end = time.time() + 30
    while len(got) < 10000 and time.time() < end:
        m = sub.get_message(timeout=1)
        if m is not None:
            got.append(int(m["data"]))
    assert got == list(range(10000))
    sub.close()
    pub.close()


def test_reset_leaves_everything(strata_server):
    r = redis.Redis(port=strata_server.port)
    c = Client(strata_server.port)
    c.send(["SUBSCRIBE", "rs1", "rs2"])
    c.read(), c.read()
    c.send(["PSUBSCRIBE", "rs*"])
    c.read()
    assert r.pubsub_numsub("rs1") == [(b"rs1", 1)]
    assert c.call("RESET") == ("+", "RESET")
    assert r.pubsub_numsub("rs1", "rs2") == [(b"rs1", 0), (b"rs2", 0)]
    assert r.pubsub_numpat() == 0
    assert r.publish("rs1", "x") == 0
    c.close()
    r.close()


def test_killed_subscriber_leaves_the_registry(strata_server):
    r = redis.Redis(port=strata_server.port)
    c = Client(strata_server.port)
    c.send(["CLIENT", "SETNAME", "victim"])
    c.read()
    c.send(["SUBSCRIBE", "kill-me"])
    c.read()
    assert r.publish("kill-me", "x") == 1
    assert r.client_kill_filter(_type="pubsub") == 1
    assert wait_for(lambda: r.pubsub_numsub("kill-me") == [(b"kill-me", 0)])
    assert r.publish("kill-me", "x") == 0
    # A subscriber that just disconnects leaves too.
    d = Client(strata_server.port)
    d.send(["PSUBSCRIBE", "gone*"])
    d.read()
    assert r.pubsub_numpat() == 1
    d.close()
    assert wait_for(lambda: r.pubsub_numpat() == 0)
    c.close()
    r.close()


def test_slow_subscriber_is_disconnected_by_the_pubsub_limit(strata_server):
    r = redis.Redis(port=strata_server.port)
    old = r.config_get("client-output-buffer-limit")["client-output-buffer-limit"]
    r.config_set("client-output-buffer-limit", "pubsub 1mb 0 0")
    try:
        # A subscriber that never reads, with a small receive buffer.
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.connect(("127.0.0.1", strata_server.port))
        s.sendall(Client.encode(["SUBSCRIBE", "slow"]))
        assert wait_for(lambda: r.pubsub_numsub("slow") == [(b"slow", 1)])
        payload = b"x" * 10000
        pipe = r.pipeline(transaction=False)
        for _ in range(1000):  # 10 MB, far past the 1 MB limit
            pipe.publish("slow", payload)
        pipe.execute()
        assert wait_for(lambda: r.pubsub_numsub("slow") == [(b"slow", 0)])
        assert not any(c["sub"] == "1" for c in r.client_list())
        s.close()
        # A normal client is not under the pubsub limit: a big reply still arrives.
        r.set("pubsub-big", b"y" * (3 << 20))
        assert len(r.get("pubsub-big")) == 3 << 20
    finally:
        r.config_set("client-output-buffer-limit", old)
        r.close()


def test_errors(strata_server):
    c = Client(strata_server.port)
    assert c.call("SUBSCRIBE").text == b"ERR wrong number of arguments for 'subscribe' command"
    assert c.call("PUBLISH", "a").text == b"ERR wrong number of arguments for 'publish' command"
    assert c.call("PUBSUB").text == b"ERR wrong number of arguments for 'pubsub' command"
    assert c.call("PUBSUB", "NUMPAT", "x").text == (
        b"ERR wrong number of arguments for 'pubsub|numpat' command")
    assert c.call("PUBSUB", "CHANNELS", "a", "b").text == (
        b"ERR unknown subcommand or wrong number of arguments for 'CHANNELS'. "
        b"Try PUBSUB HELP.")
    assert c.call("PUBSUB", "foo").text == b"ERR unknown subcommand 'foo'. Try PUBSUB HELP."
    help_ = c.call("PUBSUB", "HELP")
    assert help_[0] == ("+", "PUBSUB <subcommand> [<arg> [value] [opt] ...]. "
                             "Subcommands are:")
    c.close()


class RawClient(Client):
    """A Client that also returns each reply's bytes exactly as received."""

    def __init__(self, port):
        super().__init__(port)
        self.base = 0  # bytes dropped from the front of `buf` so far
        self.all = b""

    def _fill(self):
        chunk = self.sock.recv(1 << 16)
        if not chunk:
            raise ConnectionError("connection closed")
        self.all += chunk
        self.base += self.pos
        self.buf = self.buf[self.pos:] + chunk
        self.pos = 0

    def read_raw(self):
        start = self.base + self.pos
        self.read()
        return self.all[start:self.base + self.pos]


# (connection, command, replies to read). Connection 0 subscribes; 1 publishes and asks.
SCENARIO = [
    (0, ["UNSUBSCRIBE"], 1),
    (0, ["PUNSUBSCRIBE"], 1),
    (0, ["UNSUBSCRIBE", "x", "y"], 2),
    (0, ["SUBSCRIBE", "a", "b", "a"], 3),
    (0, ["GET", "x"], 1),
    (0, ["PING"], 1),
    (0, ["PING", "hi"], 1),
    (0, ["PING", "a", "b"], 1),
    (0, ["PSUBSCRIBE", "a*"], 1),
    (1, ["PUBLISH", "a", "m1"], 1),
    (0, [], 2),  # message, pmessage
    (1, ["PUBLISH", "ab", "m2"], 1),
    (0, [], 1),
    (1, ["PUBLISH", "b", "\x00\r\nbin"], 1),
    (0, [], 1),
    (1, ["PUBSUB", "NUMSUB", "a", "b", "a*", "zz"], 1),
    (1, ["PUBSUB", "NUMPAT"], 1),
    (1, ["PUBSUB", "CHANNELS", "a"], 1),
    (1, ["PUBSUB", "CHANNELS", "[a"], 1),
    (1, ["PUBSUB", "CHANNELS", "x", "y"], 1),
    (1, ["PUBSUB", "SHARDNUMSUB", "a"], 1),
    (1, ["PUBSUB", "SHARDCHANNELS"], 1),
    (1, ["PUBSUB", "HELP"], 1),
    (1, ["PUBSUB", "NOPE"], 1),
    (0, ["UNSUBSCRIBE", "b", "nope"], 2),
    (0, ["CLIENT", "ID"], 1),
    (0, ["NOSUCHCMD"], 1),
    (0, ["SET", "k"], 1),
    (0, ["PUNSUBSCRIBE", "a*", "q*"], 2),
    (0, ["UNSUBSCRIBE"], 1),
    (0, ["UNSUBSCRIBE"], 1),
    (0, ["GET", "pubsub-none"], 1),
    (0, ["PSUBSCRIBE", "p1", "p2", "p3"], 3),
    (1, ["PUBLISH", "p2", "m"], 1),
    (0, [], 1),
    (0, ["PUNSUBSCRIBE"], 3),
    (0, ["SUBSCRIBE", "r"], 1),
    (0, ["RESET"], 1),
    (0, ["GET", "pubsub-none"], 1),
    (1, ["PUBLISH", "r", "x"], 1),
    (0, ["HELLO", "3"], None),
    (0, ["UNSUBSCRIBE"], 1),
    (0, ["SUBSCRIBE", "c"], 1),
    (0, ["GET", "pubsub-none"], 1),
    (0, ["PING"], 1),
    (1, ["PUBLISH", "c", "m3"], 1),
    (0, ["PUNSUBSCRIBE"], 2),  # the message, then the confirmation
    (0, ["PSUBSCRIBE", "c*"], 1),
    (0, ["PUBLISH", "c", "own"], 3),  # own message, own pmessage, the count
    (1, ["HELLO", "3"], None),
    (1, ["PUBLISH", "c", "x"], 1),
    (0, [], 2),
    (1, ["PUBSUB", "NUMSUB", "c"], 1),
    (1, ["PUBSUB", "CHANNELS"], 1),
    (0, ["HELLO", "2"], None),
    (1, ["PUBLISH", "c", "y"], 1),
    (0, [], 2),
    (0, ["GET", "x"], 1),
    (0, ["QUIT"], 1),
]


def run_scenario(port, scenario=SCENARIO):
    conns = [RawClient(port), RawClient(port)]
    out = []
    for who, cmd, n in scenario:
        c = conns[who]
        if cmd:
            c.send(cmd)
        if n is None:
            c.read()  # HELLO: holds the server's version and the client id
            continue
        for _ in range(n):
            out.append((who, cmd, c.read_raw()))
    for c in conns:
        c.close()
    return out


def test_scenario_same_bytes_as_redis(redis_server, strata_server):
    want = run_scenario(redis_server.port)
    got = run_scenario(strata_server.port)
    for i, (w, g) in enumerate(zip(want, got)):
        assert g == w, f"reply {i} of {w[1]} (connection {w[0]}) differs"
    assert len(got) == len(want)


def test_server_stops_promptly_with_subscribers():
    from servers import start_strata
    s = start_strata()
    try:
        r = redis.Redis(port=s.port)
        idle = Client(s.port)
        idle.send(["SUBSCRIBE", "stop"])
        idle.read()
        # One that never reads, with messages pending beyond its socket buffers.
        stuck = socket.socket()
        stuck.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        stuck.connect(("127.0.0.1", s.port))
        stuck.sendall(Client.encode(["SUBSCRIBE", "stop"]))
        assert wait_for(lambda: r.pubsub_numsub("stop") == [(b"stop", 2)])
        pipe = r.pipeline(transaction=False)
        for _ in range(200):
            pipe.publish("stop", b"z" * 10000)
        pipe.execute()
        r.close()
        started = time.time()
        assert s.stop(), "strata serve did not stop"
        assert time.time() - started < 5
        stuck.close()
        idle.close()
    finally:
        s.stop()


# Shard channels (SSUBSCRIBE, SPUBLISH): a namespace apart from channels and patterns.
SHARD_SCENARIO = [
    (0, ["SUNSUBSCRIBE"], 1),
    (0, ["SUNSUBSCRIBE", "x"], 1),
    (0, ["SSUBSCRIBE", "s"], 1),
    (0, ["SSUBSCRIBE", "s"], 1),
    (0, ["GET", "x"], 1),
    (0, ["SUBSCRIBE", "s"], 1),
    (0, ["PSUBSCRIBE", "s*"], 1),
    (1, ["SPUBLISH", "s", "shard"], 1),
    (0, [], 1),  # smessage only
    (1, ["PUBLISH", "s", "plain"], 1),
    (0, [], 2),  # message, pmessage: no smessage
    (1, ["SPUBLISH", "nobody", "m"], 1),
    (1, ["PUBSUB", "SHARDCHANNELS"], 1),
    (1, ["PUBSUB", "SHARDCHANNELS", "s*"], 1),
    (1, ["PUBSUB", "SHARDCHANNELS", "x*"], 1),
    (1, ["PUBSUB", "SHARDNUMSUB", "s", "x"], 1),
    (1, ["PUBSUB", "NUMSUB", "s"], 1),
    (1, ["PUBSUB", "CHANNELS"], 1),
    (0, ["SUNSUBSCRIBE", "s", "t"], 2),
    (0, ["UNSUBSCRIBE"], 1),
    (0, ["PUNSUBSCRIBE"], 1),
    (0, ["GET", "pubsub-none"], 1),
    (0, ["SSUBSCRIBE", "t"], 1),
    (0, ["SUNSUBSCRIBE"], 1),
    (0, ["GET", "pubsub-none"], 1),
    (1, ["SPUBLISH", "t", "m"], 1),
    (0, ["HELLO", "3"], None),
    (0, ["SSUBSCRIBE", "u"], 1),
    (1, ["SPUBLISH", "u", "pushed"], 1),
    (0, [], 1),
    (0, ["SPUBLISH", "u", "own"], 2),  # own smessage, then the count
    (0, ["RESET"], 1),
    (1, ["SPUBLISH", "u", "m"], 1),
    (0, ["QUIT"], 1),
]


def test_shard_channels_same_bytes_as_redis(redis_server, strata_server):
    want = run_scenario(redis_server.port, SHARD_SCENARIO)
    got = run_scenario(strata_server.port, SHARD_SCENARIO)
    for i, (w, g) in enumerate(zip(want, got)):
        assert g == w, f"reply {i} of {w[1]} (connection {w[0]}) differs: {w[2]!r} {g[2]!r}"
    assert len(got) == len(want)
