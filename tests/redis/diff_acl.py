"""Differential sequences for ACL users (loaded by test_acl.py): ACL SETUSER with every kind
of rule (passwords, on/off, commands, categories, subcommands, key patterns with %R/%W,
channels, selectors, reset), read back with GETUSER and LIST after each change; ACL CAT,
DRYRUN, USERS, WHOAMI, GENPASS and error texts; and NOPERM cases of a limited user through
plain commands, pipelines, MULTI and EVAL, then ACL LOG.

A step is (connection, args): connection "admin" is the default user; any other name is
a connection opened for that name and authenticated as the user of that name with the
password "pw" (AUTH's own reply is compared too).

Replies are compared exactly, except where Redis's order is its hash table's (which varies
at every start): single-command rules after the categories in a rules string, and the
commands of ACL CAT <category>, are compared sorted; ACL LOG's age-seconds and
client-info are left out; GENPASS is compared by length; KEYS sorted.
"""

import re

# Rule sets applied to fresh users, each read back.
SETUSER_CASES = [
    ["on", ">pw", "~app:*", "+@read"],
    ["on", "nopass", "allkeys", "allchannels", "allcommands"],
    ["+@read", "-get", "+set", "-@read", "+get"],
    ["+@read", "+get"],
    ["+@all", "-@admin", "+acl|whoami", "-config|get"],
    ["+@all", "-@dangerous", "-@write"],
    ["+@hash", "+@string", "-hset", "+client|list"],
    ["-@all", "+config|get", "+config|set"],
    ["+config", "-config|resetstat"],
    ["+@set", "+@sortedset", "-@write"],
    ["~a", "%R~r:*", "%W~w:*", "%RW~rw:*", "%R~a"],
    ["&ch*", "&ch*", "&other"],
    ["allchannels", "resetchannels", "&x"],
    [">a", ">b", "<a"],
    ["#" + "a" * 64, ">b", "!" + "a" * 64],
    ["on", ">x", "nopass"],
    ["on", ">x", "resetpass"],
    ["on", "reset"],
    ["skip-sanitize-payload"],
    ["(~x* +get)", "(%R~y* +@read)", "~z"],
    ["(~x*", "+get)", "clearselectors", "(+set", "~s*)"],
    ["resetkeys", "~k1", "allkeys"],
    ["ON", "+GET", "~K", "AllKeys"],
    # First-argument rules (deprecated in 7.0, still accepted).
    ["+select|0", "+select|2", "+SELECT|Db9", "+select|0"],
    ["+@all", "-select", "+select|0"],
    ["+select|0", "+@connection"],
    ["+select|0", "-select"],
    ["+select|0", "allcommands"],
    # Errors: nothing changes.
    ["+nosuch"],
    ["+@nosuch"],
    ["bogus"],
    ["~a", "allkeys", "%R~a"],
    ["%X~a"],
    ["%~a"],
    ["#abc"],
    ["!" + "b" * 64],
    ["<nosuch"],
    ["(~a"],
    ["(bogus)"],
    ["+config|nosuch"],
    ["-select|0"],
    ["+select|"],
    ["+client|list|x"],
    ["+nosuch|x"],
    ["allchannels", "&x"],
]

CATEGORIES = ["keyspace", "read", "write", "set", "sortedset", "list", "hash", "string",
              "bitmap", "hyperloglog", "geo", "stream", "pubsub", "admin", "fast", "slow",
              "blocking", "dangerous", "connection", "transaction", "scripting"]


def setuser_steps():
    steps = []
    for i, rules in enumerate(SETUSER_CASES):
        name = "u%d" % i
        steps.append(("admin", ["ACL", "SETUSER", name] + rules))
        steps.append(("admin", ["ACL", "GETUSER", name]))
        # The same rules again, on the existing user.
        steps.append(("admin", ["ACL", "SETUSER", name] + rules))
        steps.append(("admin", ["ACL", "GETUSER", name]))
    steps.append(("admin", ["ACL", "LIST"]))
    steps.append(("admin", ["ACL", "USERS"]))
    return steps


def misc_steps():
    steps = [("admin", ["ACL", "CAT"])]
    steps += [("admin", ["ACL", "CAT", c]) for c in CATEGORIES]
    steps += [("admin", a) for a in [
        ["ACL", "CAT", "nosuch"],
        ["ACL", "WHOAMI"],
        ["ACL", "GENPASS"], ["ACL", "GENPASS", "5"], ["ACL", "GENPASS", "4096"],
        ["ACL", "GENPASS", "0"], ["ACL", "GENPASS", "4097"], ["ACL", "GENPASS", "x"],
        ["ACL", "GETUSER", "nosuch"],
        ["ACL", "DELUSER", "default"],
        ["ACL", "DELUSER", "nosuch"],
        ["ACL", "SETUSER", "a b"],
        ["ACL", "LOG", "x"],
        ["ACL", "SAVE"], ["ACL", "LOAD"],
        ["ACL", "HELP"],
        ["ACL", "NOSUCH"],
        ["ACL"],
        ["AUTH", "x"],
        ["AUTH", "nosuch", "pw"],
    ]]
    return steps


