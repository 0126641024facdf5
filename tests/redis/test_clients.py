"""Real clients against `strata serve`: redis-py over RESP2 and RESP3 (every implemented
command family, pipelines, AUTH, error replies, binary data), and the redis-cli tools
(`--pipe` mass insertion, redis-benchmark).

    python3 -m pytest -q tests/redis/test_clients.py
"""

import os
import shutil
import subprocess
import time

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from servers import start_strata

# 1M keys take about a minute through --pipe here; STRATA_PIPE_KEYS makes the run shorter.
PIPE_KEYS = int(os.environ.get("STRATA_PIPE_KEYS", "1000000"))


@pytest.fixture(params=[2, 3], ids=["resp2", "resp3"])
def r(strata_server, request):
    c = redis.Redis(host="127.0.0.1", port=strata_server.port, protocol=request.param,
                    decode_responses=False)
    c.flushall()
    try:
        yield c
    finally:
        c.close()


def test_connection(r):
    assert r.ping() is True
    assert r.echo(b"\x00hi\xff") == b"\x00hi\xff"
    r.set("k", "db0")
    r.execute_command("SELECT", 1)
    assert r.get("k") is None
    assert r.dbsize() == 0
    r.set("k", "db1")
    assert r.dbsize() == 1
    assert r.flushdb() is True
    assert r.dbsize() == 0
    r.execute_command("SELECT", 0)
    assert r.get("k") == b"db0"
    with pytest.raises(redis.ResponseError, match="^DB index is out of range$"):
        r.execute_command("SELECT", 16)


def test_strings(r):
    assert r.set("s", "v") is True
    assert r.get("s") == b"v"
    assert r.set("s", "w", nx=True) is None
    assert r.set("s", "w", xx=True) is True
    assert r.set("s", "x", get=True) == b"w"
    assert r.set("s", "y", ex=100) is True
    assert 99 <= r.ttl("s") <= 100
    assert r.set("s", "z", keepttl=True) is True
    assert 99 <= r.ttl("s") <= 100
    assert r.set("s", "z", px=100000) is True
    assert 99000 <= r.pttl("s") <= 100000
    assert r.set("s", "z", exat=int(time.time()) + 100) is True
    assert r.set("s", "z", pxat=int(time.time() * 1000) + 100000) is True
    assert r.setnx("s", "a") is False
    assert r.setnx("n", "a") is True
    assert r.execute_command("SETEX", "e", 100, "v") in (b"OK", True)
    assert r.execute_command("PSETEX", "p", 100000, "v") in (b"OK", True)
    assert 99000 <= r.pttl("p") <= 100000
    assert r.getset("s", "new") == b"z"
    assert r.ttl("s") == -1
    assert r.getdel("s") == b"new"
    assert r.get("s") is None
    assert r.mset({"a": "1", "b": "2"}) is True
    assert r.mget("a", "missing", "b") == [b"1", None, b"2"]
    assert r.append("a", "23") == 3
    assert r.strlen("a") == 3
    assert r.incr("a") == 124
    assert r.decr("a") == 123
    assert r.incrby("a", 10) == 133
    assert r.decrby("a", 33) == 100
    assert r.incrbyfloat("f", 10.5) == 10.5
    assert r.incrbyfloat("f", 0.1) == 10.6
    assert r.getrange("a", 0, 1) == b"10"
    assert r.setrange("a", 1, "xy") == 3
    assert r.get("a") == b"1xy"
    r.set("max", str(2**63 - 1))
    with pytest.raises(redis.ResponseError, match="^increment or decrement would overflow$"):
        r.incr("max")


