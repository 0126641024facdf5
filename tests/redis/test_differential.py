"""Differential test: the same seeded random command sequence goes to a real redis-server
7.0 and to `strata serve`, and every reply must be the same (Redis 7 is the
specification). On a difference the sequence is shrunk to a short one that still shows it,
and that is printed.

    python3 -m pytest -q tests/redis/test_differential.py
    STRATA_DIFF_SEED=7 STRATA_DIFF_COMMANDS=100000 python3 -m pytest -q tests/redis -k differential

The generator covers every command Strata implements over a small key space (so commands
collide), binary keys and values, boundary integers, bad numbers, wrong arity, and expiry.
Bit offsets stay below 2e5 (values of at most 25 kB, so that an LCS over them is either
quick or refused by both for its table's size, and the two servers keep pace for the TTL
comparison), and offsets at or past 2^32 check the limit.
Known, accepted differences are left out of the generation on purpose:
- The server version, CONFIG SET port, COMMAND DOCS / COMMAND INFO details: not generated
  (nor INFO, HELLO, TIME: their replies hold versions, ids and clocks).
- KEYS order: compared as a multiset. SCAN: a full iteration is run on each server and
  the union of the keys compared as a set (cursors differ by design); cursors other than 0
  and invalid ones are not generated (an unknown cursor resumes somewhere else on each).
- RANDOMKEY: which key is random; compared are nil against a key, and that each server's
  key exists on both servers.
- SCAN TYPE none is not generated: Redis 7.0 returns keys that expired during the scan
  for it (its type lookup deletes them first), Strata does not.
Time-dependent replies are made deterministic: TTL and PTTL may differ by the time that
passes between the two servers (1 s, 300 ms), and so may EXPIRETIME and PEXPIRETIME; short expiries (1-3 ms) and expiries in the past
are followed by a pause and an EXISTS of the key, so that Redis's lazy deletion has
happened on both sides before DBSIZE can count the key; relative expiries with GT/LT come
from wide ranges, so two equal ones (decided by which millisecond they land in) are rare.
"""

import glob
import importlib
import math
import os
import random
import time
from concurrent.futures import ThreadPoolExecutor

from servers import Client, Error, start_redis, start_strata

SEED = int(os.environ.get("STRATA_DIFF_SEED", "20260523"))
COMMANDS = int(os.environ.get("STRATA_DIFF_COMMANDS", "30000"))  # 52,500 in all
SHRINK_SECONDS = 90
# Commands left out of a run, for triage: STRATA_DIFF_SKIP=INCRBYFLOAT,KEYS.
SKIP = {c for c in os.environ.get("STRATA_DIFF_SKIP", "").upper().split(",") if c}

KEYS = [b"k0", b"k1", b"k2", b"k3", b"\x00\xff\r\nbin", b"h?llo", b"a b", b""]
INT_ARGS = [
    b"0", b"1", b"-1", b"2", b"7", b"100", b"-100", b"9223372036854775807",
    b"-9223372036854775808", b"9223372036854775808", b"-9223372036854775809", b"abc", b"",
    b" 1", b"1 ", b"+1", b"01", b"-0", b"1.0", b"0x1", b"4611686018427387904",
    b"-4611686018427387904", b"9223372036854775806",
]
NUM_VALUES = [
    b"0", b"1", b"-1", b"10", b"9223372036854775807", b"-9223372036854775808",
    b"9223372036854775806", b"-9223372036854775807", b"1.5", b"3.0", b"-0.5", b"2.25",
    b" 1", b"1 ", b"01", b"+1", b"-0", b"1e3", b"abc", b"0.1", b"1e400", b"0x1A", b"-1e-5",
]
# Increments for INCRBYFLOAT, which Strata computes in long double as Redis does: beyond
# the f64 range too (1e400), hex floats, subnormals, inexact decimals.
FLOAT_ARGS = [
    b"1", b"-1", b"0.5", b"-0.25", b"2.5", b"10", b"1e2", b"abc", b"inf", b"-inf", b"nan",
    b" 1", b"1 ", b"", b"0", b"-0", b"1.5e1", b"+3", b"3.0", b".5", b"5.", b"1e-2", b"0.1",
    b"0.2", b"-0.3", b"1e308", b"1e400", b"-1e400", b"1.1e4932", b"0x1p3", b"0x.8", b"0x10",
    b"1e-4940", b"123456789.123456789", b"1e30", b"3.14159", b"1e-20", b"9.999999999999999e22",
    b"Infinity", b"1e", b"0x", b"1e99999",
]
# Keys only ever written by SET (OBJSET), so that OBJECT ENCODING is deterministic: APPEND,
# SETRANGE, MSET and INCRBYFLOAT give encodings that depend on how a value was made.
ENC_KEYS = [b"enc0", b"enc1", b"enc2"]
ENC_VALUES = [b"123", b"-5", b"0", b"9999", b"10000", b"01", b"-0", b"+1", b"1.5",
              b"9223372036854775807", b"9223372036854775808", b"x" * 44, b"x" * 45, b"", b"hi"]
