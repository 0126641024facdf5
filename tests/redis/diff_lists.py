"""List commands for the differential test (`test_differential.py` loads this module).

Elements come mostly from a small alphabet, so that LREM, LPOS and LINSERT find matches;
indexes and counts from boundary integers and bad numbers. The blocking commands are
generated with timeouts that expire at once (1 ms) or that are invalid, or against data
that is present: a run never waits for a push (blocking with a push from another client
is tested in `test_lists.py`).
"""

import sys

ELEMS = [b"a", b"b", b"c", b"a", b"", b"\x00\xff"]
INDEXES = [b"0", b"1", b"-1", b"2", b"-2", b"5", b"-5", b"100", b"-100",
           b"9223372036854775807", b"-9223372036854775808", b"x", b"", b"1.5"]
TIMEOUTS = [b"0.001", b"0.001", b"0.001", b"0.0001", b"-1", b"x", b"nan", b"inf", b"1e100",
            b"-0.5", b""]


# Keys mostly written by list commands, so that most replies come from real lists; the
# shared key space (key(gen)) brings strings, hence WRONGTYPE, and RENAME/DEL/EXPIRE.
LIST_KEYS = [b"l0", b"l1", b"l2", b"{t}a", b"{t}b"]


def key(gen):
    return gen.r.choice(LIST_KEYS) if gen.r.random() < 0.75 else gen.key()


def _op(gen, args):
    op = sys.modules[type(gen).__module__].Op
    return op(args)


def elem(gen):
    return gen.r.choice(ELEMS) if gen.r.random() < 0.8 else gen.value()


def elems(gen):
    return [elem(gen) for _ in range(gen.r.choice([1, 1, 2, 3, 5]))]


def index(gen):
    r = gen.r
    if r.random() < 0.2:
        return r.choice([b"0", b"-1"])
    return r.choice(INDEXES) if r.random() < 0.5 else str(r.randint(-8, 8)).encode()


def where(gen):
    return gen.name(gen.r.choice(["LEFT", "RIGHT", "LEFT", "RIGHT", "MIDDLE"]))


def push(name):
    return lambda gen: _op(gen, [gen.name(name), key(gen)] + elems(gen))


def pop(name):
    def fn(gen):
        args = [gen.name(name), key(gen)]
        if gen.r.random() < 0.5:
            args.append(gen.r.choice([b"0", b"1", b"2", b"10", b"-1", b"x", b""]))
        return _op(gen, args)
    return fn


def lpos(gen):
    r = gen.r
    args = [gen.name("LPOS"), key(gen), elem(gen)]
    for _ in range(r.choice([0, 0, 1, 1, 2, 3])):
        opt = r.choice(["RANK", "COUNT", "MAXLEN", "FOO"])
        args.append(gen.name(opt))
        if opt != "FOO" and r.random() > 0.05:
            args.append(index(gen))
    return _op(gen, args)


def mpop_tail(gen):
    r = gen.r
    n = r.choice([1, 1, 2, 3])
    numkeys = str(n).encode() if r.random() < 0.9 else r.choice([b"0", b"-1", b"x", b"9"])
    args = [numkeys] + [key(gen) for _ in range(n)] + [where(gen)]
    if r.random() < 0.4:
        args += [gen.name("COUNT"), r.choice([b"1", b"2", b"10", b"0", b"-1", b"x"])]
    if r.random() < 0.05:
        args.append(gen.name("COUNT"))
    return args


def bpop(name):
    def fn(gen):
        keys = [key(gen) for _ in range(gen.r.choice([1, 1, 2, 3]))]
        return _op(gen, [gen.name(name)] + keys + [gen.r.choice(TIMEOUTS)])
    return fn


GENERATORS = {
    "LPUSH": (7, push("LPUSH")),
    "RPUSH": (7, push("RPUSH")),
    "LPUSHX": (1.5, push("LPUSHX")),
    "RPUSHX": (1.5, push("RPUSHX")),
    "LPOP": (3, pop("LPOP")),
    "RPOP": (3, pop("RPOP")),
    "LLEN": (2, lambda gen: _op(gen, [gen.name("LLEN"), key(gen)])),
    "LRANGE": (4, lambda gen: _op(gen, [gen.name("LRANGE"), key(gen), index(gen),
                                         index(gen)])),
    "LINDEX": (2, lambda gen: _op(gen, [gen.name("LINDEX"), key(gen), index(gen)])),
    "LSET": (2, lambda gen: _op(gen, [gen.name("LSET"), key(gen), index(gen), elem(gen)])),
    "LINSERT": (2, lambda gen: _op(gen, [
        gen.name("LINSERT"), key(gen),
        gen.name(gen.r.choice(["BEFORE", "AFTER", "BEFORE", "AFTER", "AROUND"])),
        elem(gen), elem(gen)])),
    "LREM": (2, lambda gen: _op(gen, [gen.name("LREM"), key(gen), index(gen), elem(gen)])),
    "LTRIM": (1.5, lambda gen: _op(gen, [gen.name("LTRIM"), key(gen), index(gen),
                                          index(gen)])),
    "LPOS": (2, lpos),
    "LMOVE": (2, lambda gen: _op(gen, [gen.name("LMOVE"), key(gen), key(gen), where(gen),
                                        where(gen)])),
    "RPOPLPUSH": (1, lambda gen: _op(gen, [gen.name("RPOPLPUSH"), key(gen), key(gen)])),
    "LMPOP": (1.5, lambda gen: _op(gen, [gen.name("LMPOP")] + mpop_tail(gen))),
    "BLPOP": (1, bpop("BLPOP")),
    "BRPOP": (1, bpop("BRPOP")),
    "BLMOVE": (1, lambda gen: _op(gen, [gen.name("BLMOVE"), key(gen), key(gen), where(gen),
                                         where(gen), gen.r.choice(TIMEOUTS)])),
    "BRPOPLPUSH": (0.5, lambda gen: _op(gen, [gen.name("BRPOPLPUSH"), key(gen), key(gen),
                                               gen.r.choice(TIMEOUTS)])),
    "BLMPOP": (1, lambda gen: _op(gen, [gen.name("BLMPOP"), gen.r.choice(TIMEOUTS)]
                                  + mpop_tail(gen))),
}
