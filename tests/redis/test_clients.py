"""Real clients against `strata serve`: redis-py over RESP2 and RESP3 (every implemented
command family, pipelines, AUTH, error replies, binary data), and the redis-cli tools
(`--pipe` mass insertion, redis-benchmark).

    python3 -m pytest -q tests/redis/test_clients.py
"""

import os
import re
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


def test_scan_rename_copy(r):
    keys = {b"user:%d" % i for i in range(500)} | {b"{tag}:%d" % i for i in range(50)}
    with r.pipeline(transaction=False) as p:
        for k in keys:
            p.set(k, "v")
        p.execute()
    assert set(r.scan_iter()) == keys
    assert set(r.scan_iter(match="user:1*", count=7)) == {k for k in keys if k.startswith(b"user:1")}
    assert set(r.scan_iter(_type="string", count=1000)) == keys
    assert list(r.scan_iter(_type="hash")) == []
    cursor, page = r.scan(0, count=5)
    assert cursor != 0 and 1 <= len(page) <= 60
    with pytest.raises(redis.ResponseError, match="^invalid cursor$"):
        r.scan("x")
    with pytest.raises(redis.ResponseError, match="^syntax error$"):
        r.scan(0, count=0)

    r.set("src", "v", ex=100)
    assert r.rename("src", "dst") is True
    assert r.get("src") is None and 99 <= r.ttl("dst") <= 100
    with pytest.raises(redis.ResponseError, match="^no such key$"):
        r.rename("src", "x")
    assert r.renamenx("dst", "user:1") is False
    assert r.renamenx("dst", "moved") is True
    assert r.copy("moved", "copied") is True
    assert r.copy("moved", "copied") is False
    assert 99 <= r.ttl("copied") <= 100
    r.set("moved", "new")
    assert r.copy("moved", "copied", replace=True) is True
    assert r.get("copied") == b"new" and r.ttl("copied") == -1
    assert r.copy("moved", "moved", destination_db=3) is True
    with pytest.raises(redis.ResponseError, match="^source and destination objects are the same$"):
        r.copy("moved", "moved")
    with pytest.raises(redis.ResponseError, match="^DB index is out of range$"):
        r.copy("moved", "x", destination_db=16)
    r.execute_command("SELECT", 3)
    assert r.get("moved") == b"new"
    assert r.randomkey() == b"moved"
    r.execute_command("SELECT", 0)
    assert r.randomkey() in keys | {b"moved", b"copied"}
    assert r.touch("moved", "nokey", "copied") == 2
    r.set("t", "v", pxat=99999999999500)
    assert r.pexpiretime("t") == 99999999999500
    assert r.expiretime("t") == 100000000000
    assert r.expiretime("nokey") == -2 and r.pexpiretime("moved") == -1


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


def test_redis_cli_interactive(strata_server):
    """redis-cli in its interactive mode, on a pseudo-terminal as a person would use it: it
    connects, prints replies in its own formats, and answers `help` from COMMAND DOCS."""
    if shutil.which("redis-cli") is None:
        pytest.skip("redis-cli not found (apt-get install redis-tools)")
    import pty
    import select

    pid, fd = pty.fork()
    if pid == 0:
        # A dumb terminal: line editing without cursor-position queries to answer.
        os.environ["TERM"] = "dumb"
        os.execvp("redis-cli", ["redis-cli", "-h", "127.0.0.1", "-p", str(strata_server.port)])
    out = b""

    def read_until(marker, timeout=20):
        # `out` is what redis-cli printed without its colour escapes (help colours the
        # command name and syntax even on a dumb terminal).
        nonlocal out
        end = time.time() + timeout
        while marker not in out and time.time() < end:
            ready, _, _ = select.select([fd], [], [], 0.2)
            if ready:
                try:
                    out = re.sub(rb"\x1b\[[0-9;]*m", b"", out + os.read(fd, 65536))
                except OSError:
                    break
        return marker in out

    try:
        prompt = b"127.0.0.1:%d>" % strata_server.port
        assert read_until(prompt), out
        for line, want in [
            (b"set cli:k hello", b"OK"),
            (b"get cli:k", b'"hello"'),
            (b"incrby cli:n 41", b"(integer) 41"),
            (b"incr cli:n", b"(integer) 42"),
            (b"mget cli:k cli:none", b"2) (nil)"),
            (b"select 99", b"(error) ERR DB index is out of range"),
            (b"nosuchcommand", b"(error) ERR unknown command 'nosuchcommand'"),
            # redis-cli's help comes from the server's COMMAND DOCS: the syntax line is
            # built from its `arguments` (as redis-cli 7.0.15 prints it against Redis 7.0).
            (b"help get", b"GET key\r"),
            (b"help get", b"since: 1.0.0"),
            (b"help set", b"SET key value [NX|XX] [GET] [EX seconds|PX milliseconds|"
                          b"EXAT unix-time-seconds|PXAT unix-time-milliseconds|KEEPTTL]\r"),
            (b"help mset", b"MSET key value [key value ...]\r"),
            (b"help client kill", b"CLIENT KILL ip:port|[ID client-id]|[TYPE NORMAL|MASTER|"
                                  b"SLAVE|REPLICA|PUBSUB]|[USER username]|[ADDR ip:port]|"
                                  b"[LADDR ip:port]|[SKIPME yes/no] [[ID client-id]|"),
        ]:
            out = b""
            os.write(fd, line + b"\r")
            assert read_until(want), (line, out)
            assert read_until(prompt), (line, out)
        os.write(fd, b"quit\r")
    finally:
        try:
            os.kill(pid, 9)
        except ProcessLookupError:
            pass
        os.waitpid(pid, 0)
        os.close(fd)