# Tuning directives whose defaults both servers share (the test's redis-server flags aside).
CONFIG_NAMES = [
    b"hash-max-listpack-entries", b"hash-max-ziplist-value", b"zset-max-listpack-entries",
    b"list-max-listpack-size", b"set-max-intset-entries", b"maxmemory", b"maxmemory-policy",
    b"hz", b"activerehashing", b"lazyfree-lazy-user-del", b"notify-keyspace-events",
    b"latency-tracking", b"slowlog-max-len", b"slowlog-log-slower-than", b"tcp-keepalive",
    b"client-output-buffer-limit", b"lfu-log-factor", b"stream-node-max-bytes",
    b"maxmemory-samples", b"timeout", b"databases", b"no-such-directive",
]
CLIENT_NAMES = [b"app", b"a b", b"", b"x\n", b"worker-1", b"\xff"]
GLOBS = [
    b"*", b"k*", b"k?", b"*[0-1]", b"[^k]*", b"h\\?llo", b"h?llo", b"*\x00*", b"[a-", b"k[",
    b"\\", b"*b*", b"", b"[k]0", b"[]", b"a b", b"[a-z]?", b"*\\", b"k[0-9", b"[^a-k]*",
    b"h[?]llo", b"**", b"?", b"[z-a]*",
]


def load_type_generators():
    """The generators of the collection types, one module per family beside this file
    (`diff_*.py`), each with `GENERATORS = {name: (weight, fn)}` where `fn(gen)` returns
    an `Op` (gen: the `Gen`, for its random source, keys and values)."""
    out = {}
    here = os.path.dirname(os.path.abspath(__file__))
    for path in sorted(glob.glob(os.path.join(here, "diff_*.py"))):
        module = importlib.import_module(os.path.splitext(os.path.basename(path))[0])
        for name, entry in module.GENERATORS.items():
            assert name not in out, f"{name} generated twice"
            out[name] = entry
    return out


TYPE_GENERATORS = load_type_generators()


# How soon an expiry set by a command may fire: PAST (at once: only Redis's lazy deletion
# needs a touch of the key) or SHORT (within 3 ms: wait, then touch).
PAST, SHORT = "past", "short"


GLOB_PARTS = [b"*", b"?", b"[", b"]", b"^", b"-", b"\\", b"k", b"0", b"1", b"3", b"h", b"a",
              b"b", b"l", b"\x00", b"\xff", b" ", b"\r", b"n"]


class Op:
    """One command; `settle` is (key, PAST or SHORT) when the key may have just got an
    expiry that fires at once or within milliseconds; `compare(a, b)`, when given, decides
    whether the two replies agree (for replies whose order Redis does not define)."""

    def __init__(self, args, settle=None, compare=None):
        self.args = args
        self.settle = settle
        self.compare = compare
        # SCAN runs a whole iteration, RANDOMKEY follow-up EXISTS: never in a pipelined chunk.
        self.solo = args[0].upper() in (b"SCAN", b"RANDOMKEY")

    def __repr__(self):
        return " ".join(repr(a)[1:] if isinstance(a, bytes) else a for a in self.args)


