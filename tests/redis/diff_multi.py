"""Differential generators for transactions: MULTI, EXEC, DISCARD, WATCH, UNWATCH.

A transaction is generated as one planned sequence (the first op is returned, the rest go
to `gen.pending` and come next, so no other generator's op lands inside it): optionally
WATCH of some keys and a command that may modify one of them (the differential test uses
one connection per server, so the watching client modifies its own keys, which Redis
counts too) or UNWATCH, then MULTI, a few string commands, and EXEC or DISCARD. Inside,
some commands are rejected while queueing (unknown command, wrong arity, SAVE, which is
not allowed in a transaction: EXEC then replies EXECABORT), some are refused without
flagging (nested MULTI, WATCH inside MULTI), some fail when EXEC runs them (INCR of a
non-number: the others still apply), and SELECT moves the rest to another database.
SWAPDB of databases 0 and 1 comes inside too, and between WATCH and MULTI (where it
touches the watched keys that exist in either database).
EXEC, DISCARD, UNWATCH and WATCH also come alone (without MULTI, wrong arity).

Left out on purpose: KEYS, SCAN, RANDOMKEY and TTLs inside a transaction (their replies
are compared leniently when alone, and EXEC's array is compared exactly), and QUIT (it
closes the connection).
"""

import sys


def Op(args):
    # The runner imports this module while it is itself being imported: look its Op up
    # when a generator runs.
    return sys.modules["test_differential"].Op(args)


def _inner(gen):
    """One command inside MULTI."""
    r = gen.r
    k = gen.key()
    x = r.random()
    if x < 0.03:
        return _swapdb(gen)
    if x < 0.18:
        return [b"SET", k, gen.value()]
    if x < 0.3:
        return [b"GET", k]
    if x < 0.4:
        return [b"INCR", k]
    if x < 0.46:
        return [b"APPEND", k, gen.value()]
    if x < 0.52:
        return [b"DEL", k, gen.key()]
    if x < 0.58:
        return [b"MSET", k, gen.value(), gen.key(), gen.value()]
    if x < 0.64:
        return [b"MGET", k, gen.key(), gen.key()]
    if x < 0.68:
        return [b"EXISTS", k, gen.key()]
    if x < 0.72:
        return [b"SELECT", r.choice([b"0", b"1", b"0", b"99", b"x"])]
    if x < 0.75:
        return [b"DBSIZE"]
    if x < 0.77:
        return [b"FLUSHDB"]
    if x < 0.79:
        return [b"NOSUCHCOMMAND", k]
    if x < 0.81:
        return [b"GET"]  # wrong arity: flags the transaction
    if x < 0.83:
        return [b"SAVE"]  # not allowed inside a transaction
    if x < 0.85:
        return [b"MULTI"]  # refused, does not flag
    if x < 0.87:
        return [b"WATCH", k]  # refused, does not flag
    if x < 0.89:
        return [b"UNWATCH"]
    if x < 0.91:
        return [b"PING"]
    if x < 0.93:
        return [b"ECHO", gen.value()]
    if x < 0.95:
        return [b"INCRBY", k, gen.int_arg()]
    if x < 0.97:
        return [b"EXPIRE", k, b"100"]
    return [b"SETNX", k, gen.value()]


def _swapdb(gen):
    """SWAPDB of the databases SELECT reaches, now and then with a bad index."""
    r = gen.r
    return [b"SWAPDB", r.choice([b"0", b"1", b"1"]), r.choice([b"0", b"1", b"1", b"16", b"x"])]


def _touch(gen, key):
    """A command between WATCH and MULTI: modifies a watched key or not."""
    r = gen.r
    x = r.random()
    if x < 0.06:
        return _swapdb(gen)  # flags watchers of keys that exist in either database
    if x < 0.25:
        return [b"SET", key, gen.value()]
    if x < 0.35:
        return [b"DEL", key]  # a change only if the key exists
    if x < 0.45:
        return [b"SET", key, gen.value(), b"XX"]
    if x < 0.55:
        return [b"EXPIRE", key, b"100"]
    if x < 0.65:
        return [b"GET", key]  # a read: no change
    if x < 0.72:
        return [b"UNWATCH"]
    if x < 0.8:
        return [b"FLUSHDB"]  # a change for watched keys that exist
    if x < 0.86:
        return [b"SET", gen.key(), gen.value()]
    if x < 0.92:
        return [b"WATCH", gen.key()]
    return [b"INCR", key]


def transaction(gen):
    r = gen.r
    seq = []
    if r.random() < 0.45:
        watched = [gen.key() for _ in range(r.randint(1, 3))]
        seq.append([b"WATCH"] + watched)
        for _ in range(r.randint(0, 2)):
            seq.append(_touch(gen, r.choice(watched)))
    seq.append([gen.name("MULTI")])
    for _ in range(r.randint(0, 6)):
        seq.append(_inner(gen))
    x = r.random()
    if x < 0.75:
        seq.append([gen.name("EXEC")])
    elif x < 0.9:
        seq.append([gen.name("DISCARD")])
    elif x < 0.95:
        seq.append([b"EXEC", b"extra"])  # EXECABORT: wrong number of arguments
        seq.append([b"EXEC"])  # EXEC without MULTI: the transaction is gone
    else:
        seq.append([b"DISCARD", b"extra"])  # flags the transaction; EXECABORT next
        seq.append([b"EXEC"])
    ops = [Op(a) for a in seq]
    gen.pending.extend(ops[1:])
    return ops[0]


def alone(gen):
    """Transaction commands outside a transaction."""
    r = gen.r
    x = r.random()
    if x < 0.25:
        args = [gen.name("EXEC")]
    elif x < 0.45:
        args = [gen.name("DISCARD")]
    elif x < 0.65:
        args = [gen.name("UNWATCH")]
    elif x < 0.85:
        args = [gen.name("WATCH")] + [gen.key() for _ in range(r.randint(1, 3))]
    else:
        args = [gen.name("WATCH")]
    return gen.mutate(Op(args))


GENERATORS = {
    "MULTI": (6, transaction),
    "EXEC": (1, alone),
}
