"""Differential generators for the stream commands: XADD (explicit and `ms-*` IDs, NOMKSTREAM,
MAXLEN/MINID with `=`/`~` and LIMIT), XRANGE, XREVRANGE, XLEN, XDEL, XTRIM, XSETID, XREAD,
XGROUP, XREADGROUP, XACK, XPENDING, XCLAIM, XAUTOCLAIM and XINFO, over a few stream keys.
Loaded by test_streams.py.

IDs are explicit (or `ms-*` with an explicit time), never `*`, so both servers generate the
same ones. Times that depend on the clock (idle times, seen and delivery times) are zeroed
before comparing ([`normalized`]), and so is XINFO's `radix-tree-nodes` (the radix tree's
inner nodes do not exist in Strata). Minimum idle times are 0 or an hour, never close to the
time a test takes.
"""


def Op(args, compare=None):
    from test_differential import Op as op
    return op(args, compare=compare)


STREAM_KEYS = [b"s0", b"s1", b"s2"]
GROUPS = [b"g1", b"g2", b"nogroup"]
CONSUMERS = [b"alice", b"bob", b"carol"]
FIELDS = [b"f", b"name", b"", b"x y"]
HOUR = b"3600000"

# Keys in replies whose values depend on the clock or on Redis's radix tree.
CLOCK_KEYS = {b"idle", b"seen-time", b"radix-tree-nodes"}


def normalized(v, parent=None):
    """`v` with clock-dependent numbers zeroed: after a CLOCK_KEYS name, the idle time of
    XPENDING rows, the delivery times of XINFO STREAM FULL's pending lists."""
    if isinstance(v, tuple) and len(v) == 2 and v[0] == "%":
        out = []
        for k, x in v[1]:
            out.append((k, 0 if k in CLOCK_KEYS and isinstance(x, int)
                        else normalized(x, k)))
        return ("%", out)
    if isinstance(v, list):
        out = []
        zero_next = False
        for x in v:
            if zero_next and isinstance(x, int):
                out.append(0)
            else:
                out.append(normalized(x, parent))
            zero_next = isinstance(x, bytes) and x in CLOCK_KEYS
        if parent == b"pending" or parent == b"xpending":
            out = [zero_times(row) for row in out]
        else:
            # XINFO in RESP2: the lists after a "pending" name hold rows.
            for i in range(1, len(out)):
                if out[i - 1] == b"pending" and isinstance(out[i], list):
                    out[i] = [zero_times(row) for row in out[i]]
        return out
    return v


def zero_times(row):
    # [id, consumer, time, count] (group pending, XPENDING) or [id, time, count] (consumer).
    if isinstance(row, list) and len(row) == 4 and isinstance(row[2], int):
        return row[:2] + [0, row[3]]
    if isinstance(row, list) and len(row) == 3 and isinstance(row[1], int):
        return [row[0], 0, row[2]]
    return row


def same_normalized(a, b):
    return normalized(a) == normalized(b)


def xpending_rows(a, b):
    return normalized(a, b"xpending") == normalized(b, b"xpending")


class Ids:
    """The stream IDs a sequence uses: times up to the highest one added yet, so that
    deletes, acknowledgements and claims find entries, and `ms-*` and collisions happen."""

    def __init__(self, r, gen):
        self.r = r
        self.gen = gen

    def top(self):
        return max(self.gen.clock.values(), default=1) + 2

    def id(self):
        r = self.r
        x = r.random()
        if x < 0.7:
            return b"%d-%d" % (r.randint(0, self.top()), r.randint(0, 3))
        if x < 0.8:
            return b"%d" % r.randint(0, self.top())
        return r.choice([b"0-0", b"0", b"-", b"+", b"(5-0", b"(0-0", b"abc", b"1-",
                         b"18446744073709551615-18446744073709551615", b"-1", b"5-x",
                         b"(18446744073709551615-18446744073709551615"])


def key(gen):
    return gen.r.choice(STREAM_KEYS)


def pairs(gen):
    r = gen.r
    n = r.choice([1, 1, 1, 2, 3]) if r.random() < 0.97 else 0
    out = []
    for _ in range(n):
        out += [r.choice(FIELDS), b"v%d" % r.randint(0, 99)]
    if r.random() < 0.02:
        out.append(b"odd")
    return out