class Gen:
    def __init__(self, seed):
        self.r = random.Random(seed)
        self.now_s = int(time.time())
        # Ops a type generator planned to come next, in order (a MULTI ... EXEC sequence):
        # it returns the first and appends the rest here.
        self.pending = []

    def key(self):
        return self.r.choice(KEYS)

    def value(self):
        r = self.r
        x = r.random()
        if x < 0.35:
            return r.choice(NUM_VALUES)
        if x < 0.5:
            return bytes(r.randrange(256) for _ in range(r.randrange(12)))
        if x < 0.6:
            return b""
        if x < 0.68:  # small alphabet: LCS with many ties and runs
            return bytes(r.choice(b"abc") for _ in range(r.randrange(24)))
        if x < 0.75:  # for LCS and the bit commands
            return r.choice([b"ohmytext", b"mynewtext", b"abcbdab", b"bdcaba", b"\xff\xff",
                             b"\xff", b"\x00\x00", b"\xff\xf0", b"\x0f\xff\xff\x00",
                             b"foobar", b"hello world"])
        return r.choice([b"v", b"hello", b"world", b"a\r\nb", b"\x00\x01\xff"])

    def int_arg(self):
        r = self.r
        return r.choice(INT_ARGS) if r.random() < 0.6 else str(r.randint(-1000, 1000)).encode()

    def name(self, s):
        r = self.r.random()
        if r < 0.6:
            return s.encode()
        if r < 0.8:
            return s.lower().encode()
        return bytes(c ^ 0x20 if chr(c).isalpha() and self.r.random() < 0.5 else c
                     for c in s.encode())

    def set_options(self, key):
        """SET's options: valid ones mostly, some repeated, conflicting or unknown."""
        r = self.r
        opts, settle = [], None
        for _ in range(r.choice([0, 0, 1, 1, 1, 2, 2, 3])):
            kind = r.choice(["NX", "XX", "GET", "KEEPTTL", "EX", "PX", "EXAT", "PXAT", "EX",
                             "PX", "FOO"])
            opts.append(self.name(kind))
            if kind in ("EX", "PX", "EXAT", "PXAT"):
                if r.random() < 0.03:
                    continue  # missing value
                v, soon = self.expiry(kind)
                opts.append(v)
                if soon and (settle is None or soon == SHORT):
                    settle = (key, soon)
        return opts, settle

    def expiry(self, kind):
        """An expiry argument for `kind`, and PAST or SHORT if it may expire at once."""
        r = self.r
        x = r.random()
        if x < 0.12:
            return r.choice([b"0", b"-1", b"abc", b"9223372036854775807", b"9223372036854775",
                             b"-9223372036854775808", b"1.5", b""]), PAST
        if kind == "EX":
            return str(r.randint(100, 10**6)).encode(), None
        if kind == "PX":
            if x < 0.2:
                return str(r.randint(1, 3)).encode(), SHORT
            return str(r.randint(10**5, 10**9)).encode(), None
        if kind == "EXAT":
            if x < 0.2:
                return str(r.randint(1, self.now_s - 10)).encode(), PAST
            return str(self.now_s + r.randint(100, 10**6)).encode(), None
        if x < 0.2:
            return str(r.randint(1, (self.now_s - 10) * 1000)).encode(), PAST
        return str(self.now_s * 1000 + r.randint(10**5, 10**9)).encode(), None

    def expire_cmd(self):
        r = self.r
        cmd = r.choice(["EXPIRE", "PEXPIRE", "EXPIREAT", "PEXPIREAT"])
        key = self.key()
        x = r.random()
        soon = PAST
        if x < 0.15:
            when = r.choice([b"0", b"-5", b"abc", b"9223372036854775807", b"-9223372036854775808",
                             b"9223372036854775", b"-9223372036854775", b"", b"1.5"])
        elif cmd == "EXPIRE":
            when, soon = str(r.randint(100, 10**6)).encode(), None
        elif cmd == "PEXPIRE":
            if x < 0.25:
                when, soon = str(r.randint(1, 3)).encode(), SHORT
            else:
                when, soon = str(r.randint(10**5, 10**9)).encode(), None
        elif cmd == "EXPIREAT":
            if x < 0.25:
                when = str(r.randint(1, self.now_s - 10)).encode()
            else:
                when, soon = str(self.now_s + r.randint(100, 10**6)).encode(), None
        else:
            if x < 0.25:
                when = str(r.randint(1, (self.now_s - 10) * 1000)).encode()
            else:
                when = str(self.now_s * 1000 + r.randint(10**5, 10**9)).encode()
                soon = None
        opts = [self.name(r.choice(["NX", "XX", "GT", "LT", "NX", "XX", "GT", "LT", "BAD"]))
                for _ in range(r.choice([0, 0, 0, 1, 1, 2]))]
        if r.random() < 0.02:
            opts.append(r.choice([b"x\xff\r\n", b"a\x00b", b"\n"]))
        return Op([self.name(cmd), key, when] + opts, soon and (key, soon))

    def op(self):
        if self.pending:
            return self.pending.pop(0)
        r = self.r
        names = [
            "GET", "SET", "SETNX", "SETEX", "PSETEX", "GETSET", "GETDEL", "MGET", "MSET",
            "APPEND", "STRLEN", "INCR", "DECR", "INCRBY", "DECRBY", "INCRBYFLOAT", "GETRANGE",
            "SETRANGE", "DEL", "UNLINK", "EXISTS", "TYPE", "EXPIRE", "TTL", "PTTL", "PERSIST",
            "KEYS", "PING", "ECHO", "SELECT", "DBSIZE", "FLUSHDB", "UNKNOWN", "GETEX", "MSETNX",
            "SUBSTR", "LCS", "SETBIT", "GETBIT", "BITCOUNT", "BITPOS", "OBJSET", "OBJECT",
            "CLIENT", "CONFIG", "MEMORY", "RENAME", "RENAMENX", "COPY", "RANDOMKEY", "TOUCH",
            "EXPIRETIME", "PEXPIRETIME", "SCAN", "SAVE", "BGSAVE"]
        weights = [8, 14, 3, 3, 3, 3, 3, 3, 3, 4, 3, 4, 3, 4, 3, 4, 4, 4, 4, 2, 4, 3, 8, 4, 3,
                   3, 3, 1, 1, 2, 3, 0.3, 0.3, 5, 3, 2, 4, 6, 4, 5, 6, 2, 2, 1, 1, 1,
                   4, 3, 4, 2, 2, 3, 3, 3, 0.2, 0.2]
        names = names + list(TYPE_GENERATORS)
        weights = weights + [w for w, _ in TYPE_GENERATORS.values()]
        weights = [0 if n in SKIP else w for n, w in zip(names, weights)]
        c = r.choices(names, weights=weights)[0]
        if c in TYPE_GENERATORS:
            return self.mutate(TYPE_GENERATORS[c][1](self))
        k = self.key()
        settle = None
        if c == "SET":
            opts, settle = self.set_options(k)
            args = [k, self.value()] + opts
        elif c in ("GET", "GETDEL", "STRLEN", "INCR", "DECR", "TYPE", "TTL", "PTTL",
                   "PERSIST", "EXPIRETIME", "PEXPIRETIME"):
            args = [k]
        elif c in ("RENAME", "RENAMENX"):
            args = [k, self.key()]
        elif c == "COPY":
            args = [k, self.key()]
            for _ in range(r.choice([0, 0, 1, 1, 2, 3])):
                opt = r.choice(["DB", "DB", "REPLACE", "REPLACE", "FOO"])
                args.append(self.name(opt))
                if opt == "DB" and r.random() > 0.03:
                    args.append(r.choice([b"0", b"0", b"1", b"2", b"15", b"16", b"-1", b"abc",
                                          b"2147483648", b"01"]))
        elif c == "RANDOMKEY":
            args = []
        elif c == "TOUCH":
            args = [self.key() for _ in range(r.randint(1, 4))]
        elif c == "SCAN":
            args = [r.choice([b"0"] * 12 + [b"", b"+0", b"-0", b"00", b"x", b" 1", b"1.5",
                                            b"18446744073709551616"])]
            for _ in range(r.choice([0, 0, 1, 1, 2, 3])):
                opt = r.choice(["COUNT", "MATCH", "TYPE", "FOO"])
                args.append(self.name(opt))
                if opt == "COUNT" and r.random() > 0.03:
                    args.append(r.choice([b"1", b"2", b"3", b"10", b"1000", b"0", b"-1",
                                          b"abc"]))
                elif opt == "MATCH" and r.random() > 0.03:
                    args.append(r.choice(GLOBS))
                elif opt == "TYPE" and r.random() > 0.03:
                    args.append(r.choice([b"string", b"STRING", b"hash", b"list", b"foo"]))
        elif c in ("SETNX", "GETSET", "APPEND"):
            args = [k, self.value()]
        elif c == "SETEX":
            when, soon = self.expiry("EX")
            args, settle = [k, when, self.value()], soon and (k, soon)
        elif c == "PSETEX":
            when, soon = self.expiry("PX")
            args, settle = [k, when, self.value()], soon and (k, soon)
        elif c in ("MGET", "DEL", "UNLINK", "EXISTS"):
            args = [self.key() for _ in range(r.randint(1, 4))]
        elif c == "MSET":
            args = []
            for _ in range(r.randint(1, 3)):
                args += [self.key(), self.value()]
        elif c in ("INCRBY", "DECRBY"):
            args = [k, self.int_arg()]
        elif c == "INCRBYFLOAT":
            args = [k, r.choice(FLOAT_ARGS)]
        elif c in ("GETRANGE", "SUBSTR"):
            args = [k, self.range_arg(), self.range_arg()]
        elif c == "GETEX":
            args, settle = self.getex_args(k)
        elif c == "MSETNX":
            args = []
            for _ in range(r.randint(1, 3)):
                args += [self.key(), self.value()]
        elif c == "LCS":
            args = [k, self.key()] + self.lcs_options()
        elif c == "SETBIT":
            bit = r.choice([b"0", b"1"]) if r.random() < 0.85 else \
                r.choice([b"2", b"-1", b"abc", b"01", b"", b"1.0"])
            args = [k, self.bit_offset(), bit]
        elif c == "GETBIT":
            args = [k, self.bit_offset() if r.random() < 0.9 else
                    r.choice([b"4294967295", b"4294967296"])]
        elif c == "BITCOUNT":
            args = [k] + self.bit_range_args(bitpos=False)
        elif c == "BITPOS":
            bit = r.choice([b"0", b"1"]) if r.random() < 0.9 else r.choice([b"2", b"-1", b"abc"])
            args = [k, bit] + self.bit_range_args(bitpos=True)
        elif c == "SETRANGE":
            off = r.choice([b"0", b"1", b"3", b"10", b"-1", b"abc", b"536870912",
                            b"9223372036854775807", b"2", b"5"])
            args = [k, off, self.value()]
        elif c == "EXPIRE":
            op = self.expire_cmd()
            return self.mutate(op)
        elif c == "KEYS":
            if r.random() < 0.5:
                args = [r.choice(GLOBS)]
            else:  # random patterns: classes, ranges, escapes, unbalanced brackets
                args = [b"".join(r.choice(GLOB_PARTS) for _ in range(r.randrange(8)))]
        elif c == "PING":
            args = r.choice([[], [self.value()]])
        elif c == "ECHO":
            args = [self.value()]
        elif c == "SELECT":
            args = [r.choice([b"0", b"0", b"1", b"2", b"15", b"16", b"-1", b"abc",
                              b"2147483648", b"01", b"-2147483649", b"9223372036854775808"])]
        elif c == "DBSIZE":
            args = []
        elif c == "OBJSET":
            return Op([b"SET", r.choice(ENC_KEYS), r.choice(ENC_VALUES)])
        elif c == "OBJECT":
            sub = self.name(r.choice(["ENCODING", "ENCODING", "REFCOUNT", "FREQ", "NOSUCH"]))
            return self.mutate(Op([self.name("OBJECT"), sub, r.choice(ENC_KEYS + [b"nokey"])]))
        elif c == "CLIENT":
            if r.random() < 0.5:
                return Op([self.name("CLIENT"), self.name("GETNAME")])
            return self.mutate(Op([self.name("CLIENT"), self.name("SETNAME"),
                                   r.choice(CLIENT_NAMES)]))
        elif c == "CONFIG":
            return Op([self.name("CONFIG"), self.name("GET"), r.choice(CONFIG_NAMES)])
        elif c == "MEMORY":
            # The sizes are estimates; `same` compares only whether the key was there.
            return Op([self.name("MEMORY"), self.name("USAGE"), r.choice(KEYS + ENC_KEYS)])
        elif c == "SAVE":
            # Only refusals: a save here syncs every shard's files, taking tens of
            # milliseconds that Redis's small dump does not, which shifts every TTL after it
            # beyond the comparison's slack (SAVE itself: tests/persistence.rs).
            args = r.choice([[b"x"], [b"x", b"y"]])
        elif c == "BGSAVE":
            # Only refusals: a started BGSAVE ends at different moments on the two servers
            # (Redis notices its child's exit up to 100 ms later), so what follows would race.
            args = r.choice([[b"bad"], [b"SCHEDULE", b"x"], [b"schedulex"]])
        elif c == "UNKNOWN":
            # A command no version of Redis has; the error quotes the first arguments.
            name = r.choice([b"NOSUCHCMD", b"nosuch\xffcmd", b"x" * 200, b"a\r\nb"])
            args = [bytes(r.randrange(256) for _ in range(r.randrange(80)))
                    for _ in range(r.randrange(5))]
            return Op([name] + args)
        else:  # FLUSHDB
            args = r.choice([[], [], [b"ASYNC"], [b"sync"], [b"bad"]])
        return self.mutate(Op([self.name(c)] + args, settle))

    def getex_args(self, key):
        """GETEX's options: mostly one valid one, sometimes repeated, combined or unknown."""
        r = self.r
        args, settle = [key], None
        for _ in range(r.choice([0, 1, 1, 1, 1, 1, 1, 2, 2, 3])):
            kind = r.choice(["EX", "PX", "EXAT", "PXAT", "PERSIST", "EX", "PX", "PERSIST"]
                            if r.random() < 0.9 else ["NX", "KEEPTTL", "FOO", "GET"])
            args.append(self.name(kind))
            if kind in ("EX", "PX", "EXAT", "PXAT"):
                if r.random() < 0.05:
                    continue  # missing value
                v, soon = self.expiry(kind)
                args.append(v)
                if soon and (settle is None or soon == SHORT):
                    settle = (key, soon)
        return args, settle

    def lcs_options(self):
        r = self.r
        opts = []
        for _ in range(r.choice([0, 0, 1, 1, 2, 3, 4])):
            kind = r.choice(["IDX", "LEN", "WITHMATCHLEN", "MINMATCHLEN", "IDX", "IDX",
                             "WITHMATCHLEN", "FOO" if r.random() < 0.3 else "IDX"])
            opts.append(self.name(kind))
            if kind == "MINMATCHLEN" and r.random() < 0.95:
                opts.append(r.choice([b"0", b"1", b"2", b"3", b"4", b"-1", b"abc", b"100",
                                      b"9223372036854775808"]))
        return opts

    def bit_offset(self):
        """Bit offsets: mostly within a few bytes, sometimes up to 2e5 bits (values stay
        small), and bad ones (negative, not a number, at or past 2^32)."""
        r = self.r
        x = r.random()
        if x < 0.6:
            return str(r.randrange(64)).encode()
        if x < 0.8:
            return str(r.randrange(2000)).encode()
        if x < 0.85:
            return str(r.randrange(2 * 10**5)).encode()
        return r.choice([b"-1", b"abc", b"", b"4294967296", b"9223372036854775807",
                         b"-9223372036854775808", b"1.5", b" 1", b"01", b"0"])

    def bit_range_args(self, bitpos):
        """BITCOUNT's / BITPOS's [start [end [BYTE|BIT]]], with too many or bad ones."""
        r = self.r
        n = r.choice([0, 0, 1, 2, 2, 3, 3, 3, 3, 4])
        out = [self.range_arg() if r.random() < 0.3 else str(r.randint(-40, 40)).encode()
               for _ in range(min(n, 2))]
        if n >= 3:
            out.append(r.choice([b"BIT", b"BYTE", b"bit", b"byte", b"BIT", b"Bit", b"bits"]
                                if r.random() < 0.95 else [b"", b"x"]))
        if n >= 4:
            out.append(r.choice([b"BIT", b"1", b"x"]))
        return out

    def range_arg(self):
        r = self.r
        return r.choice([b"0", b"1", b"2", b"-1", b"-2", b"-5", b"-100", b"100", b"3",
                         b"9223372036854775807", b"-9223372036854775808", b"abc"])

    def mutate(self, op):
        """Wrong arity now and then: one argument more or fewer (not for ops marked
        `exact_arity`, whose other arities would be nondeterministic, e.g. SPOP without a
        count pops a random member)."""
        if getattr(op, "exact_arity", False):
            return op
        x = self.r.random()
        if x < 0.02 and len(op.args) > 1:
            op.args = op.args[:-1]
        elif x < 0.04:
            op.args = op.args + [b"extra"]
        return op

    def ops(self, n):
        return [self.op() for _ in range(n)]


