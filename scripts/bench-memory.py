#!/usr/bin/env python3
"""Memory benchmarks of the server (docs/benchmarks.md, "Larger than memory"):

  capacity  N keys of 128-byte values (`key:%012d`, the keys redis-benchmark's -r draws) loaded
            into `strata serve --hot-memory 256mb` and into redis-server with `maxmemory
            256mb`; then uniform GETs (`redis-benchmark -t get -r N`) and a 90/10 skewed read
            set; throughput, p99, RSS, and what Redis did with the keys it could not hold.
  per-key   N keys into each server with default settings: RSS and bytes per stored key.

    python3 scripts/bench-memory.py capacity --keys 20000000 [--reads 1000000]
    python3 scripts/bench-memory.py per-key --keys 10000000

The load streams RESP to `redis-cli --pipe` (one connection, no waiting per command): what a
bulk import does. The skewed read set runs two redis-benchmark processes at once for the
same wall time: 45 clients over the hot tenth of the keys (`-r N/10`) and 5 over all of them,
so about nine reads in ten go to the hot tenth; reported is their summed throughput and each
one's p99. RSS is the server process's resident set from /proc.
"""

import argparse
import csv
import io
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time

PORT = 16520
VALUE = b"v" * 128


def wait_port(port, timeout=60):
    end = time.time() + timeout
    while time.time() < end:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {port}")


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def cli(*args):
    out = subprocess.run(["redis-cli", "-p", str(PORT), *args], capture_output=True, text=True)
    return out.stdout.strip()


def info_field(section, name):
    for line in cli("INFO", section).splitlines():
        if line.startswith(name + ":"):
            return line.split(":", 1)[1].strip()
    return None


