"""Differential test of ACL users (diff_acl.py): the same SETUSER / GETUSER / LIST / CAT /
DRYRUN sequences and NOPERM cases go to a real redis-server 7.0 and to `strata serve`, in
RESP2 and in RESP3, and every reply must be the same (after diff_acl.normalize).

    cargo build --release -p strata-cli
    python3 -m pytest -q tests/redis/test_acl.py
"""

import pytest

import diff_acl
from servers import Client


def run(port, proto):
    """Replies of every step, with the step, on a server on `port`."""
    conns = {}

    def conn(name):
        if name not in conns:
            c = Client(port)
            conns[name] = c
            out = []
            if name != "admin":
                out.append(("AUTH " + name, c.call("AUTH", name, "pw")))
            if proto == 3:
                c.call("HELLO", "3")
            return c, out
        return conns[name], []

    out = []
    for name, args in diff_acl.all_steps():
        c, auth = conn(name)
        out += auth
        reply = c.call(*args)
        out.append(((name, tuple(args)), diff_acl.normalize(args, reply)))
    for c in conns.values():
        c.close()
    return out


@pytest.mark.parametrize("proto", [2, 3])
def test_acl_replies_match_redis(proto):
    from servers import start_redis, start_strata
    redis = start_redis()
    strata = start_strata()
    try:
        want = run(redis.port, proto)
        got = run(strata.port, proto)
    finally:
        redis.stop()
        assert strata.stop(), "strata serve did not stop within 10 s of SIGTERM"
    diffs = [(w[0], w[1], g[1]) for w, g in zip(want, got) if w != g]
    assert len(want) == len(got)
    assert not diffs, "\n".join(f"{step}:\n  redis:  {a!r}\n  strata: {b!r}"
                                for step, a, b in diffs[:15])