def same(op, a, b):
    if op.compare is not None:
        return op.compare(a, b)
    name = op.args[0].upper()
    if name == b"KEYS" and isinstance(a, list) and isinstance(b, list):
        return sorted(a) == sorted(b)
    if name == b"MEMORY" and isinstance(a, int) and isinstance(b, int):
        return True
    # Time passes between the two servers' replies; on a loaded machine (CI, 2 cores) that
    # can be a few hundred milliseconds.
    if name in (b"TTL", b"PTTL", b"EXPIRETIME", b"PEXPIRETIME") and isinstance(a, int) \
            and isinstance(b, int) and a >= 0 and b >= 0:
        return abs(a - b) <= (1 if name in (b"TTL", b"EXPIRETIME") else 300)
    return a == b


def scan_all(client, args):
    """A whole SCAN iteration from `args` (cursor and options): ('scan', sorted keys), or
    the error or unexpected reply of the first call that is not a SCAN reply."""
    keys, seen = set(), 0
    while True:
        client.send(args)
        rep = client.read()
        if not (isinstance(rep, list) and len(rep) == 2 and isinstance(rep[1], list)):
            return rep
        keys.update(rep[1])
        seen += 1
        if rep[0] == b"0" or seen > 10000:
            return ("scan", sorted(keys))
        args = [args[0], rep[0]] + args[2:]


