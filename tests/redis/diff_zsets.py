"""Differential generators for the sorted-set commands (loaded by test_differential.py).

Every command Strata implements for sorted sets is generated with valid and bad arguments,
over the shared key space (so strings and other types give WRONGTYPE paths, and sets, once
their family is present, feed ZUNION and its kin), plus a few keys of their own for large
(skiplist-encoded) sets.

The blocking pops (BZPOPMIN, BZPOPMAX, BZMPOP) are generated with timeouts that expire at
once (1 ms) or are invalid, on keys that may be empty: a run never waits for a write
(blocking with a write from another client is tested in `test_zsets.py`).

Left out on purpose, because Redis's reply is not determined by the data:
- BYLEX ranges (ZRANGEBYLEX, ZREVRANGEBYLEX, ZRANGE BYLEX, ZLEXCOUNT, ZREMRANGEBYLEX) on a
  skiplist-encoded set whose scores differ: Redis's skiplist descent assumes equal scores
  and its answer then depends on the random node levels. Small keys stay listpack-encoded
  (members of at most 64 bytes, a pool of a few members), where Redis walks in score order
  as Strata does; large sets get BYLEX only on `zbiglex`, whose scores are all equal.
- ZRANDMEMBER's choice: compared are the shape, the count, distinctness for a positive
  count, the whole set when the count reaches its size, and that scores agree.
- ZSCAN cursors of large sets: only COUNT 1000 is generated for them, which returns the
  whole set at once on both (Redis's dictScan visits every bucket), compared as a multiset.
"""

import math

MEMBERS = [b"a", b"b", b"c", b"d", b"e", b"f", b"", b"a\x00b", b"\xff", b"m1", b"m10", b"B"]
SCORES = [b"0", b"1", b"2", b"3", b"-1", b"-2", b"1.5", b"-0.5", b"10", b"100", b"inf",
          b"-inf", b"+inf", b"-0", b"0.25", b"1e2", b"0x10", b"7"]
BAD_SCORES = [b"nan", b"abc", b"", b" 1", b"1 ", b"1e999", b"1e-400", b"(1", b"1\x00"]
SCORE_BOUNDS = [b"-inf", b"+inf", b"inf", b"0", b"1", b"2", b"(1", b"(2", b"-1", b"(-1",
                b"1.5", b"(1.5", b"3", b"(3", b"10", b"(inf", b"(-inf", b"", b"(", b" 1",
                b"1e999", b"0x2", b"-0"]
BAD_BOUNDS = [b"x", b"1 ", b"nan", b"(nan", b"((1", b"1x"]
LEX_BOUNDS = [b"-", b"+", b"[a", b"(a", b"[b", b"(b", b"[c", b"(c", b"[d", b"(e", b"[f",
              b"[", b"(", b"[m1", b"(m1", b"[\xff", b"[B"]
BAD_LEX = [b"a", b"", b"--", b"++", b"x"]
WEIGHTS = [b"1", b"2", b"0", b"-1", b"0.5", b"inf", b"-inf", b"3"]
BIG_KEYS = [b"zbig0", b"zbig1", b"zbig2"]
LEX_KEY = b"zbiglex"
LONG_MEMBER = b"L" * 65
# Blocking pops' timeouts: 1 ms (rounded up from 0.0001 too) or invalid; and keys only
# sorted-set commands write, so that most of their replies are pops or null arrays.
TIMEOUTS = [b"0.001", b"0.0001", b"0.002"]
BAD_TIMEOUTS = [b"-1", b"x", b"nan", b"inf", b"1e100", b"-0.5", b""]
QUEUE_KEYS = [b"zq0", b"zq1", b"{zq}2"]


def member(gen):
    return gen.r.choice(MEMBERS)


def score(gen, bad=0.03):
    r = gen.r
    if r.random() < bad:
        return r.choice(BAD_SCORES)
    return r.choice(SCORES)


def score_bound(gen):
    r = gen.r
    return r.choice(BAD_BOUNDS) if r.random() < 0.03 else r.choice(SCORE_BOUNDS)


def lex_bound(gen):
    r = gen.r
    return r.choice(BAD_LEX) if r.random() < 0.03 else r.choice(LEX_BOUNDS)


def rank_arg(gen):
    r = gen.r
    if r.random() < 0.1:
        return gen.range_arg()
    return str(r.randint(-8, 8)).encode()


