"""Differential test of the geo commands and SORT / SORT_RO: seeded random sequences of
GEOADD / GEOSEARCH / GEORADIUS / ... and SORT go to a real redis-server 7.0 and to
`strata serve`, and every reply must be the same (distances, coordinates, hashes, order),
and so must the sorted sets and lists they store (ZRANGE / LRANGE after each store).

    cargo build --release -p strata-cli
    python3 -m pytest -q tests/redis/test_geo_sort.py
    STRATA_GEO_SEED=7 STRATA_GEO_COMMANDS=20000 python3 -m pytest -q tests/redis/test_geo_sort.py

The keys are typed by name: g* sorted sets of positions (dense around a few centres, so
that searches find many points, and spread over the globe), l* lists, s* sets, z* sorted
sets, and w_* strings and h_* hashes that SORT's BY and GET patterns name. On a difference
the sequence is shrunk (test_differential.py's shrinker) and printed.
"""

import os

import diff_geo as gens
from test_differential import Gen, Op, Pair, fail_shrunk

SEED = int(os.environ.get("STRATA_GEO_SEED", "20261126"))
COMMANDS = int(os.environ.get("STRATA_GEO_COMMANDS", "3000"))

GEO_KEYS = [b"g0", b"g1", b"g2"]
ELEMS = [b"%d" % i for i in range(16)] + [b"a", b"b", b"c", b"1.5", b"-3", b"", b"x y",
                                          b"10", b"2e3"]
CENTRES = [(13.36, 38.11), (-122.42, 37.77), (179.9, 0.5), (-179.95, -10.0), (0.0, 84.9),
           (10.0, -84.9)]


class GeoGen(Gen):
    """Geo commands over the g* keys, SORT over l*, s*, z* with the w_* / h_* keys their
    patterns read, and the writes that fill them."""

    def key(self):
        return self.r.choice(GEO_KEYS)

    def position(self):
        r = self.r
        if r.random() < 0.7:
            x, y = r.choice(CENTRES)
            spread = r.choice([0.01, 0.5, 5.0])
            x = max(-180.0, min(180.0, x + r.uniform(-spread, spread)))
            y = max(-85.05112878, min(85.05112878, y + r.uniform(-spread, spread)))
            return [b"%.6f" % x, b"%.6f" % y]
        return [gens.lon(r), gens.lat(r)]

    def fill(self):
        r = self.r
        args = [b"GEOADD", self.key()]
        for _ in range(r.randint(1, 12)):
            args += self.position() + [gens.member(r)]
        return Op(args)

    def sort_writes(self):
        r = self.r
        x = r.random()
        e = [r.choice(ELEMS) for _ in range(r.randint(1, 6))]
        if x < 0.3:
            return Op([b"RPUSH", r.choice([b"l0", b"l1"])] + e)
        if x < 0.45:
            return Op([b"SADD", r.choice([b"s0", b"s1"])] + e)
        if x < 0.6:
            args = [b"ZADD", b"z0"]
            for m in e:
                args += [str(r.randint(-5, 5)).encode(), m]
            return Op(args)
        if x < 0.8:
            return Op([b"SET", b"w_" + r.choice(ELEMS),
                       r.choice([b"1", b"2", b"-7", b"3.5", b"10", b"abc", b"", b"1e400",
                                 b"inf", b" 4", b"5 "]) if r.random() < 0.9
                       else str(r.randint(-20, 20)).encode()])
        if x < 0.95:
            return Op([b"HSET", b"h_" + r.choice(ELEMS), r.choice([b"f", b"g"]),
                       r.choice([b"1", b"x", b"2.5", b"b", b"a", b""])])
        return Op([b"DEL", r.choice([b"l0", b"s0", b"z0", b"w_1", b"h_1"])])

    def sort(self):
        r = self.r
        key = r.choice([b"l0", b"l1", b"s0", b"s1", b"z0", b"g0", b"nokey", b"w_1"])
        kind = {b"l": "list", b"s": "set", b"z": "zset", b"g": "zset"}.get(key[:1])
        name = b"SORT" if r.random() < 0.8 else b"SORT_RO"
        saved = self.key
        self.key = lambda: key
        try:
            return gens.sort_op(self, name, kind)
        finally:
            self.key = saved

    def op(self):
        if self.pending:
            return self.pending.pop(0)
        r = self.r
        x = r.random()
        if x < 0.12:
            return self.fill()
        if x < 0.3:
            return self.sort_writes()
        if x < 0.45:
            return self.sort()
        names = [n for n in gens.GENERATORS if not n.startswith("SORT")]
        weights = [gens.GENERATORS[n][0] for n in names]
        c = r.choices(names, weights=weights)[0]
        return self.mutate(gens.GENERATORS[c][1](self))

    def ops(self, n):
        out = []
        for _ in range(n):
            op = self.op()
            out.append(op)
            # What a store wrote, read back.
            if any(a in (b"STORE", b"STOREDIST") for a in op.args) \
                    or op.args[0].upper() == b"GEOSEARCHSTORE":
                for k in (b"gdst", b"k0", b"k1", b"k2", b"k3"):
                    out.append(Op([b"TYPE", k]))
                out.append(Op([b"ZRANGE", b"gdst", b"0", b"-1", b"WITHSCORES"]))
                out.append(Op([b"LRANGE", b"gdst", b"0", b"-1"]))
        return out


def run(redis_server, strata_server, seed, n, resp3):
    ops = GeoGen(seed).ops(n)
    pair = Pair(redis_server.port, strata_server.port, resp3)
    try:
        pair.reset()
        res = pair.run(ops)
        if res is None:
            return
        fail_shrunk(pair, ops, res, seed, resp3)
    finally:
        pair.close()


def test_geo_sort_resp2(redis_server, strata_server):
    run(redis_server, strata_server, SEED, COMMANDS, resp3=False)


def test_geo_sort_resp3(redis_server, strata_server):
    run(redis_server, strata_server, SEED + 1, COMMANDS // 2, resp3=True)
