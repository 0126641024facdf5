"""Differential generators for the hash commands (loaded by test_differential.py).

Keys come from the shared key space (`gen.key()`), so hashes collide with strings and sets
(WRONGTYPE paths) and with DEL, RENAME, COPY, EXPIRE, TYPE and SCAN of the main generator.
Left out or compared loosely, on purpose:
- Field order: Redis keeps a listpack hash in insertion order and a hashtable in hash
  order; Strata keeps fields in byte order. HGETALL, HKEYS, HVALS, HSCAN are compared as
  multisets.
- HRANDFIELD is random: compared are the reply's shape (type, length, nesting), that a
  positive count gives distinct fields, and that a count covering the hash gives all of
  it. Counts beyond +-2^62 with WITHVALUES are not generated past Redis's range check:
  Redis 7.0 tries to allocate the reply and dies (`hrandfield h -4611686018427387903
  withvalues`).
- HSCAN: a listpack hash comes back whole with cursor 0 on both; a hashtable (a value
  over 64 bytes, more than 512 fields) is walked by cursors that differ by design
  (`docs/design.md` §13.4.4), so a call from a cursor other than 0 (generated: -1, and
  bad ones), or one whose reply cursor is not 0 on both, is compared by shape only.
- OBJECT ENCODING only on the keys `henc0`, `henc1`, which only these generators write
  (the main generator's RENAME and COPY do not reach them).
"""

FIELDS = [b"f0", b"f1", b"f2", b"f3", b"", b"\x00\xff", b"1", b"-5", b"a b", b"f\r\n"]
HINT_ARGS = [b"1", b"-1", b"0", b"5", b"100", b"-100", b"9223372036854775807",
             b"-9223372036854775808", b"abc", b"", b"1.5", b" 1", b"+1", b"01",
             b"9223372036854775808"]
HFLOAT_ARGS = [b"1", b"-1", b"0.5", b"2.25", b"-0.1", b"1e2", b"abc", b"inf", b"-inf", b"nan",
               b"", b" 1", b"1e308", b"1e400", b"0x10", b"3.0", b".5", b"1e-20"]
HVALUES = [b"0", b"1", b"-1", b"10", b"1.5", b"9223372036854775807", b"abc", b"", b"1e3",
           b"-0.5", b"x" * 64, b"y" * 65, b"3.0"]
ENC_KEYS = [b"henc0", b"henc1"]
RAND_COUNTS = [b"0", b"1", b"2", b"3", b"5", b"100", b"-1", b"-3", b"-10", b"abc", b"",
               b"9223372036854775807", b"-9223372036854775807", b"-9223372036854775808",
               b"4611686018427387904", b"-4611686018427387904", b"4611686018427387903"]


def field(gen):
    return gen.r.choice(FIELDS)


def hvalue(gen):
    return gen.r.choice(HVALUES) if gen.r.random() < 0.5 else gen.value()


# ---- reply comparisons ----------------------------------------------------------------

def _pairs(items):
    return sorted(zip(items[0::2], items[1::2]))


def unordered(a, b):
    """Equal as multisets: arrays, RESP3 sets and maps, and flat RESP2 field-value arrays
    (sorted by pairs when `pairs`)."""
    return _norm(a) == _norm(b)


def _norm(x):
    if isinstance(x, list):
        return ("list", sorted(map(repr, x)))
    if isinstance(x, tuple) and x and x[0] in ("~", "%"):
        return (x[0], sorted(map(repr, x[1])))
    return x


def unordered_pairs(a, b):
    """HGETALL: a RESP2 flat array compared as a multiset of (field, value) pairs."""
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and _pairs(a) == _pairs(b)
    return unordered(a, b)


def _shape(x):
    if isinstance(x, list):
        return ("list", len(x), tuple(sorted({_shape(i) for i in x}, key=repr)))
    if isinstance(x, tuple) and x and x[0] in ("~", "%"):
        return (x[0], len(x[1]))
    if isinstance(x, bytes):
        return "bulk"
    return x  # errors, integers, nulls: exact


