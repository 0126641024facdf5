"""Client-side caching with redis-py, in RESP2 with a REDIRECT client subscribed to
`__redis__:invalidate`, against a real redis-server 7.0 and `strata serve`: the same
scenario runs on both (default mode, BCAST with prefixes, OPTIN/OPTOUT with CLIENT
CACHING, NOLOOP, FLUSHDB's null, the option errors, a redirect to a client that left) and
the transcripts of replies, errors and invalidation messages must be equal.

    cargo build --release -p strata-cli
    python3 -m pytest -q tests/redis/test_tracking.py
"""

import time

import redis

CHANNEL = b"__redis__:invalidate"


def drain(pubsub):
    """Every message the redirect client has received, until none comes for 0.3 s."""
    out = []
    while True:
        m = pubsub.get_message(timeout=0.3)
        if m is None:
            return out
        if m["type"] == "message":
            data = m["data"]
            out.append((m["channel"], sorted(data) if isinstance(data, list) else data))


def attempt(f, *args):
    try:
        return f(*args)
    except redis.ResponseError as e:
        return ("error", str(e))


def info_without_ids(info):
    """TRACKINGINFO with the redirect id replaced by whether there is one."""
    if not isinstance(info, dict):
        info = dict(zip(info[::2], info[1::2]))
    flat = {k.decode() if isinstance(k, bytes) else k: v for k, v in info.items()}
    flat["redirect"] = flat["redirect"] > 0 if flat["redirect"] != -1 else -1
    return flat


def scenario(port):
    t = []
    w = redis.Redis(port=port, protocol=2)
    w.flushall()
    sub_conn = redis.Redis(port=port, protocol=2)
    pubsub = sub_conn.pubsub()
    pubsub.subscribe(CHANNEL)
    pubsub.get_message(timeout=1)  # the subscription's confirmation
    [sub_id] = [c["id"] for c in w.client_list(_type="pubsub")]
    sub_id = int(sub_id)

    tr = redis.Redis(port=port, protocol=2, single_connection_client=True)
    t.append(tr.client_tracking_on(clientid=sub_id))
    t.append(tr.client_getredir() == sub_id)
    t.append(tr.get("a"))
    t.append(tr.mget("b", "c"))
    t.append(w.set("a", 1))
    t.append(w.mset({"b": 1, "c": 2}))
    t.append(drain(pubsub))
    t.append(w.set("a", 2))  # forgotten since: nothing
    t.append(drain(pubsub))
    t.append(tr.hgetall("h"))
    t.append(w.hset("h", "f", "v"))
    t.append(tr.get("a"))
    t.append(tr.set("a", 3))  # its own write (no NOLOOP)
    t.append(drain(pubsub))
    t.append(tr.get("a"))
    t.append(w.flushdb())
    t.append(drain(pubsub))
    t.append(info_without_ids(tr.client_trackinginfo()))

    # Option errors, in Redis's order of checks.
    for args in [
        ("CLIENT", "TRACKING", "on", "PREFIX", "x"),
        ("CLIENT", "TRACKING", "on", "BCAST"),
        ("CLIENT", "TRACKING", "maybe"),
        ("CLIENT", "TRACKING", "on", "REDIRECT"),
        ("CLIENT", "TRACKING", "on", "REDIRECT", "nan"),
        ("CLIENT", "TRACKING", "on", "REDIRECT", "999999"),
        ("CLIENT", "TRACKING", "on", "OPTIN", "OPTOUT"),
        ("CLIENT", "TRACKING", "on", "BCAST", "OPTIN"),
        ("CLIENT", "CACHING", "yes"),
        ("CLIENT", "CACHING", "never"),
    ]:
        t.append((args, attempt(tr.execute_command, *args)))
    t.append(tr.client_tracking_off())
    t.append(tr.client_getredir())
    t.append(attempt(tr.execute_command, "CLIENT", "CACHING", "yes"))

    # BCAST with prefixes, NOLOOP.
    t.append(tr.client_tracking_on(clientid=sub_id, bcast=True, prefix=["user:", "job:"],
                                   noloop=True))
    t.append(attempt(tr.execute_command, "CLIENT", "TRACKING", "on", "BCAST", "PREFIX",
                     "user:1"))
    t.append(attempt(tr.execute_command, "CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "a",
                     "PREFIX", "ab"))
    t.append(w.mset({"user:1": 1, "job:9": 2, "other": 3, "user:2": 4}))
    t.append(tr.set("user:3", 1))  # NOLOOP: not sent
    t.append(drain(pubsub))
    t.append(info_without_ids(tr.client_trackinginfo()))
    t.append(tr.client_tracking_off())

    # OPTIN and OPTOUT.
    t.append(tr.client_tracking_on(clientid=sub_id, optin=True))
    t.append(tr.get("k1"))
    t.append(tr.execute_command("CLIENT", "CACHING", "yes"))
    t.append(tr.get("k2"))
    t.append(tr.get("k3"))
    t.append(attempt(tr.client_tracking_on, sub_id, [], False, False, True))  # OPTOUT now
    t.append(w.mset({"k1": 1, "k2": 2, "k3": 3}))
    t.append(drain(pubsub))
    t.append(tr.client_tracking_off())
    t.append(tr.client_tracking_on(clientid=sub_id, optout=True))
    t.append(tr.execute_command("CLIENT", "CACHING", "no"))
    t.append(info_without_ids(tr.client_trackinginfo()))
    t.append(tr.get("k1"))
    t.append(tr.get("k2"))
    t.append(w.mset({"k1": 1, "k2": 2}))
    t.append(drain(pubsub))

    # The redirect client leaves: the redirect is broken.
    pubsub.close()
    sub_conn.close()
    time.sleep(0.3)
    t.append(tr.get("k1"))
    t.append(w.set("k1", 5))
    time.sleep(0.1)
    t.append(info_without_ids(tr.client_trackinginfo()))
    flags = [c["flags"] for c in w.client_list() if int(c["id"]) == tr.client_id()]
    t.append(flags)
    t.append(tr.client_tracking_off())
    for c in (w, tr):
        c.close()
    return t


def test_tracking_matches_redis(redis_server, strata_server):
    want = scenario(redis_server.port)
    got = scenario(strata_server.port)
    for i, (a, b) in enumerate(zip(want, got)):
        assert a == b, f"step {i}: redis-server {a!r}, strata {b!r}"
    assert len(want) == len(got)