def test_redis_benchmark(strata_server):
    if shutil.which("redis-benchmark") is None:
        pytest.skip("redis-benchmark not found (apt-get install redis-tools)")
    out = subprocess.run(
        ["redis-benchmark", "-h", "127.0.0.1", "-p", str(strata_server.port), "-t", "set,get",
         "-n", "20000", "-q"],
        capture_output=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert b"SET:" in out.stdout and b"GET:" in out.stdout, out.stdout


def test_client_list_and_setname(r):
    assert r.client_setname("py-client") is True
    assert r.client_getname() in (b"py-client", "py-client")
    me = r.client_id()
    clients = r.client_list()
    mine = [c for c in clients if int(c["id"]) == me]
    assert len(mine) == 1
    assert mine[0]["name"] == "py-client"
    assert mine[0]["cmd"] == "client|list"
    assert mine[0]["user"] == "default"
    with pytest.raises(redis.ResponseError, match="^Client names cannot contain spaces"):
        r.client_setname("a b")
    assert int(r.client_info()["id"]) == me


def test_client_kill_by_id(strata_server):
    victim = redis.Redis(host="127.0.0.1", port=strata_server.port)
    killer = redis.Redis(host="127.0.0.1", port=strata_server.port)
    try:
        victim_id = victim.client_id()
        assert killer.client_kill_filter(_id=victim_id) == 1
        deadline = time.time() + 5
        while any(int(c["id"]) == victim_id for c in killer.client_list()):
            assert time.time() < deadline, "the killed client is still listed"
            time.sleep(0.02)
        # redis-py reconnects, as it does against Redis: a new connection, a new id.
        assert victim.client_id() != victim_id
    finally:
        victim.close()
        killer.close()


def test_slowlog_get(r):
    r.config_set("slowlog-log-slower-than", 0)
    try:
        r.slowlog_reset()
        r.set("slow", "x" * 200)
        entries = r.slowlog_get(2)
        assert len(entries) == 2
        e = next(e for e in entries if e["command"].startswith(b"SET slow"))
        assert e["command"].endswith(b"... (72 more bytes)")
        assert e["duration"] >= 0 and e["start_time"] > 1_600_000_000
        assert r.slowlog_len() >= 2
    finally:
        r.config_set("slowlog-log-slower-than", 10000)


def test_config_set_get(r):
    assert r.config_get("maxmemory-policy") == {"maxmemory-policy": "noeviction"}
    assert r.config_set("maxmemory-policy", "allkeys-lru") is True
    try:
        assert r.config_get("maxmemory-policy") == {"maxmemory-policy": "allkeys-lru"}
        assert r.config_set("hash-max-ziplist-entries", 100) is True
        assert r.config_get("hash-max-listpack-entries") == {"hash-max-listpack-entries": "100"}
        with pytest.raises(redis.ResponseError, match="must be one of the following"):
            r.config_set("maxmemory-policy", "sometimes")
    finally:
        r.config_set("maxmemory-policy", "noeviction")
        r.config_set("hash-max-ziplist-entries", 512)
    assert r.config_resetstat() is True


def test_object_encoding_and_memory_usage(r):
    r.set("n", 123)
    r.set("s", "short")
    r.set("l", "x" * 100)
    assert r.object("encoding", "n") in (b"int", "int")
    assert r.object("encoding", "s") in (b"embstr", "embstr")
    assert r.object("encoding", "l") in (b"raw", "raw")
    assert r.object("encoding", "missing") is None
    assert r.memory_usage("l") > r.memory_usage("s") > 0
    assert r.memory_usage("missing") is None
    assert r.lastsave() is not None
