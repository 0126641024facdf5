"""What redis-server 7.0.15 propagates for each write: the source of the expected argvs in
`crates/strata-server/src/cmd/effects_tests.rs` (Strata's effects, `effects.rs`).

No Redis command shows a server's propagated commands (a replica sees them as its
stream, which the replication tests check), so the exact comparison of each command's
effects lives in those Rust tests; this test keeps their expectations honest by running
the same commands against redis-server with `appendonly yes`, `appendfsync always` and
active expiry off, and reading what it appended to its AOF. Times (Unix ms of this run) are
compared as `<ms>`, XCLAIM's delivery time as `<t>`.

Run: python3 -m pytest -q tests/redis/test_effects.py (needs redis-server only).
"""
import glob
import os
import re
import threading
import time

import pytest

from conftest import need
from servers import Client, start_redis

# (commands, AOF lines they append). A command is a space-separated line.
CASES = [
    (["SET a 1", "PFADD p a", "SET a 1 NX", "DEL nokey", "HDEL h nof", "PFADD p a",
      "PERSIST a"], ["SET a 1", "PFADD p a"]),
    (["SET a 1 EX 100"], ["SET a 1 PXAT <ms>"]),
    (["SET n 1 NX GET EX 100"], ["SET n 1 PXAT <ms>"]),
    (["SET q 1 PXAT 9999999999000 GET", "SET q 2 EXAT 9999999999", "SET q 3 KEEPTTL",
      "SET q 4 GET", "SET q 5 XX get KEEPTTL", "GETSET q 6"],
     ["SET q 1 PXAT 9999999999000", "SET q 2 PXAT 9999999999000", "SET q 3 KEEPTTL",
      "SET q 4", "SET q 5 XX KEEPTTL", "SET q 6"]),
    (["SETEX s 100 v", "PSETEX p 100000 v"], ["SET s v PXAT <ms>", "SET p v PXAT <ms>"]),
    (["SET e v", "EXPIRE e 100", "EXPIRE e 100 NX", "PEXPIRE e 200000 GT",
      "EXPIREAT e 9999999999", "PEXPIREAT e 9999999999000 XX", "PERSIST e", "EXPIRE e -1"],
     ["SET e v", "PEXPIREAT e <ms>", "PEXPIREAT e <ms> GT", "PEXPIREAT e 9999999999000",
      "PEXPIREAT e 9999999999000 XX", "PERSIST e", "DEL e"]),
    (["SET g 1", "GETEX g EX 100", "GETEX g PERSIST", "GETEX g PERSIST", "GETEX g",
      "GETEX g PXAT 9999999999000", "GETEX g EXAT 1", "SET g 1", "GETDEL g", "GETDEL g"],
     ["SET g 1", "PEXPIREAT g <ms>", "PERSIST g", "PEXPIREAT g 9999999999000", "DEL g",
      "SET g 1", "DEL g"]),
    (["SET f 1.5", "INCRBYFLOAT f 1", "HSET h x 1", "HINCRBYFLOAT h x 2.5"],
     ["SET f 1.5", "SET f 2.5 KEEPTTL", "HSET h x 1", "HSET h x 3.5"]),
    (["SADD s1 a", "SPOP s1", "SADD s2 a b", "SPOP s2 5", "SPOP s2 0", "SRANDMEMBER s2",
      "RANDOMKEY"],
     ["SADD s1 a", "SREM s1 a", "SADD s2 a b", "DEL s2"]),
    (["MULTI", "SET a 1", "INCR a", "EXEC"], ["MULTI", "SET a 1", "INCR a", "EXEC"]),
    (["MULTI", "SET a 1", "GET a", "EXEC"], ["SET a 1"]),
    (["MULTI", "GET a", "EXEC"], []),
    (["SET a 1", "FLUSHDB ASYNC", "FLUSHALL SYNC", "FLUSHALL", "SWAPDB 0 1", "SWAPDB 0 1"],
     ["SET a 1", "FLUSHDB ASYNC", "FLUSHALL SYNC", "FLUSHALL", "SWAPDB 0 1", "SWAPDB 0 1"]),
    (["SET a 1", "MOVE a 1", "SET q 1", "COPY q q2", "COPY q q3 DB 1", "RPUSH sl 3 1 2",
      "SORT sl STORE sd", "SORT sl", "SORT_RO sl"],
     ["SET a 1", "MOVE a 1", "SET q 1", "COPY q q2", "COPY q q3 DB 1", "RPUSH sl 3 1 2",
      "SORT sl STORE sd"]),
    (["RPUSH l a b", "BLPOP l 0", "BRPOP l 0", "RPUSH l a b", "blmove l m left right 0",
      "BRPOPLPUSH l m 0", "RPUSH l a b c", "BLMPOP 0 1 l LEFT COUNT 2", "BLMPOP 0 1 l RIGHT",
      "RPUSH l a b c", "LPOP l 2", "LMPOP 1 l RIGHT COUNT 5"],
     ["RPUSH l a b", "LPOP l", "RPOP l", "RPUSH l a b", "LMOVE l m left right",
      "RPOPLPUSH l m", "RPUSH l a b c", "LPOP l 2", "RPOP l 1", "RPUSH l a b c", "LPOP l 2",
      "RPOP l 1"]),
    (["ZADD z 1 a 2 b 3 c", "BZPOPMIN z 0", "BZPOPMAX z 0", "ZADD z 1 a 2 b 3 c",
      "BZMPOP 0 1 z MIN COUNT 2", "ZMPOP 1 z MAX"],
     ["ZADD z 1 a 2 b 3 c", "ZPOPMIN z", "ZPOPMAX z", "ZADD z 1 a 2 b 3 c", "ZPOPMIN z 2",
      "ZPOPMAX z 1"]),
    (["PFADD p a b c", "PFCOUNT p", "PFCOUNT p", "PFADD p a"], ["PFADD p a b c", "PFCOUNT p"]),
    (["XADD y 9-1 f v", "XADD y 9-* f v"], ["XADD y 9-1 f v", "XADD y 9-2 f v"]),
    (["XADD st 1-1 f v", "XADD st 2-1 f v", "XGROUP CREATE st g 0",
      "XREADGROUP GROUP g c1 COUNT 1 STREAMS st >", "XREADGROUP GROUP g c2 NOACK STREAMS st >",
      "XREADGROUP GROUP g c1 STREAMS st 0", "XREADGROUP GROUP g c3 STREAMS st 0"],
     ["XADD st 1-1 f v", "XADD st 2-1 f v", "XGROUP CREATE st g 0",
      "XCLAIM st g c1 0 1-1 TIME <t> RETRYCOUNT 1 FORCE JUSTID LASTID 1-1", "MULTI",
      "XGROUP CREATECONSUMER st g c2", "XGROUP SETID st g 2-1 ENTRIESREAD 2", "EXEC"]),
    (["XADD st 3-1 f v", "XCLAIM st g c4 0 1-1", "XCLAIM st g c4 0 1-1 JUSTID",
      "XAUTOCLAIM st g c5 0 0", "XACK st g 1-1", "XACK st g 9-9"],
     ["XADD st 3-1 f v",
      "XCLAIM st g c4 0 1-1 TIME <t> RETRYCOUNT 3 FORCE JUSTID LASTID 2-1",
      "XCLAIM st g c4 0 1-1 TIME <t> RETRYCOUNT 3 FORCE JUSTID LASTID 2-1",
      "XCLAIM st g c5 0 1-1 TIME <t> RETRYCOUNT 4 FORCE JUSTID LASTID 2-1", "XACK st g 1-1"]),
    (["XADD d 1-1 f v", "XADD d 2-1 f v", "XGROUP CREATE d g 0",
      "XREADGROUP GROUP g c STREAMS d >", "XDEL d 1-1", "XAUTOCLAIM d g c2 0 0",
      "XCLAIM d g c3 0 2-1 LASTID 5-5", "XCLAIM d g c3 0 9-9 LASTID 6-6"],
     ["XADD d 1-1 f v", "XADD d 2-1 f v", "XGROUP CREATE d g 0", "MULTI",
      "XCLAIM d g c 0 1-1 TIME <t> RETRYCOUNT 1 FORCE JUSTID LASTID 1-1",
      "XCLAIM d g c 0 2-1 TIME <t> RETRYCOUNT 1 FORCE JUSTID LASTID 2-1", "EXEC",
      "XDEL d 1-1", "MULTI",
      "XCLAIM d g c 0 1-1 TIME <t> RETRYCOUNT 1 FORCE JUSTID LASTID 2-1",
      "XCLAIM d g c2 0 2-1 TIME <t> RETRYCOUNT 2 FORCE JUSTID LASTID 2-1", "EXEC",
      "XCLAIM d g c3 0 2-1 TIME <t> RETRYCOUNT 3 FORCE JUSTID LASTID 5-5",
      "XGROUP SETID d g 6-6 ENTRIESREAD 2"]),
    (["XADD e 1-1 f v", "XGROUP CREATE e g 0", "XREADGROUP GROUP g c STREAMS e >",
      "XDEL e 1-1", "XCLAIM e g c2 0 1-1"],
     ["XADD e 1-1 f v", "XGROUP CREATE e g 0",
      "XCLAIM e g c 0 1-1 TIME <t> RETRYCOUNT 1 FORCE JUSTID LASTID 1-1", "XDEL e 1-1",
      "XCLAIM e g c 0 1-1 TIME <t> RETRYCOUNT 1 FORCE JUSTID LASTID 1-1"]),
]


