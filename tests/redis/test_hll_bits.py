"""Differential test of the HyperLogLog commands and BITOP / BITFIELD / BITFIELD_RO: seeded
random sequences go to a real redis-server 7.0 and to `strata serve`, and every reply must
be the same, and so must the raw bytes of every key (GET after each command), so that a
HyperLogLog here is Redis's representation byte for byte (sparse opcodes, dense registers,
the cached count and its stale bit). Values are also carried across: a HyperLogLog built
on redis-server, copied with GET / SET, must count and grow the same here.

    cargo build --release -p strata-cli
    python3 -m pytest -q tests/redis/test_hll_bits.py
    STRATA_HLL_SEED=7 STRATA_HLL_COMMANDS=20000 python3 -m pytest -q tests/redis/test_hll_bits.py

On a difference the sequence is shrunk (test_differential.py's shrinker) and printed.
"""

import os

import diff_hll_bits as gens
from servers import Client, Error
from test_differential import Gen, Op, Pair, fail_shrunk

SEED = int(os.environ.get("STRATA_HLL_SEED", "20261126"))
COMMANDS = int(os.environ.get("STRATA_HLL_COMMANDS", "4000"))

HLL_KEYS = [b"h0", b"h1", b"h2", b"s", b"l"]
# Values the HyperLogLog commands must refuse or find corrupt: not HLLs at all, bad
# encodings, a dense value of the wrong length, sparse opcodes covering too few or too many
# registers, and registers over the sparse maximum. Not generated: a value ending in the
# first byte of an XZERO. Redis reads the missing byte from its buffer (0 at first, but
# after a PFADD splits that opcode, the byte its copy wrote past the new end), a state
# that is not part of the value and that no copy of it carries; Strata reads 0.
HEADER = b"HYLL\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80"
BAD_VALUES = [
    b"", b"HYLL", b"abc", b"123", b"HYLL\x02" + b"\x00" * 11 + b"\x7f\xff",
    b"HYLL\x00" + b"\x00" * 11, HEADER, HEADER + b"\x7f\xfe",
    HEADER + b"\x7f\xff\x00", HEADER + b"\x7f\xfe\xff\xff", HEADER + b"\x3f",
    HEADER + b"\x80" * 16384, HEADER + b"\x7f\xfe\xfc",
    b"HYLL\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80" + b"\xff" * 12288,
    b"HYLL\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00" + b"\x41\x10\x04" * 4096,
]


class HllGen(Gen):
    """The families' generators over a few keys of their own, with the string and list
    writes that make those keys interesting (bad values, corrupt opcodes, wrong types) and
    CONFIG SET hll-sparse-max-bytes; every write is followed by GETs of the keys."""

    def key(self):
        return self.r.choice(HLL_KEYS)

    def op(self):
        r = self.r
        x = r.random()
        if x < 0.04:
            return Op([b"SET", self.key(), r.choice(BAD_VALUES)])
        if x < 0.07:
            return Op([b"SETRANGE", self.key(), str(r.choice([0, 4, 15, 16, 17, 30])).encode(),
                       r.choice([b"\x00", b"\x7f", b"\xff", b"\x80\x80", b"\x01"])])
        if x < 0.09:
            return Op([b"APPEND", self.key(), r.choice([b"\x00", b"\x7f\xff", b"\x80"])])
        if x < 0.10:
            return Op([b"RPUSH", b"l", b"x"])
        if x < 0.11:
            return Op([b"DEL", self.key()])
        if x < 0.12:
            return Op([b"CONFIG", b"SET", b"hll-sparse-max-bytes",
                       r.choice([b"0", b"30", b"100", b"3000", b"3000", b"12000"])])
        if x < 0.13:
            return Op([b"EXPIRE", self.key(), b"1000"])
        if x < 0.14:
            return Op([b"TTL", self.key()])
        names = list(gens.GENERATORS)
        weights = [w for w, _ in gens.GENERATORS.values()]
        c = r.choices(names, weights=weights)[0]
        return self.mutate(gens.GENERATORS[c][1](self))

    def ops(self, n):
        out = []
        for _ in range(n):
            op = self.op()
            out.append(op)
            if op.args[0].upper() not in (b"GET", b"TTL", b"PFDEBUG"):
                out += [Op([b"GET", k]) for k in HLL_KEYS[:4]]
        return out


def run(redis_server, strata_server, seed, n, resp3):
    ops = HllGen(seed).ops(n)
    pair = Pair(redis_server.port, strata_server.port, resp3)
    try:
        pair.reset()
        pair.call([b"CONFIG", b"SET", b"hll-sparse-max-bytes", b"3000"])
        res = pair.run(ops)
        if res is None:
            return
        fail_shrunk(pair, ops, res, seed, resp3)
    finally:
        pair.call([b"CONFIG", b"SET", b"hll-sparse-max-bytes", b"3000"])
        pair.close()


def test_hll_bits_resp2(redis_server, strata_server):
    run(redis_server, strata_server, SEED, COMMANDS, resp3=False)


def test_hll_bits_resp3(redis_server, strata_server):
    run(redis_server, strata_server, SEED + 1, COMMANDS // 2, resp3=True)


def test_hll_values_cross_servers(redis_server, strata_server):
    """A HyperLogLog built on one server and SET on the other counts, merges and grows the
    same, sparse and dense, in both directions."""
    a, b = Client(redis_server.port), Client(strata_server.port)
    try:
        for c in (a, b):
            c.call(b"FLUSHALL")
        for n, (src, dst) in [(50, (a, b)), (900, (a, b)), (4000, (a, b)), (50, (b, a)),
                              (4000, (b, a))]:
            key = b"x%d" % n
            for i in range(0, n, 500):
                src.call(b"PFADD", key, *[b"el-%d" % j for j in range(i, min(n, i + 500))])
            value = src.call(b"GET", key)
            assert dst.call(b"SET", key, value) == ("+", "OK")
            assert dst.call(b"GET", key) == value
            for c in (a, b):
                c.call(b"SET", b"copy", value)
            for cmd in ([b"PFCOUNT", key], [b"PFCOUNT", b"copy"], [b"GET", key],
                        [b"PFADD", key, b"new-1", b"new-2", b"el-1"], [b"GET", key],
                        [b"PFCOUNT", key, b"copy", b"nokey"], [b"PFMERGE", b"m", key, b"copy"],
                        [b"GET", b"m"], [b"PFDEBUG", b"ENCODING", key], [b"PFCOUNT", b"m"],
                        [b"GET", b"m"]):
                ra, rb = a.call(*cmd), b.call(*cmd)
                assert ra == rb, f"n={n} {cmd!r}\n  redis:  {ra!r}"[:500] + f"\n  strata: {rb!r}"[:500]
    finally:
        a.close()
        b.close()


def test_pfselftest(redis_server, strata_server):
    a, b = Client(redis_server.port, timeout=120), Client(strata_server.port, timeout=120)
    try:
        assert a.call(b"PFSELFTEST") == b.call(b"PFSELFTEST") == ("+", "OK")
        assert a.call(b"PFSELFTEST", b"x") == b.call(b"PFSELFTEST", b"x")
        assert isinstance(b.call(b"PFSELFTEST", b"x"), Error)
    finally:
        a.close()
        b.close()