def trim_args(gen, xadd):
    r = gen.r
    out = []
    if r.random() < 0.5 or not xadd:
        kind = r.choice([b"MAXLEN", b"MINID", b"maxlen"])
        out.append(kind)
        mod = r.choice([b"", b"", b"=", b"~"])
        if mod:
            out.append(mod)
        if kind.upper() == b"MAXLEN":
            out.append(r.choice([b"0", b"1", b"2", b"3", b"5", b"10", b"-1", b"x"]))
        else:
            out.append(b"%d-%d" % (r.randint(0, 60), r.randint(0, 3)) if r.random() < 0.9
                       else r.choice([b"-", b"abc"]))
        if r.random() < 0.15:
            out += [b"LIMIT", r.choice([b"0", b"1", b"3", b"100", b"-1"])]
    if r.random() < 0.03 and not xadd:
        out = [b"LIMIT", b"5"]
    return out


def xadd(gen):
    r = gen.r
    args = [b"XADD", key(gen)]
    if r.random() < 0.05:
        args.append(b"NOMKSTREAM")
    args += trim_args(gen, True)
    ids = gen.stream_ids
    k = args[1]
    x = r.random()
    # Mostly above the last one used on this key, so that adds succeed.
    if x < 0.55:
        gen.clock[k] = gen.clock.get(k, 0) + r.choice([0, 1, 1, 1, 2])
        new = b"%d-%d" % (gen.clock[k], r.randint(0, 3))
    elif x < 0.85:
        gen.clock[k] = gen.clock.get(k, 0) + r.choice([0, 1, 1, 2])
        new = b"%d-*" % gen.clock[k]
    else:
        new = ids.id()
    return Op(args + [new] + pairs(gen))


def xrange(gen):
    r = gen.r
    name = r.choice([b"XRANGE", b"XREVRANGE"])
    args = [name, key(gen), gen.stream_ids.id() if r.random() < 0.4 else b"-",
            gen.stream_ids.id() if r.random() < 0.4 else b"+"]
    if r.random() < 0.4:
        args += [b"COUNT", r.choice([b"0", b"1", b"2", b"5", b"-1", b"x"])]
    if r.random() < 0.02:
        args.append(b"junk")
    return Op(args)


def xdel(gen):
    n = gen.r.choice([1, 1, 2, 3])
    return Op([b"XDEL", key(gen)] + [gen.stream_ids.id() for _ in range(n)])


def xtrim(gen):
    return Op([b"XTRIM", key(gen)] + trim_args(gen, False))


def xsetid(gen):
    r = gen.r
    top = gen.stream_ids.top()
    k = key(gen)
    args = [b"XSETID", k, b"%d-%d" % (r.randint(0, gen.clock.get(k, 0) + 1), r.randint(0, 3))]
    if r.random() < 0.3:
        args += [b"ENTRIESADDED", r.choice([b"0", b"5", b"100", b"-1"])]
    if r.random() < 0.3:
        args += [b"MAXDELETEDID", b"%d-0" % r.randint(0, top)]
    return Op(args)


def xgroup(gen):
    r = gen.r
    sub = r.choice([b"CREATE", b"CREATE", b"CREATE", b"SETID", b"DESTROY", b"CREATECONSUMER",
                    b"DELCONSUMER", b"create", b"HELP"] + [b"CREATE"] * 3)
    if sub == b"HELP":
        return Op([b"XGROUP", b"HELP"])
    args = [b"XGROUP", sub, key(gen), r.choice(GROUPS[:2])]
    up = sub.upper()
    if up in (b"CREATE", b"SETID"):
        args.append(r.choice([b"$", b"0", b"0", b"0-0", gen.stream_ids.id(), b"bad"]))
        if up == b"CREATE" and r.random() < 0.8:
            args.append(b"MKSTREAM")
        if r.random() < 0.25:
            args += [b"ENTRIESREAD", r.choice([b"0", b"2", b"-1", b"-5", b"x"])]
    elif up in (b"CREATECONSUMER", b"DELCONSUMER"):
        args.append(r.choice(CONSUMERS))
    return Op(args)


def xreadgroup(gen):
    r = gen.r
    args = [b"XREADGROUP", b"GROUP", r.choice(GROUPS[:2] * 8 + GROUPS[2:]), r.choice(CONSUMERS)]
    if r.random() < 0.5:
        args += [b"COUNT", r.choice([b"1", b"2", b"5", b"0"])]
    if r.random() < 0.2:
        args.append(b"NOACK")
    n = r.choice([1, 1, 2])
    keys = [key(gen) for _ in range(n)]
    ids = [r.choice([b">", b">", b">", b"0", b"0-0", gen.stream_ids.id(), b"$"])
           for _ in range(n)]
    return Op(args + [b"STREAMS"] + keys + ids)


