"""Strata's RDB writer against redis-server 7.0.15: a Strata server filled with every type
and encoding size class in several databases (one of them empty, two swapped by SWAPDB),
with expiries, streams with consumer groups and function libraries, is stopped; `strata
export-rdb` writes its dataset as an RDB file; `redis-check-rdb` accepts the file and a
redis-server started on it holds the same dataset, compared key by key (type, contents,
exact expiry, stream groups and consumers, the function libraries).

    cargo build --release -p strata-cli
    python3 -m pytest -q tests/redis/test_rdb_writer.py

Every server is stopped at the end.
"""

import os
import shutil
import subprocess
import tempfile

import pytest

redis = pytest.importorskip("redis")

from conftest import need  # noqa: E402
from servers import STRATA_BIN, start_redis, start_strata  # noqa: E402
from test_replica import FAR_MS, dataset, populate  # noqa: E402

LIBRARY = ("#!lua name=exported\n"
           "redis.register_function('echo', function(keys, args) return args[1] end)")


def extras(port):
    """What `populate` leaves out: strings of every encoding, long lists, binary keys,
    streams without entries, a library; an empty database 1; databases 2 and 5 swapped."""
    c = redis.Redis(port=port, db=0)
    c.set("lzf", "abcdefgh" * 20000)
    c.set("noise", bytes((i * 2654435761 >> 7) % 251 for i in range(5000)))
    c.set("empty", "")
    c.set(b"bin\x00\xffkey", b"\x00\x01\xfe\xff")
    for v in ["127", "-128", "32767", "-32768", "2147483647", "-2147483648", "2147483648",
              "9223372036854775807", "007", "-0", "1e3"]:
        c.set(f"num:{v}", v)
    c.rpush("longlist", *[f"e{i}-" + "x" * (i % 300) for i in range(5000)])
    c.lpush("longlist", *[f"h{i}" for i in range(100)])
    c.ltrim("longlist", 3, -4)
    c.zadd("zspecial", {"top": float("inf"), "bottom": float("-inf"), "zero": 0.0,
                        "pi": 3.141592653589793, "tiny": 5e-324})
    c.xgroup_create("stream:empty", "g", id="$", mkstream=True)
    c.xadd("stream:bare", {"f": "v"}, id="5-5")
    c.xdel("stream:bare", "5-5")
    c.hset("hash:expiring", mapping={"a": 1, "b": 2})
    c.pexpireat("hash:expiring", FAR_MS + 123)
    c.execute_command("FUNCTION", "LOAD", LIBRARY)
    c5 = redis.Redis(port=port, db=5)
    c5.set("in-5", "five", pxat=FAR_MS + 5)
    c5.sadd("set-5", 1, 2, 3)
    c.swapdb(2, 5)


def expiries(port, db):
    c = redis.Redis(port=port, db=db)
    return {k: c.pexpiretime(k) for k in c.scan_iter(count=1000)}


def groups(port, db):
    """Each stream's groups with their consumers (name and pending count)."""
    c = redis.Redis(port=port, db=db)
    out = {}
    for k in c.scan_iter(count=1000, _type="stream"):
        for g in c.xinfo_groups(k):
            consumers = sorted((x["name"], x["pending"]) for x in c.xinfo_consumers(k, g["name"]))
            out[(k, g["name"])] = (g["pending"], g["last-delivered-id"], consumers)
    return out


def libraries(port):
    c = redis.Redis(port=port)
    out = []
    for lib in c.function_list(withcode=True):
        get = (lambda k, lib=lib: lib.get(k, lib.get(k.encode()))) if isinstance(lib, dict) \
            else (lambda k, lib=lib: dict(zip(lib[::2], lib[1::2]))[k.encode()])
        out.append((get("library_name"), get("library_code")))
    return sorted(out)


def snapshot(port):
    return {db: (dataset(port, db), expiries(port, db), groups(port, db)) for db in range(16)}


@pytest.fixture
def workdir():
    d = tempfile.mkdtemp(prefix="strata-export-")
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def export(db_dir, out):
    return subprocess.run([STRATA_BIN, "export-rdb", "--dir", db_dir, out],
                          capture_output=True, text=True, timeout=600)


def test_redis_server_loads_the_exported_dataset(workdir):
    need("redis-server")
    strata = start_strata()
    db_dir = strata.tmpdir
    strata.tmpdir = None  # kept after the stop: the export reads it
    try:
        master = redis.Redis(port=strata.port)
        for db in (0, 2):
            populate(master, db, 3000)
        extras(strata.port)
        want = snapshot(strata.port)
        want_libs = libraries(strata.port)
        assert len(want_libs) == 1 and b"exported" in want_libs[0][1], want_libs
        assert want[1][0] == {} and want[5][0] and want[2][0]
        assert strata.stop(), "strata serve did not stop cleanly"

        out = os.path.join(workdir, "dump.rdb")
        r = export(db_dir, out)
        assert r.returncode == 0, r.stderr
        assert "exported" in r.stderr and "function libraries" in r.stderr, r.stderr
        assert not os.path.exists(out + ".tmp")
        with open(out, "rb") as f:
            assert f.read(9) == b"REDIS0009"

        if shutil.which("redis-check-rdb"):
            check = subprocess.run(["redis-check-rdb", out], capture_output=True, text=True,
                                   timeout=300)
            assert check.returncode == 0 and "RDB looks OK" in check.stdout, check.stdout

        loaded = start_redis(["--dir", workdir, "--dbfilename", "dump.rdb"])
        try:
            got = snapshot(loaded.port)
            for db in range(16):
                w, g = want[db], got[db]
                assert set(g[0]) == set(w[0]), (db, set(g[0]) ^ set(w[0]))
                diff = [k for k in w[0] if w[0][k] != g[0][k]]
                assert not diff, [(k, w[0][k], g[0][k]) for k in diff[:5]]
                assert g[1] == w[1], db
                assert g[2] == w[2], db
            assert libraries(loaded.port) == want_libs
            r = redis.Redis(port=loaded.port)
            assert r.fcall("echo", 0, "hi") == b"hi"
        finally:
            loaded.stop()
    finally:
        strata.stop()
        shutil.rmtree(db_dir, ignore_errors=True)


def test_export_refuses_what_is_not_a_server_database(workdir):
    out = os.path.join(workdir, "x.rdb")
    missing = os.path.join(workdir, "nothing-here")
    r = export(missing, out)
    assert r.returncode == 1 and "no database of `strata serve`" in r.stderr, r.stderr
    assert not os.path.exists(missing) and not os.path.exists(out)
    # A database of `strata put` (not slot-routed) is refused untouched.
    plain = os.path.join(workdir, "plain")
    subprocess.run([STRATA_BIN, "put", "--db", plain, "--shards", "2", "k", "v"], check=True,
                   capture_output=True, timeout=60)
    before = sorted(os.listdir(plain))
    r = export(plain, out)
    assert r.returncode == 1 and "not one `strata serve` created" in r.stderr, r.stderr
    assert sorted(os.listdir(plain)) == before and not os.path.exists(out)