def noperm_steps():
    """A user limited to ~app:* and +@read (with what transactions and scripts need)."""
    s = [("admin", ["ACL", "LOG", "RESET"]),
         ("admin", ["ACL", "SETUSER", "app", "on", ">pw", "~app:*", "&news", "+@read",
                    "+multi", "+exec", "+discard", "+eval", "+publish", "+subscribe"]),
         ("admin", ["SET", "app:1", "v"]),
         ("admin", ["SET", "other", "secret"]),
         ("admin", ["HSET", "app:h", "f", "v"])]
    app = [
        ["GET", "app:1"], ["GET", "other"], ["MGET", "app:1", "app:2", "other"],
        ["SET", "app:1", "x"], ["DEL", "app:1"], ["HGET", "app:h", "f"], ["HSET", "app:h", "f", "x"],
        ["CONFIG", "GET", "port"], ["FLUSHALL"], ["ACL", "WHOAMI"], ["ACL", "LIST"],
        ["KEYS", "*"], ["PUBLISH", "news", "m"], ["PUBLISH", "gossip", "m"],
        ["COPY", "app:1", "app:2"], ["EXISTS", "other"], ["TYPE", "app:1"],
        ["MULTI"], ["GET", "app:1"], ["SET", "app:1", "x"], ["GET", "other"], ["EXEC"],
        ["MULTI"], ["GET", "app:1"], ["EXEC"],
        ["EVAL", "return redis.pcall('get','other')", "0"],
        ["EVAL", "return redis.pcall('set','app:1','x')", "0"],
        ["EVAL", "return redis.pcall('publish','gossip','x')", "0"],
        ["EVAL", "return redis.call('get', KEYS[1])", "1", "app:1"],
        ["PING"],
    ]
    s += [("app", a) for a in app]
    s += [("admin", a) for a in [
        ["ACL", "DRYRUN", "app", "get", "other"],
        ["ACL", "DRYRUN", "app", "get", "app:1"],
        ["ACL", "DRYRUN", "app", "set", "app:1", "v"],
        ["ACL", "DRYRUN", "app", "publish", "gossip", "m"],
        ["ACL", "DRYRUN", "app", "config", "get", "x"],
        ["ACL", "DRYRUN", "nosuch", "get", "x"],
        ["ACL", "DRYRUN", "app", "nosuch", "x"],
        ["ACL", "DRYRUN", "app", "get"],
        ["ACL", "LOG"],
        ["ACL", "LOG", "2"],
        ["ACL", "LOG", "-1"],
        ["GET", "app:1"],
        ["ACL", "LOG", "RESET"],
        ["ACL", "LOG"],
    ]]
    # Selectors and read/write key patterns.
    s.append(("admin", ["ACL", "SETUSER", "rw", "on", ">pw", "+@all", "%R~r:*", "%W~w:*",
                        "(~sel:*", "+get)"]))
    s += [("rw", a) for a in [
        ["GET", "r:1"], ["SET", "r:1", "x"], ["SET", "w:1", "x"], ["GET", "w:1"],
        ["INCR", "w:2"], ["COPY", "r:1", "w:3"], ["COPY", "w:1", "r:3"],
        ["GET", "sel:1"], ["SET", "sel:1", "x"], ["ACL", "WHOAMI"],
    ]]
    s.append(("admin", ["ACL", "LOG"]))
    # Rules changed between queueing and EXEC.
    s += [("app", ["MULTI"]), ("app", ["GET", "app:1"]), ("app", ["HGET", "app:h", "f"]),
          ("admin", ["ACL", "SETUSER", "app", "-get", "resetkeys", "~app:h"]),
          ("app", ["EXEC"]), ("admin", ["ACL", "LOG", "1"])]
    # EXEC and DISCARD themselves denied.
    s.append(("admin", ["ACL", "SETUSER", "noexec", "on", ">pw", "~*", "+@read", "+multi"]))
    s += [("noexec", a) for a in [["MULTI"], ["GET", "a"], ["EXEC"], ["MULTI"],
                                  ["AUTH", "noexec", "bad"], ["DISCARD"], ["EXEC"]]]
    s.append(("admin", ["ACL", "LOG", "2"]))
    # Channels of subscriptions: a pattern must be an allowed pattern itself.
    s.append(("admin", ["ACL", "SETUSER", "sub", "on", ">pw", "+@all", "allkeys",
                        "&news.*", "&fixed"]))
    s += [("sub", a) for a in [
        ["PUBLISH", "news.a", "m"], ["PUBLISH", "other", "m"], ["SPUBLISH", "fixed", "m"],
        ["PSUBSCRIBE", "news.a*"], ["SSUBSCRIBE", "other"], ["SUBSCRIBE", "fixed", "no"],
    ]]
    s.append(("admin", ["ACL", "LOG", "3"]))
    # A first-argument rule: SELECT 0 only.
    s.append(("admin", ["ACL", "SETUSER", "fa", "on", ">pw", "~*", "+@read", "+select|0"]))
    s += [("fa", a) for a in [["SELECT", "0"], ["SELECT", "1"], ["GET", "k"]]]
    s.append(("admin", ["ACL", "DRYRUN", "fa", "SELECT", "0"]))
    s.append(("admin", ["ACL", "DRYRUN", "fa", "SELECT", "9"]))
    s.append(("admin", ["ACL", "LOG", "1"]))
    # Failed authentication.
    s.append(("admin", ["ACL", "SETUSER", "off1", "off", ">pw", "+@all"]))
    s.append(("off1", ["GET", "x"]))
    s.append(("admin", ["ACL", "LOG", "1"]))
    return s