def test_strings_redis7(r):
    # GETEX, MSETNX, SUBSTR and LCS through redis-py's own methods and reply parsing.
    r.set("g", "v")
    assert r.getex("g", ex=100) == b"v"
    assert 99 <= r.ttl("g") <= 100
    assert r.getex("g", persist=True) == b"v"
    assert r.ttl("g") == -1
    assert r.getex("g", pxat=int(time.time() * 1000) + 100000) == b"v"
    assert 99000 <= r.pttl("g") <= 100000
    assert r.getex("missing", ex=5) is None
    with pytest.raises(redis.ResponseError, match="^invalid expire time in 'getex' command$"):
        r.getex("g", ex=0)
    assert r.msetnx({"m1": "a", "m2": "b"}) is True
    assert r.msetnx({"m2": "x", "m3": "c"}) is False
    assert r.exists("m3") == 0
    assert r.substr("g", 0, 0) == b"v"
    r.mset({"l1": "ohmytext", "l2": "mynewtext"})
    assert r.lcs("l1", "l2") == b"mytext"
    assert r.lcs("l1", "l2", len=True) == 6
    res = r.lcs("l1", "l2", idx=True, minmatchlen=4, withmatchlen=True)
    if isinstance(res, dict):  # RESP3: a map
        matches, length = res[b"matches"], res[b"len"]
    else:
        assert res[0] == b"matches" and res[2] == b"len"
        matches, length = res[1], res[3]
    assert matches == [[[4, 7], [5, 8], 4]]
    assert length == 6
    with pytest.raises(redis.ResponseError, match="^If you want both the length and indexes"):
        r.lcs("l1", "l2", len=True, idx=True)


def test_bitmaps(r):
    assert r.setbit("b", 7, 1) == 0
    assert r.setbit("b", 7, 1) == 1
    assert r.getbit("b", 7) == 1
    assert r.getbit("b", 100) == 0
    assert r.get("b") == b"\x01"
    r.set("f", "foobar")
    assert r.bitcount("f") == 26
    assert r.bitcount("f", 1, 1) == 6
    assert r.bitcount("f", 5, 30, "BIT") == 17
    r.set("ones", b"\xff\xff")
    assert r.bitpos("ones", 0) == 16
    assert r.bitpos("ones", 0, 0, -1) == -1
    assert r.bitpos("f", 1, 7, 15, "BIT") == 9
    assert r.bitpos("missing", 0) == 0
    assert r.bitpos("missing", 1) == -1
    with pytest.raises(redis.ResponseError, match="^bit offset is not an integer or out of"):
        r.setbit("b", 2**32, 1)
    # (redis-py's setbit sends any true value as 1; its bitpos refuses a bit not 0 or 1.)
    with pytest.raises(redis.ResponseError, match="^bit is not an integer or out of range$"):
        r.execute_command("SETBIT", "b", 0, 2)
    with pytest.raises(redis.ResponseError, match="^The bit argument must be 1 or 0.$"):
        r.execute_command("BITPOS", "b", 2)

def test_keyspace(r):
    r.mset({"a": "1", "b": "2", "c": "3"})
    assert r.exists("a", "b", "a", "zz") == 3
    assert r.type("a") == b"string"
    assert r.type("zz") == b"none"
    assert r.expire("a", 100) is True
    assert r.expire("a", 50, gt=True) is False
    assert r.expire("a", 50, lt=True) is True
    assert r.pexpire("a", 200000, xx=True) is True
    assert r.expire("b", 100, xx=True) is False
    assert r.expire("b", 100, nx=True) is True
    assert r.expireat("c", int(time.time()) + 100) is True
    assert r.pexpireat("c", int(time.time() * 1000) + 100000) is True
    assert 99 <= r.ttl("c") <= 100
    assert r.persist("c") is True
    assert r.ttl("c") == -1
    assert r.ttl("zz") == -2
    assert r.pttl("zz") == -2
    assert sorted(r.keys("*")) == [b"a", b"b", b"c"]
    assert sorted(r.keys("[ab]")) == [b"a", b"b"]
    assert r.delete("a", "zz") == 1
    assert r.unlink("b", "c") == 2
    assert r.keys("*") == []
    r.set("gone", "v", px=1)
    time.sleep(0.01)
    assert r.get("gone") is None
    assert r.exists("gone") == 0


def test_binary_data(r):
    key = bytes(range(256))
    value = bytes(range(255, -1, -1)) * 1000
    assert r.set(key, value) is True
    assert r.get(key) == value
    assert r.strlen(key) == len(value)
    assert r.append(key, b"\r\n\x00") == len(value) + 3
    assert r.getrange(key, -3, -1) == b"\r\n\x00"
    assert r.keys(b"\x00*") == [key]


