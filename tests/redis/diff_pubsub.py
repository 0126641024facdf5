"""Differential generators for the pub/sub commands a single connection can run without
entering the subscribed state: PUBLISH (to channels no one subscribes to, so the count is
0 on both servers), PUBSUB CHANNELS / NUMSUB / NUMPAT / SHARDCHANNELS / SHARDNUMSUB / HELP,
with wrong arities and unknown subcommands.

SUBSCRIBE and friends are left out: they switch the connection into the subscribed mode
(which refuses the other families' commands in RESP2) and need a second connection to be
meaningful; `test_pubsub.py` runs them in a two-connection scenario against both servers.
"""



def Op(args):
    # Imported late: test_differential imports this module while it loads.
    from test_differential import Op as op
    return op(args)

SUBS = [b"CHANNELS", b"channels", b"NUMSUB", b"NUMPAT", b"numpat", b"SHARDCHANNELS",
        b"SHARDNUMSUB", b"HELP", b"nope", b""]


def channel(gen):
    return gen.r.choice([b"c", b"news", b"", b"\x00\xff", b"a b", gen.key()])


def publish(gen):
    r = gen.r
    n = r.choice([2, 2, 2, 1, 3])
    args = [b"PUBLISH"] + [channel(gen) for _ in range(n - 1)]
    if n >= 3:
        args[-1] = gen.value()
    return Op(args)


def pubsub(gen):
    r = gen.r
    sub = r.choice(SUBS)
    extra = [r.choice([b"*", b"c*", b"[", b"news", gen.key()]) for _ in range(r.randint(0, 3))]
    return Op([b"PUBSUB", sub] + extra)


def pubsub_bare(gen):
    return Op([b"PUBSUB"])


GENERATORS = {
    "PUBLISH": (3, publish),
    "PUBSUB": (3, pubsub),
    "PUBSUB-BARE": (1, pubsub_bare),
}