def parse_aof(data):
    """The commands of an AOF tail (RESP arrays of bulk strings), as space-joined lines."""
    out, i = [], 0
    while i < len(data):
        assert data[i:i + 1] == b"*", data[i:i + 20]
        j = data.index(b"\r\n", i)
        n, i = int(data[i + 1:j]), j + 2
        words = []
        for _ in range(n):
            j = data.index(b"\r\n", i)
            size, i = int(data[i + 1:j]), j + 2
            words.append(data[i:i + size].decode("latin1"))
            i += size + 2
        out.append(" ".join(words))
    return out


def normalized(line):
    line = re.sub(r"TIME \d+", "TIME <t>", line)
    return re.sub(r"\b1\d{12}\b", "<ms>", line)


@pytest.fixture(scope="module")
def aof_redis():
    need("redis-server")
    s = start_redis(["--appendonly", "yes", "--appendfsync", "always",
                     "--enable-debug-command", "yes"])
    try:
        yield s
    finally:
        s.stop()


def aof_bytes(server):
    [path] = glob.glob(os.path.join(server.tmpdir, "appendonlydir", "*.incr.aof"))
    with open(path, "rb") as f:
        return f.read()


def propagated(server, c, lines):
    before = len(aof_bytes(server))
    for line in lines:
        c.call(*line.split(" "))
    time.sleep(0.05)
    # SELECT lines are the AOF's own bookkeeping of databases, not effects.
    return [normalized(l) for l in parse_aof(aof_bytes(server)[before:])
            if not l.startswith("SELECT ")]