class Pair:
    """One connection to each server."""

    def __init__(self, redis_port, strata_port, resp3):
        self.a = Client(redis_port)
        self.b = Client(strata_port)
        self.resp3 = resp3
        if resp3:
            for c in (self.a, self.b):
                c.send([b"HELLO", b"3"])
                c.read()

    def close(self):
        self.a.close()
        self.b.close()

    def call(self, args):
        if args[0].upper() == b"SCAN" and len(args) >= 2:
            return scan_all(self.a, args), scan_all(self.b, args)
        if args[0].upper() == b"RANDOMKEY" and len(args) == 1:
            ra, rb = self.a.call(*args), self.b.call(*args)
            if isinstance(ra, bytes) and isinstance(rb, bytes):
                keys = (ra, rb)
                ra = ("randomkey", [self.a.call(b"EXISTS", k) for k in keys])
                rb = ("randomkey", [self.b.call(b"EXISTS", k) for k in keys])
            return ra, rb
        self.a.send(args)
        self.b.send(args)
        return self.a.read(), self.b.read()

    def reset(self):
        # A shrunk sequence may leave a transaction open or keys watched.
        for args in ([b"DISCARD"], [b"UNWATCH"]):
            self.call(args)
        for args in ([b"SELECT", b"0"], [b"FLUSHALL"]):
            ra, rb = self.call(args)
            assert ra == rb == ("+", "OK"), (ra, rb)

    def run(self, ops, batch=1):
        """Replays `ops`, `batch` commands per write (pipelined) except around expiries
        that fire at once; returns (index, op, redis reply, strata reply) of the first
        difference, or None."""
        i = 0
        while batch > 1 and i < len(ops):
            chunk = []
            while i + len(chunk) < len(ops) and len(chunk) < batch \
                    and not ops[i + len(chunk)].settle and not ops[i + len(chunk)].solo:
                chunk.append(ops[i + len(chunk)])
            if not chunk:
                res = self.run(ops[i:i + 1])
                if res is not None:
                    return (i,) + res[1:]
                i += 1
                continue
            data = b"".join(Client.encode(op.args) for op in chunk)
            self.a.send_raw(data)
            self.b.send_raw(data)
            ra = [self.a.read() for _ in chunk]
            rb = [self.b.read() for _ in chunk]
            for j, op in enumerate(chunk):
                if not same(op, ra[j], rb[j]):
                    return i + j, op, ra[j], rb[j]
            i += len(chunk)
        if batch > 1:
            return None
        for i, op in enumerate(ops):
            ra, rb = self.call(op.args)
            if not same(op, ra, rb):
                return i, op, ra, rb
            if op.settle:
                key, soon = op.settle
                if soon == SHORT:
                    time.sleep(0.005)
                check = Op([b"EXISTS", key])
                ra, rb = self.call(check.args)
                if ra != rb:
                    return i, check, ra, rb
        return None