def same_shape(a, b):
    return _shape(a) == _shape(b)


def random_reply(count, with_values=False):
    """Compare for HRANDFIELD / SRANDMEMBER with `count` (bytes, or None: no count);
    `with_values`: HRANDFIELD's WITHVALUES (a flat field-value array in RESP2, an array of
    pairs in RESP3)."""
    try:
        n = int(count) if count is not None else None
    except ValueError:
        n = None

    def items(x):
        if with_values and x and not isinstance(x[0], list):
            return [repr(p) for p in zip(x[0::2], x[1::2])]
        return [repr(i) for i in x]

    def cmp(a, b):
        if not same_shape(a, b):
            return False
        if isinstance(a, list) and n is not None and n > 0:
            ia, ib = items(a), items(b)
            if len(set(ia)) != len(ia) or len(set(ib)) != len(ib):
                return False
            if len(ia) < n:  # the count covers the collection: all of it, in any order
                return sorted(ia) == sorted(ib)
        return True
    return cmp


def scan_reply(pairs, cursor):
    """HSCAN/SSCAN from `cursor`: a whole iteration (cursor 0 in and out) compares as a
    multiset; a call from another cursor, or one that did not finish, by shape only."""
    def cmp(a, b):
        if not (isinstance(a, list) and isinstance(b, list) and len(a) == len(b) == 2):
            return a == b
        if cursor in (b"0", b"") and a[0] == b[0] == b"0":
            return (unordered_pairs if pairs else unordered)(a[1], b[1])
        return same_shape(a[0], b[0]) and isinstance(a[1], list) and isinstance(b[1], list)
    return cmp


# ---- generators ------------------------------------------------------------------------

def _key(gen):
    r = gen.r.random()
    if r < 0.08:
        return gen.r.choice(ENC_KEYS)
    if r < 0.1:
        return b"nokey"
    return gen.key()


def g_hset(gen):
    r = gen.r
    name = r.choice(["HSET", "HSET", "HMSET"])
    args = [gen.name(name), _key(gen)]
    n = r.choice([1, 1, 1, 2, 3, 4])
    if r.random() < 0.02:
        # Past hash-max-listpack-entries (512): a hashtable from then on.
        n = r.choice([511, 512, 513, 520])
        for i in range(n):
            args += [b"bulk%d" % i, b"v"]
    else:
        for _ in range(n):
            args += [field(gen), hvalue(gen)]
    if r.random() < 0.04:
        args.append(field(gen))  # odd: wrong number of arguments
    return _op(args)


def g_hsetnx(gen):
    return _op([gen.name("HSETNX"), _key(gen), field(gen), hvalue(gen)])


def g_hget(gen):
    return _op([gen.name("HGET"), _key(gen), field(gen)])


def g_hmget(gen):
    return _op([gen.name("HMGET"), _key(gen)] +
               [field(gen) for _ in range(gen.r.randint(1, 4))])


def g_hgetall(gen):
    return _op([gen.name("HGETALL"), _key(gen)], compare=unordered_pairs)


def g_hdel(gen):
    return _op([gen.name("HDEL"), _key(gen)] +
               [field(gen) for _ in range(gen.r.randint(1, 4))])


def g_hlen(gen):
    return _op([gen.name("HLEN"), _key(gen)])


def g_hexists(gen):
    return _op([gen.name("HEXISTS"), _key(gen), field(gen)])


def g_hkeys(gen):
    return _op([gen.name(gen.r.choice(["HKEYS", "HVALS"])), _key(gen)], compare=unordered)


def g_hincrby(gen):
    return _op([gen.name("HINCRBY"), _key(gen), field(gen), gen.r.choice(HINT_ARGS)])


def g_hincrbyfloat(gen):
    return _op([gen.name("HINCRBYFLOAT"), _key(gen), field(gen), gen.r.choice(HFLOAT_ARGS)])


def g_hstrlen(gen):
    return _op([gen.name("HSTRLEN"), _key(gen), field(gen)])


