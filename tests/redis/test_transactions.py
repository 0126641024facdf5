"""Transactions (MULTI, EXEC, DISCARD, WATCH, UNWATCH) against `strata serve` with redis-py,
over RESP2 and RESP3: pipelines with transaction=True, EXECABORT, errors at run time (no
rollback), WATCH with a second client modifying the key (and expiry, FLUSHDB), CLIENT LIST's
view of a transaction, and atomicity across shards under concurrent clients.

    python3 -m pytest -q tests/redis/test_transactions.py
"""

import threading
import time

import pytest
import redis

from servers import start_strata

# Keys with different hash tags: over 4 shards, some pairs live in different shards.
SPREAD = [f"k{{{t}}}" for t in "abcdefgh"]


@pytest.fixture(scope="module")
def server():
    s = start_strata(["--shards", "4"])
    try:
        yield s
    finally:
        assert s.stop(), "strata serve did not stop within 10 s of SIGTERM"


def client(server, protocol=2):
    return redis.Redis(host="127.0.0.1", port=server.port, protocol=protocol)


@pytest.fixture(params=[2, 3], ids=["resp2", "resp3"])
def r(server, request):
    c = client(server, request.param)
    c.flushall()
    try:
        yield c
    finally:
        c.close()


class Raw:
    """One connection, commands and replies in order (no pool between them)."""

    def __init__(self, r):
        self.pool = r.connection_pool
        self.conn = self.pool.get_connection()

    def __call__(self, *args):
        self.conn.send_command(*args)
        try:
            return self.conn.read_response()
        except redis.ResponseError as e:
            return e

    def close(self):
        self.pool.release(self.conn)


def test_pipeline_transaction(r):
    p = r.pipeline(transaction=True)
    p.set("a", 1).incr("a").get("a").mset({"b": "x", "c": "y"}).mget("a", "b", "c")
    assert p.execute() == [True, 2, b"2", True, [b"2", b"x", b"y"]]
    # An empty transaction.
    assert r.pipeline(transaction=True).execute() == []


def test_queued_replies_and_discard(r):
    c = Raw(r)
    try:
        assert c("MULTI") == b"OK"
        assert c("SET", "a", "1") == b"QUEUED"
        assert c("INCR", "a") == b"QUEUED"
        assert str(c("MULTI")) == "MULTI calls can not be nested"
        assert str(c("WATCH", "a")) == "WATCH inside MULTI is not allowed"
        assert c("DISCARD") == b"OK"
        assert r.get("a") is None
        assert str(c("EXEC")) == "EXEC without MULTI"
        assert str(c("DISCARD")) == "DISCARD without MULTI"
        # Refused commands that do not flag the transaction: EXEC runs the rest.
        assert c("MULTI") == b"OK"
        assert str(c("MULTI")) == "MULTI calls can not be nested"
        assert c("SET", "a", "1") == b"QUEUED"
        assert c("EXEC") == [b"OK"]
    finally:
        c.close()


@pytest.mark.parametrize("bad", [("NOSUCH", "x"), ("GET",), ("SAVE",)])
def test_execabort(r, bad):
    c = Raw(r)
    try:
        assert c("MULTI") == b"OK"
        assert c("SET", "a", "1") == b"QUEUED"
        assert isinstance(c(*bad), redis.ResponseError)
        e = c("EXEC")
        assert str(e) == "Transaction discarded because of previous errors."
        assert e.__class__.__name__ == "ExecAbortError"
        assert r.get("a") is None
        # EXEC with arguments discards the transaction and says why.
        assert c("MULTI") == b"OK"
        assert c("SET", "a", "1") == b"QUEUED"
        assert "because of: wrong number of arguments for 'exec' command" in str(
            c("EXEC", "x"))
        assert str(c("EXEC")) == "EXEC without MULTI"
    finally:
        c.close()
    # redis-py reports the command's own error (it reads EXECABORT, then the queue replies).
    with pytest.raises(redis.ResponseError, match="unknown command"):
        p = r.pipeline(transaction=True)
        p.set("a", 1).execute_command("NOSUCH")
        p.execute()