def test_errors(r):
    r.set("s", "text")
    cases = [
        (("INCR", "s"), "value is not an integer or out of range"),
        (("INCRBYFLOAT", "s", "1"), "value is not a valid float"),
        (("SET", "s", "v", "NX", "XX"), "syntax error"),
        (("SET", "s", "v", "EX", "0"), "invalid expire time in 'set' command"),
        (("GET",), "wrong number of arguments for 'get' command"),
        (("EXPIRE", "s", "10", "NX", "XX"),
         "NX and XX, GT or LT options at the same time are not compatible"),
        (("SETRANGE", "s", "-1", "x"), "offset is out of range"),
        (("NOSUCHCOMMAND", "a"),
         "unknown command 'NOSUCHCOMMAND', with args beginning with: 'a' "),
    ]
    for args, text in cases:
        with pytest.raises(redis.ResponseError) as e:
            r.execute_command(*args)
        assert str(e.value) == text, args
    r.execute_command("SELECT", 0)
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("SETRANGE", "s", "536870912", "x")
    assert str(e.value) == "string exceeds maximum allowed size (proto-max-bulk-len)"


def test_pipeline(r):
    p = r.pipeline(transaction=False)
    for i in range(1000):
        p.set(f"p{i}", i)
    p.incr("p0")
    p.get("p999")
    p.incr("nonint-key-after-set").set("x", "y").incr("x")
    out = p.execute(raise_on_error=False)
    assert out[:1000] == [True] * 1000
    assert out[1000:1004] == [1, b"999", 1, True]
    assert isinstance(out[1004], redis.ResponseError)
    assert r.dbsize() == 1002


def test_auth():
    s = start_strata(["--requirepass", "s3cret"])
    try:
        for proto in (2, 3):
            # No retries: redis-py retries a refused connection with backoff (seconds).
            bad = redis.Redis(host="127.0.0.1", port=s.port, protocol=proto,
                              retry=Retry(NoBackoff(), 0))
            try:
                with pytest.raises(redis.AuthenticationError) as e:
                    bad.get("k")
                assert str(e.value).startswith(
                    "Authentication required." if proto == 2
                    else "HELLO must be called with the client already authenticated")
            finally:
                bad.close()
            wrong = redis.Redis(host="127.0.0.1", port=s.port, password="nope",
                                protocol=proto, retry=Retry(NoBackoff(), 0))
            try:
                with pytest.raises(redis.AuthenticationError):
                    wrong.ping()
            finally:
                wrong.close()
            ok = redis.Redis(host="127.0.0.1", port=s.port, password="s3cret", protocol=proto)
            try:
                assert ok.set("k", "v") is True
                assert ok.get("k") == b"v"
            finally:
                ok.close()
    finally:
        assert s.stop(), "strata serve did not stop within 10 s of SIGTERM"


def resp(*args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


def test_redis_cli_pipe(strata_server, tmp_path):
    if shutil.which("redis-cli") is None:
        pytest.skip("redis-cli not found (apt-get install redis-tools)")
    path = tmp_path / "mass.resp"
    with open(path, "wb") as f:
        for i in range(PIPE_KEYS):
            f.write(resp(b"SET", b"key:%d" % i, b"value:%d" % i))
    port = str(strata_server.port)
    cli = ["redis-cli", "-h", "127.0.0.1", "-p", port]
    subprocess.run(cli + ["FLUSHALL"], check=True, capture_output=True, timeout=60)
    start = time.time()
    with open(path, "rb") as f:
        out = subprocess.run(cli + ["--pipe"], stdin=f, capture_output=True, timeout=600)
    elapsed = time.time() - start
    assert out.returncode == 0, out.stdout + out.stderr
    assert b"errors: 0, replies: %d" % PIPE_KEYS in out.stdout, out.stdout
    print(f"\nredis-cli --pipe: {PIPE_KEYS} keys in {elapsed:.1f} s")
    c = redis.Redis(host="127.0.0.1", port=strata_server.port)
    try:
        assert c.dbsize() == PIPE_KEYS
        for i in range(0, PIPE_KEYS, max(1, PIPE_KEYS // 997)):
            assert c.get(b"key:%d" % i) == b"value:%d" % i
        c.flushall()
    finally:
        c.close()


def test_redis_benchmark(strata_server):
    if shutil.which("redis-benchmark") is None:
        pytest.skip("redis-benchmark not found (apt-get install redis-tools)")
    out = subprocess.run(
        ["redis-benchmark", "-h", "127.0.0.1", "-p", str(strata_server.port), "-t", "set,get",
         "-n", "20000", "-q"],
        capture_output=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert b"SET:" in out.stdout and b"GET:" in out.stdout, out.stdout
