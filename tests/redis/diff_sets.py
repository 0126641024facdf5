"""Differential generators for the set commands (loaded by test_differential.py).

Keys come from the shared key space (`gen.key()`), so sets collide with strings and hashes
(WRONGTYPE paths), with each other across shards (SMOVE, SINTER... with keys in different
shards run under stripe locks) and with the main generator's DEL, RENAME, COPY, EXPIRE.
Left out or compared loosely, on purpose:
- Member order: an intset is sorted (Strata sorts those replies the same way), a
  hashtable is in hash order; replies that list members are compared as multisets.
- SPOP is only generated where its result is determined: a count covering the whole set
  (the set is emptied), a count of 0, bad counts, and keys that are not sets. A random pop
  of some members would leave the two servers with different sets, so that every later
  command on the key differs. (The redis-py tests check random pops.) For the same reason
  SPOP ops are never given another arity by the main generator's mutation.
- SRANDMEMBER: compared by shape, distinctness for a positive count, and the whole set
  when the count covers it. Huge negative counts are only generated as the refused
  -2^63: Redis would build a reply of that many members.
- SSCAN: as HSCAN (see diff_hashes.py).
- OBJECT ENCODING only on `senc0`, `senc1`, written only here and never by SPOP (a pop of
  most of a set makes Redis rebuild it, re-deciding its encoding from the random members
  left).
"""

from diff_hashes import _op, random_reply, scan_reply, unordered

MEMBERS = [b"1", b"2", b"3", b"10", b"-3", b"0", b"a", b"b", b"", b"01", b"+1",
           b"9223372036854775807", b"9223372036854775808", b"x\r\ny", b"\x00\xff"]
INT_MEMBERS = [b"1", b"2", b"3", b"10", b"-3", b"0", b"100", b"-7"]
ENC_KEYS = [b"senc0", b"senc1"]
RAND_COUNTS = [b"0", b"1", b"2", b"3", b"5", b"100", b"-1", b"-3", b"-10", b"abc", b"",
               b"9223372036854775807", b"-9223372036854775808", b"1.5"]


def member(gen):
    return gen.r.choice(MEMBERS if gen.r.random() < 0.6 else INT_MEMBERS)


def _key(gen):
    r = gen.r.random()
    if r < 0.05:
        return b"nokey"
    return gen.key()


def _enc_or_key(gen):
    return gen.r.choice(ENC_KEYS) if gen.r.random() < 0.1 else _key(gen)


def g_sadd(gen):
    r = gen.r
    args = [gen.name(r.choice(["SADD", "SADD", "SREM"])), _enc_or_key(gen)]
    if r.random() < 0.02 and args[0].upper() == b"SADD":
        # Past set-max-intset-entries (512): a hashtable from then on.
        args += [str(i).encode() for i in range(r.choice([511, 512, 513, 600]))]
    else:
        args += [member(gen) for _ in range(r.randint(1, 4))]
    return _op(args)


def g_smembers(gen):
    return _op([gen.name("SMEMBERS"), _enc_or_key(gen)], compare=unordered)


def g_sismember(gen):
    return _op([gen.name("SISMEMBER"), _key(gen), member(gen)])


def g_smismember(gen):
    return _op([gen.name("SMISMEMBER"), _key(gen)] +
               [member(gen) for _ in range(gen.r.randint(1, 4))])


def g_scard(gen):
    return _op([gen.name("SCARD"), _key(gen)])


def g_spop(gen):
    r = gen.r
    x = r.random()
    if x < 0.15:
        # No count: only where nothing random can happen.
        args = [gen.name("SPOP"), r.choice([b"never-written", b"enc0"])]
    else:
        count = r.choice([b"1000", b"1000", b"0", b"-1", b"abc", b"", b"1.5",
                          b"9223372036854775807", b"-9223372036854775808"])
        args = [gen.name("SPOP"), _key(gen), count]
        if r.random() < 0.05:
            args.append(b"extra")
    op = _op(args, compare=unordered)
    op.exact_arity = True
    return op


def g_srandmember(gen):
    r = gen.r
    args = [gen.name("SRANDMEMBER"), _key(gen)]
    count = None
    if r.random() < 0.8:
        count = r.choice(RAND_COUNTS)
        args.append(count)
        if r.random() < 0.05:
            args.append(b"extra")
    op = _op(args, compare=random_reply(count))
    op.exact_arity = True
    return op


def g_smove(gen):
    return _op([gen.name("SMOVE"), _key(gen), _key(gen), member(gen)])


def g_setop(gen):
    r = gen.r
    c = r.choice(["SINTER", "SUNION", "SDIFF", "SINTERSTORE", "SUNIONSTORE", "SDIFFSTORE"])
    keys = [_key(gen) for _ in range(r.choice([1, 2, 2, 3, 4]))]
    if c.endswith("STORE"):
        dst = r.choice(ENC_KEYS) if r.random() < 0.2 else _key(gen)
        return _op([gen.name(c), dst] + keys)
    return _op([gen.name(c)] + keys, compare=unordered)


def g_sintercard(gen):
    r = gen.r
    keys = [_key(gen) for _ in range(r.choice([1, 2, 2, 3]))]
    numkeys = str(len(keys)).encode()
    if r.random() < 0.1:
        numkeys = r.choice([b"0", b"-1", b"x", b"5", b"9223372036854775808", b""])
    args = [gen.name("SINTERCARD"), numkeys] + keys
    for _ in range(r.choice([0, 0, 1, 1, 2])):
        if r.random() < 0.9:
            args.append(gen.name("LIMIT"))
            if r.random() < 0.95:
                args.append(r.choice([b"0", b"1", b"2", b"-1", b"x", b"100"]))
        else:
            args.append(b"FOO")
    return _op(args)


def g_sscan(gen):
    r = gen.r
    args = [gen.name("SSCAN"), _enc_or_key(gen), r.choice([b"0"] * 8 + [b"x", b"-1"])]
    for _ in range(r.choice([0, 0, 1, 1, 2])):
        opt = r.choice(["COUNT", "MATCH", "NOVALUES", "FOO"])
        args.append(gen.name(opt))
        if opt == "COUNT" and r.random() < 0.95:
            args.append(r.choice([b"1", b"2", b"10", b"1000", b"0", b"-1", b"x"]))
        elif opt == "MATCH" and r.random() < 0.95:
            args.append(r.choice([b"*", b"1*", b"[a-b]", b"?", b"*\xff*"]))
    op = _op(args, compare=scan_reply(False, args[2]))
    op.exact_arity = True
    return op


def g_encoding(gen):
    r = gen.r
    if r.random() < 0.6:
        return _op([b"OBJECT", b"ENCODING", r.choice(ENC_KEYS)])
    return _op([b"MEMORY", b"USAGE", r.choice(ENC_KEYS + [b"nokey"]), b"SAMPLES",
                r.choice([b"0", b"5", b"-1", b"x"])])


GENERATORS = {
    "SADD": (7, g_sadd),
    "SMEMBERS": (3, g_smembers),
    "SISMEMBER": (2, g_sismember),
    "SMISMEMBER": (2, g_smismember),
    "SCARD": (2, g_scard),
    "SPOP": (2, g_spop),
    "SRANDMEMBER": (3, g_srandmember),
    "SMOVE": (3, g_smove),
    "SETOP": (5, g_setop),
    "SINTERCARD": (2, g_sintercard),
    "SSCAN": (2, g_sscan),
    "SENCODING": (2, g_encoding),
}