def g_hrandfield(gen):
    r = gen.r
    args = [gen.name("HRANDFIELD"), _key(gen)]
    count = None
    if r.random() < 0.8:
        count = r.choice(RAND_COUNTS)
        args.append(count)
        x = r.random()
        if x < 0.4:
            args.append(gen.name("WITHVALUES"))
            if count.lstrip(b"-").isdigit() and abs(int(count)) > 1 << 20:
                # Huge counts: only those Redis refuses before allocating.
                args[2] = count = r.choice([b"-4611686018427387904", b"4611686018427387904",
                                            b"9223372036854775807"])
        elif x < 0.45:
            args.append(r.choice([b"WITHVALUE", b"x"]))
        elif x < 0.5:
            args += [gen.name("WITHVALUES"), b"extra"]
        if count.lstrip(b"-").isdigit() and int(count) < -(1 << 20) and len(args) == 3:
            args[2] = count = b"-9223372036854775808"  # refused; a real huge reply is not
    with_values = len(args) == 4 and args[3].upper() == b"WITHVALUES"
    op = _op(args, compare=random_reply(count, with_values))
    op.exact_arity = True
    return op


def g_hscan(gen):
    r = gen.r
    args = [gen.name("HSCAN"), _key(gen), r.choice([b"0"] * 8 + [b"x", b"-1", b""])]
    for _ in range(r.choice([0, 0, 1, 1, 2])):
        opt = r.choice(["COUNT", "MATCH", "NOVALUES", "TYPE", "FOO"])
        args.append(gen.name(opt))
        if opt == "COUNT" and r.random() < 0.95:
            args.append(r.choice([b"1", b"2", b"10", b"1000", b"0", b"-1", b"x"]))
        elif opt in ("MATCH", "TYPE") and r.random() < 0.95:
            args.append(r.choice([b"*", b"f*", b"f[0-1]", b"?", b"hash", b"*\xff*"]))
    op = _op(args, compare=scan_reply(True, args[2]))
    op.exact_arity = True
    return op


def g_encoding(gen):
    r = gen.r
    if r.random() < 0.5:
        return _op([b"OBJECT", b"ENCODING", r.choice(ENC_KEYS)])
    return _op([b"MEMORY", b"USAGE", r.choice(ENC_KEYS + [b"nokey"])])


def g_generic(gen):
    """Commands of any type on a hash: copy or rename one, then read it back."""
    r = gen.r
    src, dst = gen.key(), gen.key()
    c = r.choice(["RENAME", "COPY", "TYPE", "EXISTS", "EXPIRE"])
    if c == "TYPE":
        return _op([b"TYPE", src])
    if c == "EXISTS":
        return _op([b"EXISTS", src, dst])
    if c == "EXPIRE":
        return _op([b"EXPIRE", src, r.choice([b"100", b"1000"])])
    if c == "COPY":
        return _op([b"COPY", src, dst] + ([b"REPLACE"] if r.random() < 0.5 else []))
    return _op([b"RENAME", src, dst])


def _op(args, compare=None):
    from test_differential import Op  # loaded by test_differential itself
    return Op(args, compare=compare)


GENERATORS = {
    "HSET": (6, g_hset),
    "HSETNX": (2, g_hsetnx),
    "HGET": (4, g_hget),
    "HMGET": (2, g_hmget),
    "HGETALL": (3, g_hgetall),
    "HDEL": (3, g_hdel),
    "HLEN": (2, g_hlen),
    "HEXISTS": (2, g_hexists),
    "HKEYS": (2, g_hkeys),
    "HINCRBY": (3, g_hincrby),
    "HINCRBYFLOAT": (3, g_hincrbyfloat),
    "HSTRLEN": (2, g_hstrlen),
    "HRANDFIELD": (3, g_hrandfield),
    "HSCAN": (2, g_hscan),
    "HENCODING": (2, g_encoding),
    "HGENERIC": (2, g_generic),
}
