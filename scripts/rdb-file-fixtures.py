#!/usr/bin/env python3
"""Captures whole RDB files from a real redis-server for the RDB file reader's unit tests.

    python3 scripts/rdb-file-fixtures.py > crates/strata-server/src/rdb/file_fixtures.rs

Starts redis-server (7.0.15 when the fixtures were captured) on a free loopback port with
small encoding limits, builds a dataset per file below, runs SAVE and prints the file it
wrote as a hex constant. The expected contents live in the tests (`rdb/file_tests.rs`),
written from the commands below, not from the files.
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "redis"))
from servers import start_redis, Client, Error  # noqa: E402

# Far in the future and fixed, so that the file does not depend on when it was captured.
EXPIRE_MS = "4102444800000"
LIB = "#!lua name=mylib\nredis.register_function('echo1', function(keys, args) return args[1] end)"

EVERY_TYPE = [
    ["CONFIG", "SET", "list-max-listpack-size", "4"],
    ["CONFIG", "SET", "zset-max-listpack-entries", "4"],
    ["CONFIG", "SET", "hash-max-listpack-entries", "4"],
    ["CONFIG", "SET", "set-max-intset-entries", "4"],
    ["SET", "str", "bar"],
    ["SET", "int8", "100"],
    ["SET", "int16", "-1000"],
    ["SET", "int32", "1000000"],
    ["SET", "int64", "1234567890123"],
    ["SET", "lzf", "abcdefghij" * 10],
    ["SET", "expiring", "soon"],
    ["PEXPIREAT", "expiring", EXPIRE_MS],
    ["RPUSH", "list1", "a", "b", "1", "-2", "300", "70000", "5000000000"],
    ["RPUSH", "list3"] + ["e%d" % i for i in range(10)],
    ["SADD", "intset", "1", "2", "3", "-5"],
    ["SADD", "setbig", "1", "2", "3", "4", "5", "6"],
    ["SADD", "setstr", "apple", "banana", "7"],
    ["ZADD", "zsmall", "1", "a", "2.5", "b", "-3", "c", "inf", "d"],
    ["ZADD", "zbig", "1", "a", "2.5", "b", "-3", "c", "inf", "d", "-inf", "e", "0.1", "f"],
    ["HSET", "hsmall", "f1", "v1", "f2", "22", "n", "5000000000"],
    ["HSET", "hbig", "a", "1", "b", "2", "c", "3", "d", "4", "long", "y" * 40],
    ["PFADD", "hll", "a", "b", "c"],
    ["SELECT", "5"],
    ["SET", "other", "in db 5"],
    ["SELECT", "0"],
    ["FUNCTION", "LOAD", LIB],
]

# (constant name, description, commands, redis-server arguments)
FILES = [
    ("EVERY_TYPE", "every type and encoding size class, an expiry, db 5, a function library",
     EVERY_TYPE, []),
    ("EMPTY", "no keys", [], []),
    ("LFU", "SET a 1 under maxmemory-policy allkeys-lfu (a FREQ opcode)",
     [["CONFIG", "SET", "maxmemory-policy", "allkeys-lfu"], ["SET", "a", "1"]], []),
    ("LRU", "SET a 1 under maxmemory-policy allkeys-lru (an IDLE opcode)",
     [["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"], ["SET", "a", "1"]], []),
    ("NO_CHECKSUM", "SET a 1 with rdbchecksum no (a zero trailer)",
     [["SET", "a", "1"]], ["--rdbchecksum", "no"]),
    ("STREAM", "XADD s 1-1 f v (a stream)", [["XADD", "s", "1-1", "f", "v"]], []),
]


def main():
    print("//! RDB files written by SAVE on redis-server, captured by `scripts/rdb-file-fixtures.py`")
    first = True
    for name, desc, cmds, extra in FILES:
        s = start_redis(extra)
        try:
            c = Client(s.port)
            if first:
                version = [l for l in c.call("INFO", "server").decode().splitlines()
                           if l.startswith("redis_version:")][0].split(":")[1]
                print("//! %s (regenerate with it; the expected contents are written in" % version)
                print("//! `file_tests.rs`).")
                first = False
            for cmd in cmds:
                r = c.call(*cmd)
                if isinstance(r, Error):
                    raise RuntimeError(f"{cmd}: {r!r}")
            c.call("SAVE")
            with open(os.path.join(s.tmpdir, "dump.rdb"), "rb") as f:
                data = f.read()
        finally:
            s.stop()
        print()
        print(f"/// {desc}.")
        print(f'pub const {name}: &str = "{data.hex()}";')


if __name__ == "__main__":
    main()
