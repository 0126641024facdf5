"""The command table against redis-server 7.0.15: for every command and subcommand that
`strata serve` implements, COMMAND INFO, COMMAND DOCS (RESP2 and RESP3) and COMMAND
GETKEYS / GETKEYSANDFLAGS (for a command line built from each command's own argument
docs, and for hand-picked lines with options, several keys and malformed counts) must be
the same as redis-server's. A container lists only the subcommands Strata implements, so
containers are compared subcommand by subcommand."""

import pytest

from servers import Client, Error

# Commands Strata answers that redis-server 7.0.15 lacks (from Redis 7.2).
LATER_THAN_7_0 = {"client|setinfo", "client|no-touch"}


def call(port, args, resp3=False):
    c = Client(port)
    try:
        if resp3:
            c.send(["HELLO", "3"])
            c.read()
        c.send(args)
        return c.read()
    finally:
        c.close()


def command_list(port):
    return {n.decode() for n in call(port, ["COMMAND", "LIST"])}


@pytest.fixture(scope="module")
def implemented(redis_server, strata_server):
    names = command_list(strata_server.port)
    assert len(names) > 200
    return sorted(names)


def test_every_command_is_redis_s(redis_server, strata_server, implemented):
    redis_names = command_list(redis_server.port)
    assert set(implemented) - redis_names == LATER_THAN_7_0
    top = [n for n in implemented if "|" not in n]
    assert call(strata_server.port, ["COMMAND", "COUNT"]) == len(top)
    assert len(call(strata_server.port, ["COMMAND"])) == len(top)


def split_subcommands(info):
    """A COMMAND INFO entry without its subcommands, and the subcommands by name."""
    subs = info[9][1] if isinstance(info[9], tuple) else info[9]  # RESP3: an empty set
    return info[:9], {s[0]: s for s in subs}


@pytest.mark.parametrize("resp3", [False, True])
def test_command_info_matches(redis_server, strata_server, implemented, resp3):
    mismatches = []
    for name in implemented:
        if name in LATER_THAN_7_0:
            continue
        want = call(redis_server.port, ["COMMAND", "INFO", name], resp3)[0]
        got = call(strata_server.port, ["COMMAND", "INFO", name], resp3)[0]
        w_head, w_subs = split_subcommands(want)
        g_head, g_subs = split_subcommands(got)
        if w_head != g_head:
            mismatches.append((name, w_head, g_head))
        for sub, entry in g_subs.items():
            if sub.decode() in LATER_THAN_7_0:
                continue
            if w_subs.get(sub) != entry:
                mismatches.append((sub, w_subs.get(sub), entry))
    assert not mismatches, mismatches[:3]
    # Unknown names: a null each.
    for port in (redis_server.port, strata_server.port):
        assert call(port, ["COMMAND", "INFO", "nosuch", "get|x"], resp3)[0] == (
            call(redis_server.port, ["COMMAND", "INFO", "nosuch"], resp3)[0])


def docs_of(reply):
    """COMMAND DOCS' reply (RESP2 pairs or a RESP3 map) as {name: fields}."""
    pairs = reply[1] if isinstance(reply, tuple) else list(zip(reply[::2], reply[1::2]))
    out = {}
    for name, doc in pairs:
        fields = doc[1] if isinstance(doc, tuple) else list(zip(doc[::2], doc[1::2]))
        out[name] = fields
    return out


@pytest.mark.parametrize("resp3", [False, True])
def test_command_docs_match(redis_server, strata_server, implemented, resp3):
    mismatches = []
    for name in implemented:
        if name in LATER_THAN_7_0:
            continue
        want = docs_of(call(redis_server.port, ["COMMAND", "DOCS", name], resp3))
        got = docs_of(call(strata_server.port, ["COMMAND", "DOCS", name], resp3))
        assert list(got) == list(want), name
        (w,), (g,) = want.values(), got.values()
        w = [(k, v) for k, v in w if k != b"subcommands"]
        g_subs = [v for k, v in g if k == b"subcommands"]
        g = [(k, v) for k, v in g if k != b"subcommands"]
        if w != g:
            mismatches.append((name, w, g))
        if g_subs:
            for sub, doc in docs_of(g_subs[0]).items():
                if sub.decode() in LATER_THAN_7_0:
                    continue
                theirs = docs_of(call(redis_server.port, ["COMMAND", "DOCS", sub], resp3))
                if theirs.get(sub) != doc:
                    mismatches.append((sub, theirs.get(sub), doc))
    assert not mismatches, mismatches[:3]
    for port in (redis_server.port, strata_server.port):
        assert docs_of(call(port, ["COMMAND", "DOCS", "nosuch"], resp3)) == {}