def all_steps():
    return setuser_steps() + misc_steps() + noperm_steps()


def norm_rules(s):
    """A rules string with its single-command rules (after the categories) sorted."""
    out = []
    for seg in re.split(r"([()])", s):
        tokens = seg.split(" ")
        singles = [t for t in tokens if t[:1] in ("+", "-") and t[1:2] != "@"]
        others = [t for t in tokens if not (t[:1] in ("+", "-") and t[1:2] != "@")]
        out.append(" ".join(others + sorted(singles)))
    return "".join(out)


def _text(v):
    return v.decode(errors="replace") if isinstance(v, bytes) else v


def _pairs(reply):
    """A map reply's (key, value) pairs in RESP2 or RESP3."""
    if isinstance(reply, tuple) and reply[0] == "%":
        return list(reply[1])
    return list(zip(reply[0::2], reply[1::2]))


def _norm_getuser(reply):
    if not isinstance(reply, (list, tuple)):
        return reply
    out = []
    for k, v in _pairs(reply):
        k = _text(k)
        if k == "commands":
            v = norm_rules(_text(v))
        elif k == "selectors":
            v = [_norm_getuser(x) for x in v]
        out.append((k, v))
    return out


def normalize(args, reply):
    """What of `reply` to `args` is compared."""
    words = [a.upper() if isinstance(a, str) else a for a in args]
    if words[:2] == ["ACL", "GETUSER"]:
        return _norm_getuser(reply)
    if words[:2] == ["ACL", "LIST"] and isinstance(reply, list):
        return [norm_rules(_text(x)) for x in reply]
    if words[:2] == ["ACL", "CAT"] and len(words) == 3 and isinstance(reply, list):
        # CLIENT SETINFO and NO-TOUCH are Redis 7.2 commands Strata answers.
        return sorted(x for x in reply if x not in (b"client|setinfo", b"client|no-touch"))
    if words[:1] == ["KEYS"] and isinstance(reply, list):
        return sorted(reply)
    if words[:2] == ["ACL", "GENPASS"] and isinstance(reply, bytes):
        return ("length", len(reply))
    if words[:2] == ["ACL", "LOG"] and isinstance(reply, list):
        return [[(_text(k), v) for k, v in _pairs(e)
                 if _text(k) not in ("age-seconds", "client-info")] for e in reply]
    return reply


# For test_differential.py's random sequences: read-only ACL commands of the default user
# (the sequences here change no users, so other commands' replies stay comparable).
def Op(args):
    # Imported late: test_differential imports this module while it loads.
    from test_differential import Op as op
    return op(args)


def acl_read(gen):
    r = gen.r
    k = gen.key()
    return Op(r.choice([
        [b"ACL", b"WHOAMI"],
        [b"ACL", b"GETUSER", b"default"],
        [b"ACL", b"GETUSER", b"nosuch"],
        [b"ACL", b"USERS"],
        [b"ACL", b"CAT"],
        [b"ACL", b"LIST"],
        [b"ACL", b"DRYRUN", b"default", b"GET", k],
        [b"ACL", b"DRYRUN", b"default", b"SET", k, b"v"],
        [b"ACL", b"DRYRUN", b"default", b"GET"],
        [b"ACL", b"DRYRUN", b"nosuch", b"GET", k],
        [b"ACL", b"WHOAMI", b"extra"],
    ]))


GENERATORS = {
    "ACL": (1, acl_read),
}