def zkey(gen):
    """Mostly the shared small keys; sometimes a large one (never for BYLEX)."""
    return gen.r.choice(BIG_KEYS) if gen.r.random() < 0.15 else gen.key()


def limit_opts(gen):
    r = gen.r
    x = r.random()
    if x < 0.6:
        return []
    if x < 0.95:
        return [gen.name("LIMIT"), str(r.randint(-1, 4)).encode(), str(r.randint(-2, 5)).encode()]
    return [gen.name("LIMIT"), r.choice([b"x", b"1"])]


def op(args, compare=None):
    from test_differential import Op
    return Op(args, compare=compare)


def g_zadd(gen):
    r = gen.r
    opts = [gen.name(o) for o in r.sample(["NX", "XX", "GT", "LT", "CH", "INCR"],
                                          r.choice([0, 0, 0, 1, 1, 2, 3]))]
    pairs = []
    for _ in range(r.choice([1, 1, 1, 2, 3, 4])):
        pairs += [score(gen), member(gen)]
    if r.random() < 0.03:
        pairs.pop()
    if r.random() < 0.01:
        pairs = [b"1", LONG_MEMBER]  # turns the key into a skiplist (see the docstring)
        return op([gen.name("ZADD"), r.choice(BIG_KEYS)] + opts + pairs)
    return op([gen.name("ZADD"), zkey(gen)] + opts + pairs)


def g_zadd_big(gen):
    """Fills a large (skiplist) set: 130 members, scores a few distinct values."""
    r = gen.r
    key = r.choice(BIG_KEYS)
    spread = r.choice([1, 3, 50])
    args = [b"ZADD", key]
    for i in range(130):
        args += [str(r.randrange(spread) - 1).encode(), b"m%d" % r.randrange(400)]
    if r.random() < 0.2:
        args += [b"-0", b"negzero"]
    return op(args)


def g_lexkey(gen):
    """The large set for BYLEX: equal scores only."""
    r = gen.r
    x = r.random()
    if x < 0.3:
        args = [b"ZADD", LEX_KEY]
        for _ in range(r.choice([3, 140])):
            args += [b"0", b"m%d" % r.randrange(300)]
        return op(args)
    if x < 0.4:
        return op([b"ZREM", LEX_KEY] + [b"m%d" % r.randrange(300) for _ in range(5)])
    if x < 0.5:
        return op([b"ZREMRANGEBYLEX", LEX_KEY, b"[m%d" % r.randrange(300),
                   b"(m%d" % r.randrange(300)])
    if x < 0.6:
        return op([b"ZLEXCOUNT", LEX_KEY, r.choice([b"-", b"[m1", b"(m2"]),
                   r.choice([b"+", b"[m5", b"(m3"])])
    lo = r.choice([b"-", b"+", b"[m1", b"(m12", b"[m2", b"(m", b"[m"])
    hi = r.choice([b"+", b"-", b"[m3", b"(m25", b"[m9", b"(m2"])
    cmd = r.choice([b"ZRANGEBYLEX", b"ZREVRANGEBYLEX"])
    if cmd == b"ZREVRANGEBYLEX":
        lo, hi = hi, lo
    return op([cmd, LEX_KEY, lo, hi] + limit_opts(gen))


def g_zincrby(gen):
    r = gen.r
    args = [gen.name("ZINCRBY"), zkey(gen), score(gen, 0.05), member(gen)]
    if r.random() < 0.03:
        args[2] = gen.name(r.choice(["NX", "INCR", "XX"]))
    return op(args)


def g_zrem(gen):
    return op([gen.name("ZREM"), zkey(gen)] + [member(gen) for _ in range(gen.r.randint(1, 3))])


def g_read1(gen):
    r = gen.r
    cmd = r.choice(["ZCARD", "ZSCORE", "ZRANK", "ZREVRANK", "ZMSCORE"])
    key = zkey(gen)
    if cmd == "ZCARD":
        return op([gen.name(cmd), key])
    if cmd == "ZMSCORE":
        return op([gen.name(cmd), key] + [member(gen) for _ in range(r.randint(1, 3))])
    m = member(gen) if key not in BIG_KEYS or r.random() < 0.3 else b"m%d" % r.randrange(400)
    return op([gen.name(cmd), key, m])


def g_zcount(gen):
    return op([gen.name("ZCOUNT"), zkey(gen), score_bound(gen), score_bound(gen)])