def shrink(pair, ops):
    """The shortest sequence found (within SHRINK_SECONDS) that still shows a difference:
    the shortest failing suffix first, then delta debugging (drop chunks while it fails)."""
    deadline = time.time() + SHRINK_SECONDS

    def fails(seq):
        pair.reset()
        res = pair.run(seq)
        return None if res is None else seq[:res[0] + 1]

    length = 1
    while length < len(ops):
        cut = fails(ops[-length:])
        if cut:
            ops = cut
            break
        length *= 2
    n = 2
    while len(ops) >= 2 and time.time() < deadline:
        chunk = math.ceil(len(ops) / n)
        for i in range(n):
            cand = ops[:i * chunk] + ops[(i + 1) * chunk:]
            cut = cand and fails(cand)
            if cut:
                ops = cut
                n = max(n - 1, 2)
                break
        else:
            if n >= len(ops):
                break
            n = min(len(ops), 2 * n)
    pair.reset()
    return ops, pair.run(ops)


def fail_shrunk(pair, ops, res, seed, resp3):
    """Fails with the first differing command `res` of `ops` and the shortest prefix-derived
    sequence (`shrink`) that still differs, replies cut to a readable length."""
    i, op, ra, rb = res
    small, final = shrink(pair, ops[:i + 1])
    lines = [f"seed {seed} ({'RESP3' if resp3 else 'RESP2'}): command {i} differs: {op!r}",
             f"  redis:  {ra!r}"[:3000], f"  strata: {rb!r}"[:3000],
             f"shrunk to {len(small)} commands (replayed from an empty server):"]
    lines += [f"  {o!r}"[:300] for o in small]
    if final is not None:
        lines += [f"  -> redis:  {final[2]!r}"[:3000], f"  -> strata: {final[3]!r}"[:3000]]
    raise AssertionError("\n".join(lines))


