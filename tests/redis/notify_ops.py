"""Random command sequences for the keyspace-notification differential test
(test_notify.py; not a `diff_*.py` module, since test_differential.py draws reply-compared
commands from those and these ops are compared by their events): every write command Strata implements, over a few keys of every type
(so commands also meet the wrong type and produce no event), with expiry, renames, moves
between databases, DUMP/RESTORE and MULTI/EXEC blocks.

An op is a list of commands sent back to back (one, or a whole MULTI ... EXEC), or the
sleep after a short SET PX so that expiry is deterministic: the key is due before the next
command, whichever of lazy or active expiry deletes it.
"""

import random

KEYS = [b"a", b"b", b"c", b"{t}x", b"{t}y", b"l", b"h", b"s", b"z"]
VALUES = [b"1", b"0", b"-5", b"v", b"hello", b"", b"3.5", b"99999999999"]
MEMBERS = [b"m1", b"m2", b"m3", b"m4", b"1", b"2"]


class Gen:
    def __init__(self, seed):
        self.r = random.Random(seed)

    def key(self):
        return self.r.choice(KEYS)

    def keys(self, lo=1, hi=3):
        return [self.key() for _ in range(self.r.randint(lo, hi))]

    def val(self):
        return self.r.choice(VALUES)

    def mem(self):
        return self.r.choice(MEMBERS)

    def mems(self, lo=1, hi=3):
        return [self.mem() for _ in range(self.r.randint(lo, hi))]

    def score(self):
        return self.r.choice([b"1", b"2", b"2.5", b"-1", b"0", b"10", b"+inf"])

    def string_op(self):
        r, k = self.r, self.key()
        return r.choice([
            lambda: [b"SET", k, self.val()],
            lambda: [b"SET", k, self.val()] + r.choice(
                [[b"NX"], [b"XX"], [b"GET"], [b"KEEPTTL"], [b"EX", b"100"], [b"PX", b"100000"],
                 [b"NX", b"GET"], [b"XX", b"EX", b"50"]]),
            lambda: [b"SETNX", k, self.val()],
            lambda: [b"SETEX", k, b"100", self.val()],
            lambda: [b"PSETEX", k, b"100000", self.val()],
            lambda: [b"GETSET", k, self.val()],
            lambda: [b"GETDEL", k],
            lambda: [b"GETEX", k] + r.choice([[], [b"EX", b"100"], [b"PERSIST"],
                                              [b"PXAT", b"1"]]),
            lambda: [b"MSET"] + sum([[x, self.val()] for x in self.keys(1, 3)], []),
            lambda: [b"MSETNX"] + sum([[x, self.val()] for x in self.keys(1, 2)], []),
            lambda: [b"APPEND", k, self.val()],
            lambda: [r.choice([b"INCR", b"DECR"]), k],
            lambda: [r.choice([b"INCRBY", b"DECRBY"]), k, r.choice([b"1", b"-3", b"x"])],
            lambda: [b"INCRBYFLOAT", k, r.choice([b"1.5", b"-2", b"x"])],
            lambda: [b"SETRANGE", k, r.choice([b"0", b"3"]), r.choice([b"ab", b""])],
            lambda: [b"SETBIT", k, r.choice([b"0", b"7", b"20"]), r.choice([b"0", b"1"])],
            lambda: [b"BITFIELD", k] + r.choice([[b"SET", b"u8", b"0", b"5"],
                                                 [b"INCRBY", b"i5", b"3", b"100"],
                                                 [b"OVERFLOW", b"FAIL", b"INCRBY", b"u2", b"0",
                                                  b"7"],
                                                 [b"GET", b"u4", b"0"]]),
            lambda: [b"BITOP", r.choice([b"AND", b"OR", b"XOR"]), k] + self.keys(1, 2),
            lambda: [b"PFADD", k] + self.mems(0, 3),
            lambda: [b"PFMERGE", k] + self.keys(0, 2),
        ])()

    def generic_op(self):
        r, k = self.r, self.key()
        return r.choice([
            lambda: [r.choice([b"DEL", b"UNLINK"])] + self.keys(1, 4),
            lambda: [b"EXPIRE", k, r.choice([b"100", b"-1", b"0"])] + r.choice(
                [[], [], [b"NX"], [b"XX"], [b"GT"], [b"LT"]]),
            lambda: [b"PEXPIRE", k, r.choice([b"100000", b"-5"])],
            lambda: [b"EXPIREAT", k, r.choice([b"1", b"99999999999"])],
            lambda: [b"PERSIST", k],
            lambda: [r.choice([b"RENAME", b"RENAMENX"]), k, self.key()],
            lambda: [b"COPY", k, self.key()] + r.choice([[], [b"REPLACE"], [b"DB", b"1"]]),
            lambda: [b"MOVE", k, b"1"],
            lambda: [b"TOUCH", k],
        ])()

    def list_op(self):
        r = self.r
        k = r.choice([b"l", b"l", b"a", b"{t}x"])
        k2 = r.choice([b"l", b"{t}y", b"a"])
        end = r.choice([b"LEFT", b"RIGHT"])
        return r.choice([
            lambda: [r.choice([b"LPUSH", b"RPUSH", b"LPUSHX", b"RPUSHX"]), k] + self.mems(1, 3),
            lambda: [r.choice([b"LPOP", b"RPOP"]), k] + r.choice([[], [b"2"], [b"0"]]),
            lambda: [b"LSET", k, r.choice([b"0", b"-1", b"9"]), self.mem()],
            lambda: [b"LINSERT", k, r.choice([b"BEFORE", b"AFTER"]), self.mem(), b"new"],
            lambda: [b"LREM", k, r.choice([b"0", b"1", b"-1"]), self.mem()],
            lambda: [b"LTRIM", k, r.choice([b"0", b"1"]), r.choice([b"-1", b"0", b"1"])],
            lambda: [b"LMOVE", k, k2, end, r.choice([b"LEFT", b"RIGHT"])],
            lambda: [b"RPOPLPUSH", k, k2],
            lambda: [b"LMPOP", b"2", k, k2, end] + r.choice([[], [b"COUNT", b"2"]]),
        ])()

    def hash_op(self):
        r = self.r
        k = r.choice([b"h", b"h", b"a"])
        return r.choice([
            lambda: [b"HSET", k] + sum([[f, self.val()] for f in self.mems(1, 2)], []),
            lambda: [b"HMSET", k, self.mem(), self.val()],
            lambda: [b"HSETNX", k, self.mem(), self.val()],
            lambda: [b"HDEL", k] + self.mems(1, 3),
            lambda: [b"HINCRBY", k, self.mem(), r.choice([b"1", b"x"])],
            lambda: [b"HINCRBYFLOAT", k, self.mem(), b"0.5"],
        ])()

    def set_op(self):
        r = self.r
        k = r.choice([b"s", b"s", b"{t}x", b"a"])
        return r.choice([
            lambda: [b"SADD", k] + self.mems(1, 3),
            lambda: [b"SREM", k] + self.mems(1, 3),
            # Only pops that take every member (random ones would make the servers'
            # sets differ; test_notify.py checks the partial pop's events by itself).
            lambda: [b"SPOP", k] + r.choice([[b"10"], [b"0"]]),
            lambda: [b"SMOVE", k, r.choice([b"s", b"{t}y", b"a"]), self.mem()],
            lambda: [r.choice([b"SINTERSTORE", b"SUNIONSTORE", b"SDIFFSTORE"]),
                     r.choice([b"{t}y", b"s"])] + self.keys(1, 2),
        ])()

    def zset_op(self):
        r = self.r
        k = r.choice([b"z", b"z", b"{t}x", b"a"])
        return r.choice([
            lambda: [b"ZADD", k] + r.choice([[], [b"NX"], [b"XX"], [b"CH"], [b"GT"],
                                             [b"INCR"]]) + [self.score(), self.mem()],
            lambda: [b"ZADD", k, self.score(), self.mem(), self.score(), self.mem()],
            lambda: [b"ZINCRBY", k, r.choice([b"1", b"0"]), self.mem()],
            lambda: [b"ZREM", k] + self.mems(1, 3),
            lambda: [b"ZREMRANGEBYSCORE", k, b"-inf", r.choice([b"1", b"(2"])],
            lambda: [b"ZREMRANGEBYRANK", k, b"0", r.choice([b"0", b"-1"])],
            lambda: [b"ZREMRANGEBYLEX", k, b"-", r.choice([b"[m2", b"+"])],
            lambda: [r.choice([b"ZPOPMIN", b"ZPOPMAX"]), k] + r.choice([[], [b"2"]]),
            lambda: [b"ZMPOP", b"2", k, b"{t}y", r.choice([b"MIN", b"MAX"])],
            lambda: [r.choice([b"ZUNIONSTORE", b"ZINTERSTORE", b"ZDIFFSTORE"]),
                     r.choice([b"{t}y", b"z"]), b"2", k, r.choice([b"z", b"{t}x"])],
            lambda: [b"ZRANGESTORE", r.choice([b"{t}y", b"z"]), k, b"0",
                     r.choice([b"-1", b"0"])],
        ])()

    def stream_op(self):
        # Explicit, rising IDs (self.sid), so both servers hold the same entries; only the
        # stream key `st`, which DUMP/RESTORE ops never name.
        r = self.r
        self.sid = getattr(self, "sid", 0) + 1
        now = b"%d-1" % self.sid
        old = b"%d-1" % r.randint(1, self.sid)
        return r.choice([
            lambda: [b"XADD", b"st"] + r.choice([[], [b"NOMKSTREAM"], [b"MAXLEN", b"3"]]) +
                    [now, b"f", self.val()],
            lambda: [b"XDEL", b"st", old],
            lambda: [b"XTRIM", b"st", b"MAXLEN", r.choice([b"1", b"5"])],
            lambda: [b"XSETID", b"st", now],
            lambda: [b"XGROUP", b"CREATE", b"st", r.choice([b"g1", b"g2"]), b"$"] +
                    r.choice([[], [b"MKSTREAM"]]),
            lambda: [b"XGROUP", b"SETID", b"st", b"g1", b"0"],
            lambda: [b"XGROUP", b"DESTROY", b"st", r.choice([b"g1", b"g2"])],
            lambda: [b"XGROUP", b"CREATECONSUMER", b"st", b"g1", r.choice([b"c1", b"c2"])],
            lambda: [b"XGROUP", b"DELCONSUMER", b"st", b"g1", r.choice([b"c1", b"c2"])],
            # Reads and claims by a consumer that may not exist yet: xgroup-createconsumer.
            lambda: [b"XREADGROUP", b"GROUP", b"g1", self.consumer(), b"COUNT", b"1",
                     b"STREAMS", b"st", r.choice([b">", b"0"])],
            lambda: [b"XCLAIM", b"st", b"g1", self.consumer(), b"0", old],
            lambda: [b"XAUTOCLAIM", b"st", b"g1", self.consumer(), b"0", b"0", b"COUNT", b"1"],
        ])()

    def consumer(self):
        return self.r.choice([b"c1", b"c2", b"c3"])

    def geo_op(self):
        r = self.r
        lon = r.choice([b"13.36", b"15.08", b"-0.12"])
        return r.choice([
            lambda: [b"GEOADD", b"geo"] + r.choice([[], [b"NX"], [b"CH"]]) +
                    [lon, b"38.11", self.mem()],
            lambda: [b"GEOSEARCHSTORE", b"geodst", b"geo", b"FROMLONLAT", b"14", b"38",
                     b"BYRADIUS", r.choice([b"1", b"500"]), b"km", b"ASC"],
            lambda: [b"GEORADIUS", b"geo", b"14", b"38", r.choice([b"1", b"500"]), b"km",
                     b"STORE", b"geodst"],
        ])()

    def command(self):
        r = self.r.random()
        if r < 0.06:
            return self.stream_op()
        if r < 0.09:
            return self.geo_op()
        r = self.r.random()
        if r < 0.22:
            return self.string_op()
        if r < 0.40:
            return self.generic_op()
        if r < 0.55:
            return self.list_op()
        if r < 0.67:
            return self.hash_op()
        if r < 0.80:
            return self.set_op()
        return self.zset_op()

    def op(self):
        """One op: a list of commands, ("sleep", s), or ("dump-restore", src, dst)."""
        x = self.r.random()
        if x < 0.04:
            # SET PX 1, not PEXPIRE 1: redis-server deletes at once a PEXPIRE whose
            # millisecond ticked during the command (`del`), so that one is not
            # deterministic; a SET's expiry is set, then expires (`expired`) either way.
            return [[b"SET", self.key(), b"v", b"PX", b"1"]], 0.01
        if x < 0.07:
            return [[b"MULTI"]] + [self.command() for _ in range(self.r.randint(1, 4))] + \
                [[b"EXEC"]], 0
        if x < 0.09:
            return ("dump-restore", self.key(), self.key()), 0
        if x < 0.10:
            # Reads after an expiry: the lazy path.
            return [[b"GET", self.key()], [b"EXISTS", self.key()]], 0
        return [self.command()], 0

    def ops(self, n):
        return [self.op() for _ in range(n)]
