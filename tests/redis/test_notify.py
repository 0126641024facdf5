"""Differential test of keyspace notifications: a client PSUBSCRIBEs to `__key*__:*` on a
real redis-server 7.0 and on `strata serve`, another client runs the same seeded random
command sequences (notify_ops.py) on both, and after every op the events it produced must
be the same on both servers, in the same order, and so must its replies.

    cargo build --release -p strata-cli
    python3 -m pytest -q tests/redis/test_notify.py
    STRATA_NOTIFY_SEED=7 STRATA_NOTIFY_OPS=5000 python3 -m pytest -q tests/redis/test_notify.py

The end of an op's events is found by a PUBLISH to a marker channel that the pattern also
matches, sent by the commands' client after its last reply.
"""

import os
import time

from notify_ops import Gen
from servers import Client

SEED = int(os.environ.get("STRATA_NOTIFY_SEED", "20261126"))
OPS = int(os.environ.get("STRATA_NOTIFY_OPS", "1500"))
MARKER = b"__keyevent@0__:zz-marker"


class Side:
    """One server: a client for commands and a subscribed one for the events."""

    def __init__(self, port, flags, resp3):
        self.cmd = Client(port)
        self.sub = Client(port)
        self.resp3 = resp3
        assert self.cmd.call("FLUSHALL") == ("+", "OK")
        assert self.cmd.call("CONFIG", "SET", "notify-keyspace-events", flags) == ("+", "OK")
        if resp3:
            self.sub.call("HELLO", "3")
        self.sub.send([b"PSUBSCRIBE", b"__key*__:*"])
        reply = self.sub.read()
        if resp3:
            assert reply[0] == ">", reply
        self.marker = 0

    def close(self):
        self.cmd.call("CONFIG", "SET", "notify-keyspace-events", "")
        self.cmd.close()
        self.sub.close()

    def message(self):
        m = self.sub.read()
        if self.resp3:
            assert m[0] == ">", m
            m = m[1]
        assert m[0] == b"pmessage", m
        return m[2], m[3]

    def run(self, op, sleep):
        replies = []
        if isinstance(op, tuple):  # ("dump-restore", src, dst)
            payload = self.cmd.call(b"DUMP", op[1])
            replies.append(self.cmd.call(b"RESTORE", op[2], b"0", payload, b"REPLACE")
                           if isinstance(payload, bytes) else payload)
        else:
            for c in op:
                self.cmd.send(c)
            replies = [self.cmd.read() for _ in op]
            replies = canonical(op, replies)
        if sleep:
            time.sleep(sleep)
            # The key is due: whether active expiry deleted it meanwhile or this read does
            # (lazily), its `expired` comes before the marker.
            replies.append(self.cmd.call(b"EXISTS", op[0][1]))
        self.marker += 1
        self.cmd.call(b"PUBLISH", MARKER, str(self.marker))
        events = []
        while True:
            chan, msg = self.message()
            if chan == MARKER:
                assert msg == str(self.marker).encode(), (msg, self.marker)
                return replies, events
            events.append((chan, msg))


def canonical(cmds, replies):
    """Replies with SPOP's members sorted (a set: the servers list them in their own
    orders), also inside EXEC's reply."""
    out = []
    queued = []
    for c, rep in zip(cmds, replies):
        name = c[0].upper()
        if name == b"MULTI":
            queued = []
        elif name == b"EXEC" and isinstance(rep, list):
            rep = canonical(queued, rep)
        elif name == b"SPOP" and isinstance(rep, (list, tuple)):
            items = rep[1] if isinstance(rep, tuple) else rep
            rep = sorted(items)
        if name not in (b"MULTI", b"EXEC"):
            queued.append(c)
        out.append(rep)
    return out


