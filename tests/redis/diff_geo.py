"""Differential generators for the geo commands (GEOADD, GEODIST, GEOHASH, GEOPOS,
GEOSEARCH, GEOSEARCHSTORE, GEORADIUS(_RO), GEORADIUSBYMEMBER(_RO)) and SORT / SORT_RO.
Loaded by test_differential.py (over its shared key space, so they meet every other type
and sorted sets whose scores are not geohashes) and by test_geo_sort.py (over keys of their
own, typed by name).

Positions are random to a millionth of a degree, with now and then an exact edge of the
ranges (the poles' limit, the antimeridian) or a point just inside one; two members rarely
share a position, so that distances tie rarely: redis-server orders ties with an unstable
partial quicksort when COUNT cuts the results, and no order of them is the specified one.

SORT replies whose order Redis leaves to its hash tables or to an unstable sort are
compared as multisets of their rows (ALPHA with a BY pattern on a key that may not be a
list, or cut by LIMIT; BY a constant on a set); those are never STOREd, as the stored list
would differ in order.
"""

UNITS = [b"m", b"km", b"ft", b"mi", b"KM", b"M", b"yd"]
EDGE_LONS = [180, -180, 179.999999, -179.999999, 0, 90, -90]
EDGE_LATS = [85.05112878, -85.05112878, 85.05112877, -85.05112877, 0, 45, -66.5, 80.5]
MEMBERS = [b"m%d" % i for i in range(24)] + [b"", b"\x00\xff", b"a b"]
# Patterns over the differential test's keys (k0..k3) and test_geo_sort.py's (w_*, h_*).
SORT_PATTERNS = [b"k*", b"w_*", b"h_*->f", b"k*->f", b"h_*->", b"nosort", b"#", b"w_*_x",
                 b"*", b"h_*->g"]
GET_PATTERNS = [b"#", b"#", b"k*", b"w_*", b"h_*->f", b"o_*", b"nostar", b"*->f"]


def Op(args, compare=None):
    # Imported late: test_differential imports this module while it loads.
    from test_differential import Op as op
    return op(args, compare=compare)


def coord(r, edges, lo, hi):
    x = r.random()
    if x < 0.1:
        return str(r.choice(edges)).encode()
    if x < 0.13:
        return r.choice([b"abc", b"", b"200", b"-91", b"1e400", b"nan", b"85.06"])
    return b"%.6f" % r.uniform(lo, hi)


def lon(r):
    return coord(r, EDGE_LONS, -180, 180)


def lat(r):
    return coord(r, EDGE_LATS, -85.05112878, 85.05112878)


def member(r):
    return r.choice(MEMBERS)


def distance(r):
    x = r.random()
    if x < 0.05:
        return r.choice([b"-1", b"abc", b"0", b"1e400"])
    return b"%g" % r.choice([r.uniform(0, 50), r.uniform(0, 2000), r.uniform(0, 20000),
                             r.uniform(0, 1e5)])


def unit(r):
    return r.choice(UNITS[:4]) if r.random() < 0.95 else r.choice(UNITS)


def geoadd(gen):
    r = gen.r
    args = [b"GEOADD", gen.key()]
    for _ in range(r.choice([0, 0, 0, 1, 1, 2])):
        args.append(r.choice([b"NX", b"XX", b"CH", b"ch", b"GT"]))
    for _ in range(r.choice([1, 1, 2, 3, 6])):
        args += [lon(r), lat(r), member(r)]
    return Op(args)


def geodist(gen):
    r = gen.r
    args = [b"GEODIST", gen.key(), member(gen.r), member(gen.r)]
    if r.random() < 0.6:
        args.append(unit(r))
    return Op(args)


def geohash(gen):
    return Op([b"GEOHASH", gen.key()] + [member(gen.r) for _ in range(gen.r.randint(1, 4))])


def geopos(gen):
    return Op([b"GEOPOS", gen.key()] + [member(gen.r) for _ in range(gen.r.randint(1, 4))])


def options(r, store, search_store=False):
    """WITH*, ASC/DESC, COUNT [ANY] and, where allowed, STORE/STOREDIST."""
    out = []
    for _ in range(r.choice([0, 1, 2, 3, 4])):
        x = r.random()
        if x < 0.45:
            out.append(r.choice([b"WITHDIST", b"WITHCOORD", b"WITHHASH", b"withdist"]))
        elif x < 0.65:
            out.append(r.choice([b"ASC", b"DESC", b"asc"]))
        elif x < 0.85:
            out += [b"COUNT", r.choice([b"1", b"2", b"3", b"5", b"0", b"-1", b"abc"])]
            if r.random() < 0.3:
                out.append(b"ANY")
        elif x < 0.9:
            out.append(b"ANY")
        elif search_store:
            out.append(b"STOREDIST")
        elif store:
            out += [r.choice([b"STORE", b"STOREDIST"]), gen_dst(r)]
        else:
            out.append(r.choice([b"STORE", b"FOO"]))
    return out


def gen_dst(r):
    return r.choice([b"k0", b"k1", b"k2", b"k3", b"gdst"])


def georadius(gen, name=b"GEORADIUS", store=True):
    r = gen.r
    args = [name, gen.key(), lon(r), lat(r), distance(r), unit(r)]
    return Op(args + options(r, store))


def georadius_ro(gen):
    return georadius(gen, b"GEORADIUS_RO", store=False)


def georadiusbymember(gen, name=b"GEORADIUSBYMEMBER", store=True):
    r = gen.r
    args = [name, gen.key(), member(r), distance(r), unit(r)]
    return Op(args + options(r, store))


def georadiusbymember_ro(gen):
    return georadiusbymember(gen, b"GEORADIUSBYMEMBER_RO", store=False)