def example(args, counter):
    """A command line that satisfies `args` (COMMAND DOCS' argument tree): required
    arguments once, `oneof` by its first choice, a count of 1 before the keys it counts."""
    out = []
    for a in args:
        # RESP2: each argument is a flat list of field, value pairs.
        a = dict(zip(a[::2], a[1::2])) if a and isinstance(a[0], bytes) else dict(a)
        flags = [f[1] if isinstance(f, tuple) else f for f in a.get(b"flags", [])]
        if b"optional" in [f.encode() if isinstance(f, str) else f for f in flags]:
            continue
        kind = a[b"type"]
        if b"token" in a:
            out.append(a[b"token"])
        if kind == b"key":
            counter[0] += 1
            out.append(b"k%d" % counter[0])
        elif kind in (b"integer", b"double", b"unix-time"):
            out.append(b"1")
        elif kind in (b"string", b"pattern"):
            out.append(b"v")
        elif kind == b"oneof":
            out.extend(example([a[b"arguments"][0]], counter))
        elif kind == b"block":
            out.extend(example(a[b"arguments"], counter))
    return out


def docs_args(port, name):
    doc = docs_of(call(port, ["COMMAND", "DOCS", name]))[name.encode()]
    for k, v in doc:
        if k == b"arguments":
            return [list(zip(m[::2], m[1::2])) for m in v]
    return []


# Lines that the generated examples do not reach: options that name or change keys,
# several keys, counts that do not match, and commands without keys.
EXTRA_LINES = [
    "set k v get", "set k v nx", "set k v ex 10 get",
    "mset a 1 b 2 c 3", "msetnx a 1 b 2", "mget a b c", "del a b c", "exists a b",
    "zunionstore d 2 a b weights 1 2", "zunionstore d 0 a", "zunionstore d -1 a",
    "zunionstore d x a", "zunionstore d 3 a b", "zinterstore d 1 a", "zdiffstore d 2 a b",
    "zunion 2 a b", "zinter 3 a b c withscores", "zdiff 1 a", "zintercard 2 a b limit 1",
    "sintercard 2 a b", "sintercard 0 a", "lmpop 2 a b left count 3", "lmpop 0 a left",
    "blmpop 0 2 a b left", "zmpop 1 a min", "bzmpop 1 2 a b max", "blpop a b c 0",
    "brpop a 0", "bzpopmin a b 0", "rename a b", "copy a b", "copy a b db 1 replace",
    "smove a b m", "lmove a b left right", "blmove a b left left 0", "rpoplpush a b",
    "sinterstore d a b", "sunionstore d a", "sdiff a b c", "zrangestore d s 0 -1",
    "lcs a b", "object encoding k", "memory usage k", "memory usage k samples 5",
    "touch a b", "unlink a b", "watch a b", "bitcount k 0 1", "bitpos k 1 2",
    "ping", "get", "nosuch k", "config get x", "command info", "object help",
]


def test_command_getkeys_matches(redis_server, strata_server, implemented):
    lines = []
    for name in implemented:
        if name in LATER_THAN_7_0:
            continue
        words = name.split("|")
        lines.append([w.encode() for w in words] + example(docs_args(redis_server.port, name),
                                                             [0]))
    lines += [line.encode().split() for line in EXTRA_LINES]
    mismatches = []
    for line in lines:
        for sub in ("GETKEYS", "GETKEYSANDFLAGS"):
            args = [b"COMMAND", sub.encode()] + line
            want = call(redis_server.port, args)
            got = call(strata_server.port, args)
            if want != got:
                mismatches.append((line, sub, want, got))
    assert not mismatches, mismatches[:5]
    # The generated lines are real: most name keys.
    keyed = [line for line in lines if not isinstance(
        call(strata_server.port, [b"COMMAND", b"GETKEYS"] + line), Error)]
    assert len(keyed) > 120


def test_command_list_filters_match(redis_server, strata_server, implemented):
    for filt in (["ACLCAT", "hash"], ["ACLCAT", "keyspace"], ["ACLCAT", "dangerous"],
                 ["ACLCAT", "nosuch"], ["PATTERN", "z*"], ["PATTERN", "config|*"],
                 ["MODULE", "x"]):
        want = {n for n in call(redis_server.port, ["COMMAND", "LIST", "FILTERBY"] + filt)}
        got = {n for n in call(strata_server.port, ["COMMAND", "LIST", "FILTERBY"] + filt)}
        assert got == want & {n.encode() for n in implemented}, filt
    for bad in (["FILTERBY"], ["FILTERBY", "bad", "x"], ["nosuch"]):
        assert (call(strata_server.port, ["COMMAND", "LIST"] + bad)
                == call(redis_server.port, ["COMMAND", "LIST"] + bad)), bad
    assert (call(strata_server.port, ["COMMAND", "HELP"])
            == call(redis_server.port, ["COMMAND", "HELP"]))