def test_runtime_errors_do_not_roll_back(r):
    p = r.pipeline(transaction=True)
    p.set("a", "x").incr("a").set("b", 1).incr("b")
    res = p.execute(raise_on_error=False)
    assert res[0] is True and res[2] is True and res[3] == 2
    assert isinstance(res[1], redis.ResponseError)
    assert "not an integer" in str(res[1])
    assert r.mget("a", "b") == [b"x", b"2"]


def test_select_and_flushdb_inside(r):
    r.set("old", 1)
    p = r.pipeline(transaction=True)
    p.set("a", 1).execute_command("SELECT", 2).set("a", 2).execute_command("SELECT", 0)
    p.flushdb().set("c", 3).dbsize().keys("*").get("a")
    res = p.execute()
    assert res[5:] == [True, 1, [b"c"], None]
    r.execute_command("SELECT", 2)  # the pooled connection is in db 0 again after EXEC
    assert r.get("a") == b"2"


def test_watch_unmodified_and_modified(r, server):
    other = client(server)
    try:
        r.set("k", 1)
        with r.pipeline() as p:
            p.watch("k")
            assert p.get("k") == b"1"
            p.multi()
            p.set("k", 2)
            assert p.execute() == [True]
        with r.pipeline() as p:
            p.watch("k")
            other.set("k", 3)
            p.multi()
            p.set("k", 4)
            with pytest.raises(redis.WatchError):
                p.execute()
        assert r.get("k") == b"3"
        # A key of another database with the same name is another key.
        with r.pipeline() as p:
            p.watch("k")
            other.execute_command("SELECT", 5)
            other.set("k", 9)
            p.multi()
            p.set("k", 5)
            assert p.execute() == [True]
        # UNWATCH forgets.
        with r.pipeline() as p:
            p.watch("k")
            other.execute_command("SELECT", 0)
            other.set("k", 6)
            p.unwatch()
            p.multi()
            p.get("k")
            assert p.execute() == [b"6"]
    finally:
        other.close()


def test_watch_own_write_expiry_and_flush(r):
    c = Raw(r)
    try:
        # The watching client's own write counts.
        assert c("SET", "k", "1") == b"OK"
        assert c("WATCH", "k") == b"OK"
        assert c("SET", "k", "2") == b"OK"
        assert c("MULTI") == b"OK"
        assert c("GET", "k") == b"QUEUED"
        assert c("EXEC") is None
        # A watched key that expires.
        assert c("SET", "k", "v", "PX", "50") == b"OK"
        assert c("WATCH", "k") == b"OK"
        time.sleep(0.15)
        assert c("MULTI") == b"OK"
        assert c("EXEC") is None
        # A key already expired when watched: its deletion is no change.
        assert c("SET", "k", "v", "PX", "20") == b"OK"
        time.sleep(0.1)
        assert c("WATCH", "k") == b"OK"
        assert c("GET", "k") is None
        assert c("MULTI") == b"OK"
        assert c("EXEC") == []
        # FLUSHDB: a change of watched keys that exist, not of absent ones.
        assert c("WATCH", "absent") == b"OK"
        assert c("FLUSHDB") == b"OK"
        assert c("MULTI") == b"OK"
        assert c("EXEC") == []
        assert c("SET", "k", "1") == b"OK"
        assert c("WATCH", "k") == b"OK"
        assert c("FLUSHALL") == b"OK"
        assert c("MULTI") == b"OK"
        assert c("EXEC") is None
        # A read and writes that change nothing are no change.
        assert c("SET", "k", "1") == b"OK"
        assert c("WATCH", "k") == b"OK"
        assert c("GET", "k") == b"1"
        assert c("DEL", "nothing") == 0
        assert c("MULTI") == b"OK"
        assert c("EXEC") == []
        # RESET forgets the watched keys.
        assert c("WATCH", "k") == b"OK"
        assert c("SET", "k", "2") == b"OK"
        assert c("RESET") == b"RESET"
        assert c("MULTI") == b"OK"
        assert c("EXEC") == []
    finally:
        c.close()


