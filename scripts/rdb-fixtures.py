#!/usr/bin/env python3
"""Captures DUMP payloads from a real redis-server for the RDB codec's unit tests.

    python3 scripts/rdb-fixtures.py > crates/strata-server/src/rdb/fixtures.rs

Starts redis-server (7.0.15 when the fixtures were captured) on a free loopback port with
small encoding limits, so that every encoding appears with a handful of elements, creates
one key per type and size class, and prints each key's DUMP payload as a hex constant
beside a one-line description. The expected values live in the tests (`rdb/tests.rs`),
written from the commands below, not from the payloads.
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "redis"))
from servers import start_redis, Client, Error  # noqa: E402

# (constant name, description, commands creating key "k")
CASES = [
    ("STRING_RAW", "SET k bar", [["SET", "k", "bar"]]),
    ("STRING_INT8", "SET k 100 (int-encoded, 8 bits)", [["SET", "k", "100"]]),
    ("STRING_INT16", "SET k -1000", [["SET", "k", "-1000"]]),
    ("STRING_INT32", "SET k 1000000", [["SET", "k", "1000000"]]),
    ("STRING_INT64", "SET k 1234567890123 (too wide: raw digits)", [["SET", "k", "1234567890123"]]),
    ("STRING_LZF", "SET k ('abcdefghij' * 10) (LZF)", [["SET", "k", "abcdefghij" * 10]]),
    ("LIST_SMALL", "RPUSH k a b 1 -2 300 70000 5000000000 (one listpack node)",
     [["RPUSH", "k", "a", "b", "1", "-2", "300", "70000", "5000000000"]]),
    ("LIST_NODES", "RPUSH k e0 .. e9 with list-max-listpack-size 4 (three nodes)",
     [["CONFIG", "SET", "list-max-listpack-size", "4"],
      ["RPUSH", "k"] + ["e%d" % i for i in range(10)],
      ["CONFIG", "SET", "list-max-listpack-size", "-2"]]),
    ("LIST_PLAIN", "RPUSH k small ('x' * 200) tail with quicklist-packed-threshold 100 (a plain node)",
     [["DEBUG", "QUICKLIST-PACKED-THRESHOLD", "100"],
      ["RPUSH", "k", "small", "x" * 200, "tail"],
      ["DEBUG", "QUICKLIST-PACKED-THRESHOLD", "1073741824"]]),
    ("SET_INTSET16", "SADD k 1 2 3 -5 300 (intset, 16-bit)", [["SADD", "k", "1", "2", "3", "-5", "300"]]),
    ("SET_INTSET64", "SADD k 1 5000000000 -7 (intset, 64-bit)", [["SADD", "k", "1", "5000000000", "-7"]]),
    ("SET_HASHTABLE", "SADD k apple banana 7 (hashtable)", [["SADD", "k", "apple", "banana", "7"]]),
    ("ZSET_LISTPACK", "ZADD k 1 a 2.5 b -3 c inf d (listpack)",
     [["ZADD", "k", "1", "a", "2.5", "b", "-3", "c", "inf", "d"]]),
    ("ZSET_SKIPLIST", "ZADD k 1 a 2.5 b -3 c inf d -inf e 0.1 f with zset-max-listpack-entries 4 (skiplist)",
     [["CONFIG", "SET", "zset-max-listpack-entries", "4"],
      ["ZADD", "k", "1", "a", "2.5", "b", "-3", "c", "inf", "d", "-inf", "e", "0.1", "f"],
      ["CONFIG", "SET", "zset-max-listpack-entries", "128"]]),
    ("HASH_LISTPACK", "HSET k f1 v1 f2 22 n 5000000000 (listpack)",
     [["HSET", "k", "f1", "v1", "f2", "22", "n", "5000000000"]]),
    ("HASH_HASHTABLE", "HSET k a 1 b 2 c 3 d 4 long ('y' * 40) with hash-max-listpack-entries 4 (hashtable)",
     [["CONFIG", "SET", "hash-max-listpack-entries", "4"],
      ["HSET", "k", "a", "1", "b", "2", "c", "3", "d", "4", "long", "y" * 40],
      ["CONFIG", "SET", "hash-max-listpack-entries", "512"]]),
    ("STREAM_SAMEFIELDS", "XADD k 1-1 a 1 b x; XADD k 1-2 a 2 b y; XADD k 2-0 c z (one node, master fields)",
     [["XADD", "k", "1-1", "a", "1", "b", "x"], ["XADD", "k", "1-2", "a", "2", "b", "y"],
      ["XADD", "k", "2-0", "c", "z"]]),
    ("STREAM_NODES", "XADD k 1-0 .. 5-0 f v1 .. v5 with stream-node-max-entries 2; XDEL k 2-0 3-0 4-0",
     [["CONFIG", "SET", "stream-node-max-entries", "2"]]
     + [["XADD", "k", "%d-0" % i, "f", "v%d" % i] for i in range(1, 6)]
     + [["XDEL", "k", "2-0", "3-0", "4-0"], ["CONFIG", "SET", "stream-node-max-entries", "100"]]),
    ("STREAM_GROUPS", "XADD k 1-0 f v, 2-0 f v, 3-0 g w; XGROUP CREATE k g1 0; XREADGROUP GROUP g1 alice COUNT 2, "
     "bob COUNT 1; XCLAIM k g1 bob 0 1-0 TIME 1700000000000 RETRYCOUNT 7; XGROUP CREATE k g2 $ ENTRIESREAD 3; "
     "XGROUP CREATECONSUMER k g2 carol",
     [["XADD", "k", "1-0", "f", "v"], ["XADD", "k", "2-0", "f", "v"], ["XADD", "k", "3-0", "g", "w"],
      ["XGROUP", "CREATE", "k", "g1", "0"],
      ["XREADGROUP", "GROUP", "g1", "alice", "COUNT", "2", "STREAMS", "k", ">"],
      ["XREADGROUP", "GROUP", "g1", "bob", "COUNT", "1", "STREAMS", "k", ">"],
      ["XCLAIM", "k", "g1", "bob", "0", "1-0", "TIME", "1700000000000", "RETRYCOUNT", "7"],
      ["XGROUP", "CREATE", "k", "g2", "$", "ENTRIESREAD", "3"],
      ["XGROUP", "CREATECONSUMER", "k", "g2", "carol"]]),
    ("STREAM_EMPTY", "XADD k 5-0 f v; XDEL k 5-0; XGROUP CREATE k g 0 (no entries, a group)",
     [["XADD", "k", "5-0", "f", "v"], ["XDEL", "k", "5-0"], ["XGROUP", "CREATE", "k", "g", "0"]]),
    ("STREAM_LZF", "XADD k i-0 name ('value' * 6) for i in 1..=20 (an LZF-compressed node)",
     [["XADD", "k", "%d-0" % i, "name", "value" * 6] for i in range(1, 21)]),
    ("STREAM_INTS", "XADD k 1000000000000-5 a 300 b 70000 c -3 d 5000000000 e 2000000000 s ('x' * 100) "
     "t ('y' * 5000) (every listpack encoding)",
     [["XADD", "k", "1000000000000-5", "a", "300", "b", "70000", "c", "-3", "d", "5000000000",
       "e", "2000000000", "s", "x" * 100, "t", "y" * 5000]]),
]


def main():
    s = start_redis(["--enable-debug-command", "yes"])
    try:
        c = Client(s.port)
        version = [l for l in c.call("INFO", "server").decode().splitlines()
                   if l.startswith("redis_version:")][0].split(":")[1]
        print("//! DUMP payloads captured from redis-server %s by `scripts/rdb-fixtures.py`" % version)
        print("//! (regenerate with it; the expected values are written in `tests.rs`).")
        print()
        for name, desc, cmds in CASES:
            c.call("DEL", "k")
            for cmd in cmds:
                r = c.call(*cmd)
                if isinstance(r, Error):
                    raise RuntimeError(f"{cmd}: {r!r}")
            payload = c.call("DUMP", "k")
            enc = c.call("OBJECT", "ENCODING", "k").decode()
            print(f"/// {desc}; OBJECT ENCODING {enc}.")
            print(f'pub const {name}: &str = "{payload.hex()}";')
    finally:
        s.stop()


if __name__ == "__main__":
    main()