def g_zlexcount(gen):
    return op([gen.name("ZLEXCOUNT"), gen.key(), lex_bound(gen), lex_bound(gen)])


def g_zrange(gen):
    """ZRANGE with its options, and its old forms."""
    r = gen.r
    kind = r.choice(["rank", "rank", "score", "lex"])
    key = zkey(gen) if kind != "lex" else gen.key()
    if kind == "rank":
        lo, hi = rank_arg(gen), rank_arg(gen)
    elif kind == "score":
        lo, hi = score_bound(gen), score_bound(gen)
    else:
        lo, hi = lex_bound(gen), lex_bound(gen)
    x = r.random()
    if x < 0.5:
        opts = []
        if kind == "score":
            opts.append(gen.name("BYSCORE"))
        elif kind == "lex":
            opts.append(gen.name("BYLEX"))
        if r.random() < 0.4:
            opts.append(gen.name("REV"))
        if r.random() < 0.5 and kind != "lex":
            opts.append(gen.name("WITHSCORES"))
        if kind != "rank" or r.random() < 0.05:
            opts += limit_opts(gen)
        if r.random() < 0.05:
            opts.append(gen.name(r.choice(["WITHSCORES", "REV", "BYSCORE", "BYLEX", "FOO"])))
        r.shuffle(opts)
        return op([gen.name("ZRANGE"), key, lo, hi] + opts)
    rev = r.random() < 0.5
    name = {"rank": "ZREVRANGE" if rev else "ZRANGE",
            "score": "ZREVRANGEBYSCORE" if rev else "ZRANGEBYSCORE",
            "lex": "ZREVRANGEBYLEX" if rev else "ZRANGEBYLEX"}[kind]
    opts = []
    if kind != "lex" and r.random() < 0.5:
        opts.append(gen.name("WITHSCORES"))
    if kind != "rank":
        opts += limit_opts(gen)
    if r.random() < 0.04:
        opts.append(gen.name(r.choice(["REV", "BYSCORE", "LIMIT", "WITHSCORES"])))
    return op([gen.name(name), key, lo, hi] + opts)


def g_zrangestore(gen):
    r = gen.r
    kind = r.choice(["rank", "score", "lex"])
    src = zkey(gen) if kind != "lex" else gen.key()
    dst = gen.key() if src not in BIG_KEYS else r.choice(BIG_KEYS)
    if kind == "rank":
        lo, hi, opts = rank_arg(gen), rank_arg(gen), []
    elif kind == "score":
        lo, hi, opts = score_bound(gen), score_bound(gen), [gen.name("BYSCORE")]
    else:
        lo, hi, opts = lex_bound(gen), lex_bound(gen), [gen.name("BYLEX")]
    if r.random() < 0.3:
        opts.append(gen.name("REV"))
    if kind != "rank":
        opts += limit_opts(gen)
    if r.random() < 0.05:
        opts.append(gen.name("WITHSCORES"))
    return op([gen.name("ZRANGESTORE"), dst, src, lo, hi] + opts)


def g_zremrange(gen):
    r = gen.r
    kind = r.choice(["RANK", "SCORE", "LEX"])
    if kind == "RANK":
        return op([gen.name("ZREMRANGEBYRANK"), zkey(gen), rank_arg(gen), rank_arg(gen)])
    if kind == "SCORE":
        return op([gen.name("ZREMRANGEBYSCORE"), zkey(gen), score_bound(gen), score_bound(gen)])
    return op([gen.name("ZREMRANGEBYLEX"), gen.key(), lex_bound(gen), lex_bound(gen)])


def g_zpop(gen):
    r = gen.r
    args = [gen.name(r.choice(["ZPOPMIN", "ZPOPMAX"])), zkey(gen)]
    x = r.random()
    if x < 0.6:
        args.append(r.choice([b"0", b"1", b"2", b"3", b"10", b"-1", b"abc", b""]))
    if x < 0.03:
        args.append(b"1")
    return op(args)


def g_zmpop(gen):
    r = gen.r
    keys = [zkey(gen) for _ in range(r.randint(1, 3))]
    n = str(len(keys)).encode()
    if r.random() < 0.05:
        n = r.choice([b"0", b"-1", b"abc", b"5", b"4"])
    args = [gen.name("ZMPOP"), n] + keys
    if r.random() < 0.97:
        args.append(gen.name(r.choice(["MIN", "MAX", "MIN", "MAX", "MID"])))
    if r.random() < 0.5:
        args += [gen.name("COUNT"), r.choice([b"1", b"2", b"5", b"0", b"-1", b"x"])]
    if r.random() < 0.03:
        args += [gen.name("COUNT"), b"1"]
    return op(args)