@pytest.mark.parametrize("lines,want", CASES)
def test_redis_propagates(aof_redis, lines, want):
    c = Client(aof_redis.port)
    try:
        c.call("DEBUG", "SET-ACTIVE-EXPIRE", "0")
        assert propagated(aof_redis, c, lines) == want
    finally:
        c.close()


def test_lazy_expiry_propagates_del_before_the_command(aof_redis):
    c = Client(aof_redis.port)
    try:
        c.call("DEBUG", "SET-ACTIVE-EXPIRE", "0")
        for cmd, want in [("GET a", ["DEL a"]), ("EXISTS a", ["DEL a"]),
                          ("APPEND a x", ["MULTI", "DEL a", "APPEND a x", "EXEC"])]:
            c.call("SET", "a", "1", "PX", "1")
            time.sleep(0.01)
            assert propagated(aof_redis, c, [cmd]) == want
    finally:
        c.close()


def test_woken_pops_follow_the_write(aof_redis):
    c = Client(aof_redis.port)
    try:
        for block, write, want in [
            ("BLPOP wl 0", "RPUSH wl a b", ["RPUSH wl a b", "LPOP wl"]),
            ("BLMOVE wl2 wd RIGHT LEFT 0", "RPUSH wl2 a b",
             ["RPUSH wl2 a b", "LMOVE wl2 wd right left"]),
            ("BRPOPLPUSH w1 wd 0", "RPUSH w1 a b", ["RPUSH w1 a b", "RPOPLPUSH w1 wd"]),
            ("BLMPOP 0 1 wl3 LEFT COUNT 5", "RPUSH wl3 a b", ["RPUSH wl3 a b", "LPOP wl3 2"]),
            ("BZPOPMIN wz 0", "ZADD wz 1 a 2 b", ["ZADD wz 1 a 2 b", "ZPOPMIN wz"]),
            ("BZMPOP 0 1 wz2 MAX COUNT 3", "ZADD wz2 1 a 2 b",
             ["ZADD wz2 1 a 2 b", "ZPOPMAX wz2 2"]),
        ]:
            blocked = Client(aof_redis.port)
            t = threading.Thread(target=lambda: blocked.call(*block.split(" ")))
            t.start()
            time.sleep(0.1)
            got = propagated(aof_redis, c, [write])
            t.join()
            blocked.close()
            assert got == want, block
    finally:
        c.close()