def start(kind, strata, tmp, extra):
    if kind == "strata":
        argv = [strata, "serve", "--port", str(PORT), "--dir", tmp, "--appendfsync", "everysec"]
    else:
        argv = ["redis-server", "--port", str(PORT), "--dir", tmp, "--save", "",
                "--appendonly", "yes", "--appendfsync", "everysec"]
    p = subprocess.Popen(argv + extra, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_port(PORT)
    return p


def stop(p):
    try:
        cli("SHUTDOWN", "NOSAVE")
    except OSError:
        pass
    try:
        p.wait(timeout=120)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


def load(n):
    """Streams n SETs to redis-cli --pipe; returns (seconds, errors, replies)."""
    t0 = time.time()
    # redis-cli prints every error reply: to a file, or a full pipe would stall the load.
    out_file = tempfile.TemporaryFile()
    pipe = subprocess.Popen(["redis-cli", "-p", str(PORT), "--pipe"], stdin=subprocess.PIPE,
                            stdout=out_file, stderr=subprocess.STDOUT)
    head = b"*3\r\n$3\r\nSET\r\n$16\r\nkey:"
    tail = b"\r\n$128\r\n" + VALUE + b"\r\n"
    chunk = 100_000
    last = t0
    for start_i in range(0, n, chunk):
        buf = b"".join(head + b"%012d" % i + tail for i in range(start_i, min(n, start_i + chunk)))
        pipe.stdin.write(buf)
        if time.time() - last > 30:
            last = time.time()
            print(f"  loaded {start_i + chunk:,} of {n:,} ({(start_i + chunk) / (last - t0):,.0f}/s)",
                  flush=True)
    pipe.stdin.close()
    pipe.wait()
    out_file.seek(0)
    out = out_file.read().decode(errors="replace")
    errors = replies = None
    first_error = next((ln for ln in out.splitlines() if ln.startswith(("ERR", "OOM", "-"))), None)
    if first_error:
        print(f"  first error: {first_error}", flush=True)
    for line in out.splitlines():
        if "errors:" in line and "replies:" in line:
            parts = line.replace(",", "").split()
            errors = int(parts[parts.index("errors:") + 1])
            replies = int(parts[parts.index("replies:") + 1])
    return time.time() - t0, errors, replies


def bench(args):
    """redis-benchmark --csv; returns (requests/s, p99 ms)."""
    out = subprocess.run(["redis-benchmark", "-p", str(PORT), "--csv", *args],
                         capture_output=True, text=True).stdout
    rows = list(csv.reader(io.StringIO(out)))
    head, row = rows[0], rows[-1]
    return float(row[head.index("rps")]), float(row[head.index("p99_latency_ms")])


def skewed(n, reads):
    """Two concurrent redis-benchmarks: 45 clients on the hot tenth, 5 on all keys."""
    res = {}

    def run(name, r, c, count):
        t0 = time.time()
        rps, p99 = bench(["-t", "get", "-r", str(r), "-n", str(count), "-c", str(c), "-d", "128"])
        res[name] = (count, time.time() - t0, rps, p99)

    hot = threading.Thread(target=run, args=("hot", n // 10, 45, reads * 9 // 10))
    cold = threading.Thread(target=run, args=("all", n, 5, reads // 10))
    hot.start()
    cold.start()
    hot.join()
    cold.join()
    total = sum(v[0] for v in res.values()) / max(v[1] for v in res.values())
    return total, res["hot"][3], res["all"][3]


def capacity(a):
    for kind in a.servers.split(","):
        tmp = tempfile.mkdtemp(prefix="strata-mem-")
        extra = ["--hot-memory", "256mb"] if kind == "strata" else ["--maxmemory", "256mb"]
        p = start(kind, a.strata, tmp, extra)
        try:
            secs, errors, replies = load(a.keys)
            size = cli("DBSIZE")
            print(f"{kind}: load {a.keys:,} keys in {secs:.0f} s ({a.keys / secs:,.0f}/s), "
                  f"errors {errors}, replies {replies}, DBSIZE {size}, RSS {rss_mib(p.pid):.0f} MiB",
                  flush=True)
            if kind == "redis":
                print(f"  redis used_memory {info_field('memory', 'used_memory_human')}, "
                      f"maxmemory-policy {cli('CONFIG', 'GET', 'maxmemory-policy').split()[-1]}", flush=True)
            rps, p99 = bench(["-t", "get", "-r", str(a.keys), "-n", str(a.reads), "-c", "50",
                              "-d", "128"])
            print(f"  uniform GET: {rps:,.0f}/s, p99 {p99} ms, RSS {rss_mib(p.pid):.0f} MiB",
                  flush=True)
            total, p99_hot, p99_all = skewed(a.keys, a.reads)
            print(f"  90/10 GET: {total:,.0f}/s, p99 hot {p99_hot} ms, p99 all {p99_all} ms, "
                  f"RSS {rss_mib(p.pid):.0f} MiB", flush=True)
            if kind == "strata":
                fields = ["hot_memory_used", "hot_hits", "hot_misses", "hot_evictions"]
                print("  " + ", ".join(f"{f} {info_field('strata', f)}" for f in fields),
                      flush=True)
            hits, misses = info_field("stats", "keyspace_hits"), info_field("stats", "keyspace_misses")
            print(f"  keyspace_hits {hits}, keyspace_misses {misses}", flush=True)
        finally:
            stop(p)
            shutil.rmtree(tmp, ignore_errors=True)


def per_key(a):
    for kind in a.servers.split(","):
        tmp = tempfile.mkdtemp(prefix="strata-mem-")
        p = start(kind, a.strata, tmp, [])
        try:
            before = rss_mib(p.pid)
            secs, errors, _ = load(a.keys)
            # Let background flushes and compactions settle before reading RSS.
            time.sleep(a.settle)
            after = rss_mib(p.pid)
            print(f"{kind}: {a.keys:,} keys in {secs:.0f} s, errors {errors}, DBSIZE "
                  f"{cli('DBSIZE')}, RSS {before:.0f} -> {after:.0f} MiB, "
                  f"{(after * 2**20) / a.keys:.1f} bytes/key", flush=True)
        finally:
            stop(p)
            shutil.rmtree(tmp, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["capacity", "per-key"])
    ap.add_argument("--keys", type=int, default=20_000_000)
    ap.add_argument("--reads", type=int, default=1_000_000)
    ap.add_argument("--settle", type=float, default=30)
    ap.add_argument("--strata", default="target/release/strata")
    ap.add_argument("--servers", default="strata,redis")
    a = ap.parse_args()
    capacity(a) if a.what == "capacity" else per_key(a)


if __name__ == "__main__":
    main()