def test_client_list_shows_the_transaction(r, server):
    other = client(server)
    c = Raw(r)
    try:
        me = c("CLIENT", "ID")
        assert c("WATCH", "k") == b"OK"
        other.set("k", 1)
        assert c("MULTI") == b"OK"
        assert c("SET", "a", "1") == b"QUEUED"
        assert c("GET", "a") == b"QUEUED"
        line = [ln for ln in other.execute_command("CLIENT", "LIST").decode().splitlines()
                if f"id={me} " in ln][0]
        fields = dict(kv.split("=", 1) for kv in line.split(" "))
        assert fields["flags"] == "xd"
        assert fields["multi"] == "2"
        # Redis's count: argument bytes plus 8 per argument.
        assert fields["multi-mem"] == str(5 + 24 + 4 + 16)
        assert c("DISCARD") == b"OK"
        line = [ln for ln in other.execute_command("CLIENT", "LIST").decode().splitlines()
                if f"id={me} " in ln][0]
        fields = dict(kv.split("=", 1) for kv in line.split(" "))
        assert (fields["flags"], fields["multi"], fields["multi-mem"]) == ("N", "-1", "0")
    finally:
        c.close()
        other.close()


def test_resp3_null_and_protocol_switch(server):
    r = client(server, 3)
    c = Raw(r)
    try:
        assert c("SET", "k", "1") == b"OK"
        assert c("WATCH", "k") == b"OK"
        assert c("SET", "k", "2") == b"OK"
        assert c("MULTI") == b"OK"
        assert c("EXEC") is None
        c.conn.send_command("MULTI")
        c.conn.send_command("GET", "k")
        c.conn.send_command("EXEC")
        raw = b""
        sock = c.conn._sock
        deadline = time.time() + 5
        while raw.count(b"\r\n") < 5 and time.time() < deadline:
            raw += sock.recv(4096)
        assert raw == b"+OK\r\n+QUEUED\r\n*1\r\n$1\r\n2\r\n"
    finally:
        c.conn.disconnect()
        r.close()


def test_optimistic_increments_with_watch(server):
    """Two clients increment one counter with WATCH/GET/MULTI/SET/EXEC, retrying on
    WatchError: no increment may be lost."""
    r = client(server)
    r.flushall()
    per = 150
    errors = []

    def worker():
        c = client(server)
        try:
            for _ in range(per):
                while True:
                    try:
                        with c.pipeline() as p:
                            p.watch("counter")
                            n = int(p.get("counter") or 0)
                            p.multi()
                            p.set("counter", n + 1)
                            p.execute()
                            break
                    except redis.WatchError:
                        continue
        except Exception as e:  # noqa: BLE001
            errors.append(e)
        finally:
            c.close()

    ts = [threading.Thread(target=worker) for _ in range(3)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors
    assert int(r.get("counter")) == 3 * per
    r.close()


def test_atomic_across_shards(server):
    """One client rewrites keys of several shards in one transaction in a loop; readers
    (in a transaction, and a plain MGET) never see some of them rewritten and not others."""
    r = client(server)
    r.flushall()
    r.mset({k: 0 for k in SPREAD})
    stop = time.time() + 3
    bad = []
    counts = {"writes": 0, "reads": 0}

    def writer():
        c = client(server)
        n = 0
        while time.time() < stop:
            n += 1
            p = c.pipeline(transaction=True)
            for k in SPREAD:
                p.set(k, n)
            p.execute()
            counts["writes"] += 1
        c.close()

    def incrementer():
        c = client(server)
        while time.time() < stop:
            p = c.pipeline(transaction=True)
            for k in SPREAD[::-1]:
                p.incrby(k, 1000000)
            p.execute()
        c.close()

    def reader(mode):
        c = client(server)
        while time.time() < stop:
            if mode == "multi":
                p = c.pipeline(transaction=True)
                for k in SPREAD:
                    p.get(k)
                vals = p.execute()
            else:
                vals = c.mget(SPREAD)
            counts["reads"] += 1
            if len(set(vals)) != 1:
                bad.append((mode, vals))
                return
        c.close()

    ts = [threading.Thread(target=writer), threading.Thread(target=incrementer),
          threading.Thread(target=reader, args=("multi",)),
          threading.Thread(target=reader, args=("mget",))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not bad, bad[:3]
    assert counts["writes"] > 10 and counts["reads"] > 10
    vals = r.mget(SPREAD)
    assert len(set(vals)) == 1
    r.close()