def search_args(r):
    args = []
    if r.random() < 0.5:
        args += [b"FROMMEMBER", member(r)]
    else:
        args += [b"FROMLONLAT", lon(r), lat(r)]
    if r.random() < 0.5:
        args += [b"BYRADIUS", distance(r), unit(r)]
    else:
        args += [b"BYBOX", distance(r), distance(r), unit(r)]
    if r.random() < 0.05:
        args = args[:r.randrange(len(args))]
    if r.random() < 0.05:
        args += r.choice([[b"FROMLONLAT", b"1", b"1"], [b"BYRADIUS", b"1", b"km"],
                          [b"FROMMEMBER", b"m1"]])
    return args


def geosearch(gen):
    r = gen.r
    args = search_args(r) + options(r, store=False)
    r.shuffle(args) if r.random() < 0.05 else None
    return Op([b"GEOSEARCH", gen.key()] + args)


def geosearchstore(gen):
    r = gen.r
    return Op([b"GEOSEARCHSTORE", gen_dst(r), gen.key()] + search_args(r)
              + options(r, store=False, search_store=True))


def rows(reply, width):
    if not isinstance(reply, list):
        return reply
    return sorted(repr(reply[i:i + width]) for i in range(0, len(reply), width))


def sort_only(gen, name=b"SORT", kind=None):
    """SORT over `gen.key()`; `kind` is the key's type when the caller knows it ("list",
    "set", "zset"; None in the shared key space)."""
    r = gen.r
    args = [name, gen.key()]
    alpha = False
    constant_by = star_by = False
    gets = 0
    for _ in range(r.choice([0, 1, 1, 2, 3, 4])):
        x = r.random()
        if x < 0.2:
            by = r.choice(SORT_PATTERNS)
            args += [b"BY", by]
            # A constant BY stays in force whatever BY follows it.
            constant_by |= b"*" not in by
            star_by = b"*" in by
        elif x < 0.4:
            args.append(r.choice([b"ALPHA", b"alpha"]))
            alpha = True
        elif x < 0.55:
            args.append(r.choice([b"ASC", b"DESC"]))
        elif x < 0.7:
            args += [b"LIMIT", r.choice([b"0", b"1", b"-1", b"3", b"100", b"x"]),
                     r.choice([b"0", b"1", b"2", b"-1", b"10"])]
        elif x < 0.9:
            args += [b"GET", r.choice(GET_PATTERNS)]
            gets += 1
        elif x < 0.95:
            args.append(r.choice([b"FOO", b"LIMIT"]))
        else:
            args += [b"STORE", gen_dst(r)]
    stored = b"STORE" in args
    # Orders Redis takes from its hash tables: a set's BY a constant (unless stored, which
    # sorts it), and the ties of ALPHA BY a pattern on a set or sorted set. Those rows are
    # compared as a multiset, never cut by LIMIT nor stored.
    unordered = (constant_by and kind in (None, "set") and not stored) or \
        (alpha and star_by and not constant_by and kind != "list")
    if unordered:
        args = strip(args, b"STORE", 1)
        args = strip(args, b"LIMIT", 2)
        width = max(gets, 1)
        return Op(args, compare=lambda a, b: rows(a, width) == rows(b, width))
    if alpha and not constant_by and not star_by and kind != "list" and not stored:
        # Redis compares with strcoll: elements equal up to a NUL byte tie, and ties keep
        # the hash table's order (with GETs, their rows are compared as a multiset).
        if gets:
            args = strip(args, b"LIMIT", 2)
            return Op(args, compare=lambda a, b: rows(a, gets) == rows(b, gets))
        return Op(args, compare=lambda a, b: a == b or (
            isinstance(a, list) and isinstance(b, list)
            and [c_string(x) for x in a] == [c_string(x) for x in b]))
    return Op(args)


ERRNO_KEY = b"sort-errno-reset"


def sort_op(gen, name=b"SORT", kind=None):
    """SORT, after a command that clears redis-server's errno. Redis 7.0's SORT reads
    `errno == ERANGE` after strtod without clearing errno first, so once any command's
    strtod overflowed (a score of 1e400, say), every numeric SORT on that connection's
    server fails with "One or more scores can't be converted into double" until some call
    sets errno again; an INCRBYFLOAT (whose parse clears errno) puts it back. The key it
    writes is deleted again."""
    reset = Op([b"INCRBYFLOAT", ERRNO_KEY, b"0"])
    reset.exact_arity = True
    delete = Op([b"DEL", ERRNO_KEY])
    delete.exact_arity = True
    gen.pending += [delete, gen.mutate(sort_only(gen, name, kind))]
    return reset


def strip(args, word, n):
    """`args` without each `word` and the `n` arguments after it."""
    out, i = [], 0
    while i < len(args):
        if i >= 2 and args[i] == word:
            i += n + 1
            continue
        out.append(args[i])
        i += 1
    return out


def c_string(x):
    return x.split(b"\0")[0] if isinstance(x, bytes) else x


def sort_ro(gen):
    op = sort_op(gen, b"SORT_RO")
    return op


GENERATORS = {
    "GEOADD": (4, geoadd),
    "GEODIST": (2, geodist),
    "GEOHASH": (1, geohash),
    "GEOPOS": (1, geopos),
    "GEORADIUS": (2, georadius),
    "GEORADIUS_RO": (1, georadius_ro),
    "GEORADIUSBYMEMBER": (2, georadiusbymember),
    "GEORADIUSBYMEMBER_RO": (1, georadiusbymember_ro),
    "GEOSEARCH": (3, geosearch),
    "GEOSEARCHSTORE": (2, geosearchstore),
    "SORT": (3, sort_op),
    "SORT_RO": (1, sort_ro),
}