def differential(redis_server, strata_server, seed, n, resp3, batch=1):
    ops = Gen(seed).ops(n)
    pair = Pair(redis_server.port, strata_server.port, resp3)
    try:
        pair.reset()
        start = time.time()
        res = pair.run(ops, batch)
        elapsed = time.time() - start
        if res is None:
            print(f"\ndifferential (seed {seed}, {'RESP3' if resp3 else 'RESP2'}, "
                  f"{batch} per write): {n} commands, {elapsed:.1f} s, no difference")
            return
        fail_shrunk(pair, ops, res, seed, resp3)
    finally:
        pair.close()


def test_differential_resp2(redis_server, strata_server):
    differential(redis_server, strata_server, SEED, COMMANDS, resp3=False)


def test_differential_resp3(redis_server, strata_server):
    differential(redis_server, strata_server, SEED + 1, COMMANDS // 4, resp3=True)


def test_differential_pipelined(redis_server, strata_server):
    # Requests 64 to a write: replies must come back whole and in order (the shrinker
    # replays one by one, which also says whether pipelining is what differs).
    differential(redis_server, strata_server, SEED + 2, COMMANDS // 2, resp3=False, batch=64)


# Raw requests, each on a fresh connection: inline commands, quoting, malformed multibulk
# framing. What comes back before the server closes the connection (or goes quiet) must be
# the same bytes. Not compared: more than 1,048,576 arguments in one request, which Redis 7
# allows (up to INT_MAX) and Strata refuses on purpose (see MULTIBULK_MAX in
# crates/strata-server/src/protocol/parse.rs).
RAW_REQUESTS = [
    b"PING\r\n", b"ping hello\r\n", b"SET a b\r\nGET a\r\n", b'SET "a b" \'c d\'\r\nGET "a b"\r\n',
    b'ECHO "\\x41\\n\\t\\\\"\r\n', b'ECHO "unbalanced\r\n', b"ECHO 'x'y\r\n", b'ECHO "x"y\r\n',
    b"\r\n\r\nPING\r\n", b"\nPING\n", b"   PING   \r\n", b"ECHO a\x00b\r\n", b"*0\r\nPING\r\n",
    b"*-1\r\nPING\r\n", b"*abc\r\n", b"*1\r\n$abc\r\n", b"*1\r\nfoo\r\n", b"*1\r\n$-1\r\n",
    b"*1\r\n$536870913\r\n", b"*2\r\n$4\r\nECHO\r\n$1\r\nxy\r\n",
    b"*1\r\n$4\r\nPING\r\n*1\r\n$4\r\nPING\r\n", b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n",
    b"*1\r\n$4\r\nPING", b"*2\r\n$4\r\nECHO\r\n$3\r\na\r\nb\r\n", b"*1 \r\n$4\r\nPING\r\n",
    b"*+1\r\n$4\r\nPING\r\n", b"*01\r\n$04\r\nPING\r\n", b"PING\rPING\r\n", b"\"\"\r\n",
    b"ECHO \"a\"\"b\"\r\n", b"SET k2 v EX 100\r\nTTL k2\r\n", b"ECHO a\x00b\r\nPING\r\n",
    b"PING\r\nECHO a\x00b\r\n", b"ECHO a\x00b\r\n" + b"x" * 70000, b"ECHO \"a\x00b\"\r\n",
    b"*2\r\n$4\r\nECHO\r\n$3\r\na\x00b\r\n",
]


def drain(port, data):
    c = Client(port, timeout=0.5)
    try:
        c.send_raw(data)
        out = b""
        while True:
            try:
                chunk = c.sock.recv(1 << 16)
            except OSError:
                return out, "open"
            if not chunk:
                return out, "closed"
            out += chunk
    finally:
        c.close()


def test_differential_raw_protocol(redis_server, strata_server):
    # All requests at once, each on its own connection (they use different keys), so the
    # wait for connections that stay open is paid once.
    ports = (redis_server.port, strata_server.port)
    for port in ports:
        Client(port).call(b"FLUSHALL")
    with ThreadPoolExecutor(max_workers=2 * len(RAW_REQUESTS)) as pool:
        runs = [(data, [pool.submit(drain, port, data) for port in ports])
                for data in RAW_REQUESTS]
        diffs = [f"{data!r}\n  redis:  {a.result()!r}\n  strata: {b.result()!r}"
                 for data, (a, b) in runs if a.result() != b.result()]
    assert not diffs, "\n".join(diffs)


# Sequences on one fresh connection each, against servers with --requirepass: what an
# unauthenticated client may do and the texts it gets. (HELLO's reply holds the version.)
AUTH_SEQUENCES = [
    [[b"GET", b"k"]], [[b"PING"]], [[b"AUTH", b"wrong"]], [[b"AUTH", b"default", b"wrong"]],
    [[b"AUTH", b"s3cret"], [b"SET", b"k", b"v"], [b"GET", b"k"]],
    [[b"AUTH", b"nobody", b"s3cret"], [b"GET", b"k"]], [[b"AUTH"]],
    [[b"AUTH", b"a", b"b", b"c"]], [[b"NOSUCH"]], [[b"SELECT", b"1"]], [[b"HELLO", b"9"]],
    [[b"HELLO", b"3", b"AUTH", b"default", b"wrong"]], [[b"HELLO", b"2", b"SETNAME"]],
    [[b"QUIT"]], [[b"ECHO"]], [[b"GET"]],
    [[b"AUTH", b"default", b"s3cret"], [b"DBSIZE"], [b"AUTH", b"wrong"], [b"DBSIZE"]],
]
AUTH_RAW = [
    b"*11\r\n", b"*10\r\n" + b"$1\r\nx\r\n" * 10, b"*1\r\n$16385\r\n", b"*1\r\n$16384\r\n",
    b"GET k\r\n", b"AUTH s3cret\r\n*11\r\n$3\r\nDEL\r\n" + b"$1\r\nx\r\n" * 10,
]


def test_differential_auth(redis_server):
    # (The fixture's server is not used: it only makes the test skip without redis-server.)
    redis_s = start_redis(["--requirepass", "s3cret"])
    try:
        strata_s = start_strata(["--requirepass", "s3cret"])
        try:
            diffs = []
            for seq in AUTH_SEQUENCES:
                a, b = Client(redis_s.port), Client(strata_s.port)
                try:
                    for args in seq:
                        ra, rb = a.call(*args), b.call(*args)
                        if ra != rb:
                            diffs.append(f"{seq!r} at {args!r}\n  redis:  {ra!r}\n  strata: {rb!r}")
                            break
                finally:
                    a.close()
                    b.close()
            for data in AUTH_RAW:
                ra, rb = drain(redis_s.port, data), drain(strata_s.port, data)
                if ra != rb:
                    diffs.append(f"{data[:60]!r}\n  redis:  {ra!r}\n  strata: {rb!r}")
            assert not diffs, "\n".join(diffs)
        finally:
            assert strata_s.stop(), "strata serve did not stop within 10 s of SIGTERM"
    finally:
        redis_s.stop()