def xread(gen):
    r = gen.r
    args = [b"XREAD"]
    if r.random() < 0.5:
        args += [b"COUNT", r.choice([b"1", b"2", b"0", b"-3"])]
    n = r.choice([1, 1, 2])
    keys = [key(gen) for _ in range(n)]
    ids = [r.choice([b"0", b"$", gen.stream_ids.id(), b"0-0", b">"]) for _ in range(n)]
    return Op(args + [b"STREAMS"] + keys + ids)


def xack(gen):
    n = gen.r.choice([1, 2, 3])
    return Op([b"XACK", key(gen), gen.r.choice(GROUPS[:2] * 8 + GROUPS[2:])] +
              [gen.stream_ids.id() for _ in range(n)])


def xpending(gen):
    r = gen.r
    args = [b"XPENDING", key(gen), r.choice(GROUPS[:2] * 8 + GROUPS[2:])]
    if r.random() < 0.4:
        return Op(args)
    if r.random() < 0.3:
        args += [b"IDLE", r.choice([b"0", HOUR])]
    args += [r.choice([b"-", gen.stream_ids.id()]), r.choice([b"+", gen.stream_ids.id()]),
             r.choice([b"10", b"1", b"0", b"-1"])]
    if r.random() < 0.4:
        args.append(r.choice(CONSUMERS))
    return Op(args, compare=xpending_rows)


def xclaim(gen):
    r = gen.r
    args = [b"XCLAIM", key(gen), r.choice(GROUPS[:2] * 8 + GROUPS[2:]), r.choice(CONSUMERS),
            r.choice([b"0", HOUR])]
    top = gen.stream_ids.top()
    args += [b"%d-%d" % (r.randint(0, top), r.randint(0, 3)) for _ in range(r.choice([1, 2, 3]))]
    for opt in (b"FORCE", b"JUSTID"):
        if r.random() < 0.2:
            args.append(opt)
    if r.random() < 0.2:
        args += [b"RETRYCOUNT", r.choice([b"0", b"7"])]
    if r.random() < 0.2:
        args += [b"IDLE", r.choice([b"0", b"7200000"])]
    if r.random() < 0.1:
        args += [b"LASTID", b"%d-0" % r.randint(0, 60)]
    if r.random() < 0.02:
        args.append(b"BOGUS")
    return Op(args)


def xautoclaim(gen):
    r = gen.r
    args = [b"XAUTOCLAIM", key(gen), r.choice(GROUPS[:2] * 8 + GROUPS[2:]), r.choice(CONSUMERS),
            r.choice([b"0", HOUR]), r.choice([b"0", b"0-0", b"-", gen.stream_ids.id()])]
    if r.random() < 0.5:
        args += [b"COUNT", r.choice([b"1", b"2", b"10", b"0"])]
    if r.random() < 0.2:
        args.append(b"JUSTID")
    return Op(args)


def xinfo(gen):
    r = gen.r
    sub = r.choice([b"STREAM", b"STREAM", b"GROUPS", b"CONSUMERS", b"HELP"])
    if sub == b"HELP":
        return Op([b"XINFO", b"HELP"])
    args = [b"XINFO", sub, key(gen)]
    if sub == b"CONSUMERS":
        args.append(r.choice(GROUPS[:2] * 4 + GROUPS[2:]))
    elif sub == b"STREAM" and r.random() < 0.5:
        args.append(b"FULL")
        if r.random() < 0.5:
            args += [b"COUNT", r.choice([b"0", b"1", b"3"])]
    return Op(args, compare=same_normalized)


def xlen(gen):
    return Op([b"XLEN", key(gen)])


def with_state(fn):
    """`fn` for any generator: test_differential.py's `Gen` draws these too, and lacks the
    per-key clocks and ID source `StreamGen` (test_streams.py) starts with."""
    def draw(gen):
        if not hasattr(gen, "stream_ids"):
            gen.clock = {}
            gen.stream_ids = Ids(gen.r, gen)
        return fn(gen)
    return draw


GENERATORS = {
    "xadd": (30, xadd),
    "xrange": (10, xrange),
    "xlen": (3, xlen),
    "xdel": (5, xdel),
    "xtrim": (4, xtrim),
    "xsetid": (2, xsetid),
    "xgroup": (6, xgroup),
    "xreadgroup": (12, xreadgroup),
    "xread": (5, xread),
    "xack": (6, xack),
    "xpending": (6, xpending),
    "xclaim": (5, xclaim),
    "xautoclaim": (5, xautoclaim),
    "xinfo": (6, xinfo),
}
GENERATORS = {name: (weight, with_state(fn)) for name, (weight, fn) in GENERATORS.items()}