def timeout(gen):
    """Never 0, which would wait for ever on an empty key."""
    r = gen.r
    return r.choice(BAD_TIMEOUTS) if r.random() < 0.1 else r.choice(TIMEOUTS)


def qkey(gen):
    return gen.r.choice(QUEUE_KEYS) if gen.r.random() < 0.7 else zkey(gen)


def g_zadd_queue(gen):
    """Feeds the blocking pops' keys."""
    r = gen.r
    args = [b"ZADD", r.choice(QUEUE_KEYS)]
    for _ in range(r.choice([1, 1, 2, 3])):
        args += [score(gen, 0), member(gen)]
    return op(args)


def g_bzpop(gen):
    """BZPOPMIN and BZPOPMAX with timeouts that expire at once or are invalid: a pop, a
    null array or an error."""
    r = gen.r
    keys = [qkey(gen) for _ in range(r.choice([1, 1, 2, 3]))]
    return op([gen.name(r.choice(["BZPOPMIN", "BZPOPMAX"]))] + keys + [timeout(gen)])


def g_bzmpop(gen):
    r = gen.r
    keys = [qkey(gen) for _ in range(r.choice([1, 1, 2, 3]))]
    n = str(len(keys)).encode() if r.random() < 0.95 else r.choice([b"0", b"-1", b"5"])
    args = [gen.name("BZMPOP"), timeout(gen), n] + keys
    if r.random() < 0.97:
        args.append(gen.name(r.choice(["MIN", "MAX", "MIN", "MAX", "MID"])))
    if r.random() < 0.5:
        args += [gen.name("COUNT"), r.choice([b"1", b"2", b"5", b"0", b"-1", b"x"])]
    return op(args)


def g_setop(gen):
    r = gen.r
    cmd = r.choice(["ZUNION", "ZINTER", "ZDIFF", "ZUNIONSTORE", "ZINTERSTORE", "ZDIFFSTORE",
                    "ZINTERCARD"])
    big = r.random() < 0.1
    pick = (lambda: r.choice(BIG_KEYS)) if big else gen.key
    keys = [pick() for _ in range(r.randint(1, 3))]
    n = str(len(keys)).encode()
    if r.random() < 0.04:
        n = r.choice([b"0", b"-1", b"abc", b"9", b""])
    args = [gen.name(cmd)]
    if cmd.endswith("STORE"):
        args.append(pick())
    args += [n] + keys
    opts = []
    if cmd not in ("ZDIFF", "ZDIFFSTORE", "ZINTERCARD"):
        if r.random() < 0.4:
            opts.append([gen.name("WEIGHTS")] + [r.choice(WEIGHTS) for _ in keys])
            if r.random() < 0.05:
                opts[-1][-1] = r.choice([b"x", b"nan"])
        if r.random() < 0.4:
            opts.append([gen.name("AGGREGATE"), gen.name(r.choice(["SUM", "MIN", "MAX", "AVG"]))])
    if not cmd.endswith("STORE") and cmd != "ZINTERCARD" and r.random() < 0.5:
        opts.append([gen.name("WITHSCORES")])
    if cmd == "ZINTERCARD" and r.random() < 0.5:
        opts.append([gen.name("LIMIT"), r.choice([b"0", b"1", b"2", b"-1", b"x"])])
    if r.random() < 0.04:
        opts.append([r.choice([gen.name("WEIGHTS"), gen.name("LIMIT"), b"FOO"])])
    r.shuffle(opts)
    return op(args + [a for o in opts for a in o])


def _pairs(rep, withscores, resp3):
    """A ZRANDMEMBER reply as a list of (member, score or None)."""
    if not withscores:
        return [(m, None) for m in rep]
    if resp3 or (rep and isinstance(rep[0], list)):
        return [tuple(p) for p in rep]
    return list(zip(rep[0::2], rep[1::2]))