def differential(redis_server, strata_server, seed, n, flags="KEA", resp3=False, per_op=0.5):
    ops = Gen(seed).ops(n)
    r = Side(redis_server.port, flags, resp3)
    s = Side(strata_server.port, flags, resp3)
    try:
        seen = 0
        for i, (op, sleep) in enumerate(ops):
            want = r.run(op, sleep)
            got = s.run(op, sleep)
            seen += len(want[1])
            if want != got:
                history = "\n".join(f"  {o!r}" for o, _ in ops[max(0, i - 8):i])
                raise AssertionError(
                    f"seed {seed} op {i}: {op!r}\n"
                    f"redis:  {want!r}\nstrata: {got!r}\nbefore it:\n{history}")
        # The sequences must have exercised the events (a silent server would agree with
        # nothing).
        assert seen > n * per_op, f"only {seen} events over {n} ops"
    finally:
        r.close()
        s.close()


def test_events_resp2(redis_server, strata_server):
    differential(redis_server, strata_server, SEED, OPS)


def test_events_resp3(redis_server, strata_server):
    differential(redis_server, strata_server, SEED + 1, OPS // 3, resp3=True)


def test_events_keyspace_or_keyevent_only(redis_server, strata_server):
    differential(redis_server, strata_server, SEED + 2, OPS // 5, flags="Kgl$", per_op=0.05)
    differential(redis_server, strata_server, SEED + 3, OPS // 5, flags="Eszhx", per_op=0.05)


def test_config_values(redis_server, strata_server):
    values = ["KEA", "Ex", "A", "AKEmn", "g$lshzxetd", "Kn", "El$", "", "KEq", "a", "AKE K",
              "gggKKK", "mnde"]
    for port_pair in [(redis_server.port, strata_server.port)]:
        r, s = Client(port_pair[0]), Client(port_pair[1])
        for v in values:
            set_r = r.call("CONFIG", "SET", "notify-keyspace-events", v)
            set_s = s.call("CONFIG", "SET", "notify-keyspace-events", v)
            assert set_r == set_s, (v, set_r, set_s)
            get_r = r.call("CONFIG", "GET", "notify-keyspace-events")
            get_s = s.call("CONFIG", "GET", "notify-keyspace-events")
            assert get_r == get_s, (v, get_r, get_s)
        r.call("CONFIG", "SET", "notify-keyspace-events", "")
        s.call("CONFIG", "SET", "notify-keyspace-events", "")
        r.close()
        s.close()


MONITORED = [
    [b"SET", b"k", b"v"],
    [b"get", b"k"],
    [b"SET", b"q\"\\ \n\t\x00\xff", b""],
    [b"AUTH", b"secret"],
    [b"AUTH", b"user", b"secret"],
    [b"HELLO", b"2", b"AUTH", b"default", b"secret"],
    [b"HELLO", b"2", b"SETNAME", b"me"],
    [b"CONFIG", b"GET", b"maxmemory"],
    [b"NOSUCH", b"x"],
    [b"GET"],
    [b"MULTI"], [b"INCR", b"n"], [b"LPUSH", b"l", b"a"], [b"EXEC"],
    [b"EVAL", b"redis.call('SET', KEYS[1], ARGV[1]); return redis.call('GET', KEYS[1])",
     b"1", b"s", b"x"],
    [b"SELECT", b"1"], [b"SET", b"k1", b"1"], [b"SELECT", b"0"],
    [b"PING"],
    [b"DEL", b"k", b"n", b"l", b"s"],
]


def monitor_lines(port):
    mon = Client(port)
    assert mon.call("MONITOR") == ("+", "OK")
    c = Client(port)
    for cmd in MONITORED:
        c.call(*cmd)
    c.call("ECHO", "end")
    lines = []
    while True:
        kind, text = mon.read()
        assert kind == "+", (kind, text)
        # The time and the client's port differ between the servers.
        stamp, rest = text.split(" ", 1)
        assert len(stamp.split(".")[1]) == 6, stamp
        db, addr, rest = rest.split(" ", 2)
        assert addr in ("lua]",) or addr.startswith("127.0.0.1:"), addr
        lines.append((db, "lua" if addr == "lua]" else "client", rest))
        if rest == '"ECHO" "end"':
            mon.close()
            c.close()
            return lines


def test_monitor_lines(redis_server, strata_server):
    want = monitor_lines(redis_server.port)
    got = monitor_lines(strata_server.port)
    assert got == want, "\n".join(f"{w!r}\n{g!r}\n" for w, g in zip(want, got) if w != g) \
        or f"{want!r}\n{got!r}"
