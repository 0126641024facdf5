"""Differential generators for the HyperLogLog commands (PFADD, PFCOUNT, PFMERGE, PFDEBUG)
and BITOP, BITFIELD, BITFIELD_RO. Loaded by test_differential.py (over its shared key
space, so they meet every other type) and by test_hll_bits.py (over keys of their own,
with GETs of the raw bytes after every write).

PFSELFTEST is left out of the random sequences (it takes seconds on redis-server);
test_hll_bits.py runs it once. PFDEBUG GETREG is rare: its reply has 16384 elements.
"""


def Op(args):
    # Imported late: test_differential imports this module while it loads.
    from test_differential import Op as op
    return op(args)


ELEMENT_POOLS = [
    [b"a", b"b", b"c", b"", b"\x00\xff", b"hello", b"a b"],
    [b"e%d" % i for i in range(200)],
    [b"x%d" % i for i in range(5000)],
]
FIELD_TYPES = [b"i1", b"i5", b"i8", b"I16", b"i32", b"i63", b"i64", b"u1", b"u7", b"U8",
               b"u16", b"u32", b"u63", b"u64", b"i0", b"i65", b"x8", b"", b"i", b"u-1",
               b"i08"]
# Offsets stay small where they are valid (a write grows the value to them).
FIELD_OFFSETS = [b"0", b"1", b"3", b"7", b"8", b"13", b"64", b"100", b"#0", b"#1", b"#3",
                 b"#17", b"-1", b"abc", b"", b"#", b"#-1", b"4294967296",
                 b"#9223372036854775807", b"#1152921504606846976", b"01", b"# 1"]
FIELD_VALUES = [b"0", b"1", b"-1", b"5", b"100", b"127", b"128", b"-128", b"255", b"256",
                b"-129", b"65535", b"9223372036854775807", b"-9223372036854775808",
                b"4611686018427387904", b"abc", b"", b"1.5", b"9223372036854775808"]


def elements(gen):
    r = gen.r
    pool = r.choice(ELEMENT_POOLS)
    n = r.choice([0, 1, 1, 2, 3, 5, 10, 40]) if r.random() < 0.9 else r.randint(100, 600)
    return [r.choice(pool) for _ in range(n)]


def pfadd(gen):
    return Op([b"PFADD", gen.key()] + elements(gen))


def pfcount(gen):
    n = gen.r.choice([1, 1, 1, 2, 3])
    return Op([b"PFCOUNT"] + [gen.key() for _ in range(n)])


def pfmerge(gen):
    n = gen.r.choice([1, 2, 2, 3, 4])
    return Op([b"PFMERGE"] + [gen.key() for _ in range(n)])


def pfdebug(gen):
    r = gen.r
    sub = r.choice([b"ENCODING", b"encoding", b"DECODE", b"decode", b"TODENSE", b"todense",
                    b"GETREG" if r.random() < 0.2 else b"DECODE", b"nope", b""])
    return Op([b"PFDEBUG", sub, gen.key()])


def field_op(gen, writes):
    r = gen.r
    kind = r.choice([b"GET", b"get"] + ([b"SET", b"INCRBY", b"incrby", b"set"] if writes
                                         else []))
    args = [kind, r.choice(FIELD_TYPES[:14]) if r.random() < 0.9 else r.choice(FIELD_TYPES),
            r.choice(FIELD_OFFSETS[:12]) if r.random() < 0.9 else r.choice(FIELD_OFFSETS)]
    if kind.upper() != b"GET":
        args.append(r.choice(FIELD_VALUES[:15]) if r.random() < 0.95
                    else r.choice(FIELD_VALUES))
    return args


def bitfield(gen, name=b"BITFIELD", writes=True):
    r = gen.r
    args = [name, gen.key()]
    for _ in range(r.choice([0, 1, 1, 2, 3, 5])):
        x = r.random()
        if x < 0.2:
            args += [b"OVERFLOW", r.choice([b"WRAP", b"SAT", b"FAIL", b"fail", b"sat",
                                            b"nope"])]
        elif x < 0.97:
            args += field_op(gen, writes or r.random() < 0.1)
        else:
            args += r.choice([[b"GET", b"u8"], [b"SET", b"u8", b"0"], [b"nope"],
                              [b"OVERFLOW"]])
    return Op(args)


def bitfield_ro(gen):
    return bitfield(gen, b"BITFIELD_RO", writes=False)


def bitop(gen):
    r = gen.r
    op = r.choice([b"AND", b"or", b"XOR", b"NOT", b"not", b"nope"])
    n = r.choice([1, 1, 2, 3]) if op.upper() != b"NOT" else r.choice([1, 1, 1, 2])
    return Op([b"BITOP", op, gen.key()] + [gen.key() for _ in range(n)])


GENERATORS = {
    "PFADD": (3, pfadd),
    "PFCOUNT": (3, pfcount),
    "PFMERGE": (2, pfmerge),
    "PFDEBUG": (2, pfdebug),
    "BITOP": (3, bitop),
    "BITFIELD": (3, bitfield),
    "BITFIELD_RO": (2, bitfield_ro),
}