def _randmember_compare(count, withscores):
    def compare(a, b):
        if count is None:
            if isinstance(a, bytes) and isinstance(b, bytes):
                return True
            return a == b
        if not (isinstance(a, list) and isinstance(b, list)):
            return a == b
        if len(a) != len(b):
            return False
        pa, pb = _pairs(a, withscores, False), _pairs(b, withscores, False)
        sa, sb = dict(pa), dict(pb)
        if any(sa[m] != sb[m] for m in sa.keys() & sb.keys()):
            return False
        if count > 0:
            if len(sa) != len(pa) or len(sb) != len(pb):
                return False
            if len(pa) < count:  # the whole set
                return sorted(pa, key=repr) == sorted(pb, key=repr)
        return True
    return compare


def g_zrandmember(gen):
    r = gen.r
    key = zkey(gen)
    x = r.random()
    if x < 0.2:
        return op([gen.name("ZRANDMEMBER"), key], compare=_randmember_compare(None, False))
    c = r.choice([b"0", b"1", b"2", b"3", b"-1", b"-3", b"5", b"20", b"-20", b"200",
                  b"abc", b"-9223372036854775808", b"9223372036854775807",
                  b"4611686018427387904"])
    args = [gen.name("ZRANDMEMBER"), key, c]
    ws = r.random() < 0.5
    if ws:
        args.append(gen.name("WITHSCORES") if r.random() < 0.95 else b"WITHSCORE")
    try:
        count = int(c)
    except ValueError:
        count = 0
    return op(args, compare=_randmember_compare(count, ws))


def _multiset_scan(a, b):
    if not (isinstance(a, list) and isinstance(b, list) and len(a) == 2 == len(b)):
        return a == b
    if a[0] != b"0" or b[0] != b"0":
        return False
    pa = sorted(zip(a[1][0::2], a[1][1::2]))
    pb = sorted(zip(b[1][0::2], b[1][1::2]))
    return pa == pb


def g_zscan(gen):
    r = gen.r
    key = zkey(gen)
    if key in BIG_KEYS:
        args = [gen.name("ZSCAN"), key, b"0", gen.name("COUNT"), b"1000"]
        if r.random() < 0.3:
            args += [gen.name("MATCH"), r.choice([b"m1*", b"*5", b"neg*"])]
        return op(args, compare=_multiset_scan)
    args = [gen.name("ZSCAN"), key, r.choice([b"0", b"0", b"0", b"x", b"-1", b""])]
    for _ in range(r.choice([0, 0, 1, 2])):
        o = r.choice(["COUNT", "MATCH", "FOO"])
        args.append(gen.name(o))
        if r.random() < 0.95:
            args.append(r.choice([b"1", b"10", b"0", b"-1", b"x"]) if o == "COUNT"
                        else r.choice([b"*", b"a*", b"?", b"[a-c]", b"m1*"]))
    return op(args)


def g_misc(gen):
    """OBJECT ENCODING (listpack or skiplist), TYPE, EXISTS and DEL of sorted sets."""
    r = gen.r
    key = r.choice(BIG_KEYS + [LEX_KEY, gen.key()])
    cmd = r.choice(["OBJECT", "OBJECT", "TYPE", "EXISTS", "DEL"])
    if cmd == "OBJECT":
        # Only keys that never hold strings: a string's encoding depends on how it was made.
        return op([gen.name("OBJECT"), gen.name("ENCODING"), r.choice(BIG_KEYS + [LEX_KEY])])
    return op([gen.name(cmd), key])


GENERATORS = {
    "ZADD": (6, g_zadd),
    "ZADDBIG": (0.4, g_zadd_big),
    "ZLEXKEY": (1, g_lexkey),
    "ZINCRBY": (2, g_zincrby),
    "ZREM": (2, g_zrem),
    "ZREAD": (3, g_read1),
    "ZCOUNT": (1, g_zcount),
    "ZLEXCOUNT": (1, g_zlexcount),
    "ZRANGE": (5, g_zrange),
    "ZRANGESTORE": (1, g_zrangestore),
    "ZREMRANGE": (1.5, g_zremrange),
    "ZPOP": (1.5, g_zpop),
    "ZMPOP": (1, g_zmpop),
    "ZADDQUEUE": (1, g_zadd_queue),
    "BZPOP": (1.2, g_bzpop),
    "BZMPOP": (0.8, g_bzmpop),
    "ZSETOP": (3, g_setop),
    "ZRANDMEMBER": (1, g_zrandmember),
    "ZSCAN": (1, g_zscan),
    "ZMISC": (1, g_misc),
}

assert math.isfinite(sum(w for w, _ in GENERATORS.values()))
