#!/usr/bin/env python3
"""The server benchmark (docs/benchmarks.md, "Redis-compatible server"): redis-benchmark
against redis-server with AOF (appendfsync everysec), redis-server in memory (the ceiling) and
`strata serve` (appendfsync everysec), one server at a time, alternating, several rounds;
prints medians, ratios to Redis-with-AOF, and server CPU microseconds per request.

    python3 scripts/bench-server.py [--rounds 3] [--n 200000] [--mset-n 20000] \
        [--strata target/release/strata] [--json out.json]
    # The data types (lists, sets, hashes, sorted sets), pipeline depth 1, no MSET:
    python3 scripts/bench-server.py --tests lpush,rpush,lpop,rpop,sadd,hset,spop,zadd,lrange_100 \
        --pipelines 1 --mset-n 0
    # A Lua script (GET + INCRBY + EXPIRE of one key) run by EVALSHA, 1M requests:
    python3 scripts/bench-server.py --evalsha --n 1000000 --mset-n 0 --kinds redis-aof,strata

Each server starts on an empty directory for each (round, pipeline depth), so every run
loads the same data. CPU per request is the server process's user+system time over the run
(from /proc/<pid>/stat) divided by the requests.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import tempfile

from benchlib import cpu_seconds, main_guard, redis_benchmark, start_server

TESTS = ["set", "get", "incr"]
PORT = 16510
# The script of the EVALSHA benchmark: a read, a read-modify-write and a TTL on one key.
EVALSHA_SCRIPT = ("local v = redis.call('GET', KEYS[1]) "
                  "redis.call('INCRBY', KEYS[1], ARGV[1]) "
                  "redis.call('EXPIRE', KEYS[1], 3600) return v")


def start(kind, strata, tmp):
    return start_server(kind, tmp, port=PORT, strata=strata)


def stop(p):
    try:
        subprocess.run(["redis-cli", "-p", str(PORT), "shutdown", "nosave"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=30)
    except subprocess.TimeoutExpired:
        pass
    p.stop()


def bench(tests, n, pipeline):
    argv = ["-n", n, "-r", "1000000", "-d", "128", "-c", "50", "-P", pipeline]
    if tests == ["evalsha"]:
        sha = subprocess.run(["redis-cli", "-p", str(PORT), "script", "load", EVALSHA_SCRIPT],
                             capture_output=True, text=True, check=True).stdout.strip()
        argv += ["evalsha", sha, "1", "key:__rand_int__", "1"]
    else:
        argv += ["-t", ",".join(tests)]
    res = redis_benchmark(PORT, argv)
    if tests == ["evalsha"]:
        # redis-benchmark names a custom command by its whole line
        res = {"evalsha": next(iter(res.values()))}
    return res


def run_one(kind, strata, pipeline, n, mset_n):
    # The server's directory inside one removed afterwards with the log beside it.
    parent = tempfile.mkdtemp(prefix=f"bench-{kind}-")
    tmp = os.path.join(parent, "data")
    os.mkdir(tmp)
    p = None
    try:
        p = start(kind, strata, tmp)
        c0 = cpu_seconds(p.pid)
        res = bench(TESTS, n, pipeline)
        c1 = cpu_seconds(p.pid)
        for t in TESTS:
            res[t]["cpu_us_per_req"] = None
        # CPU over the three single-key tests, per request.
        cpu = (c1 - c0) / (n * len(TESTS)) * 1e6
        for t in TESTS:
            res[t]["cpu_us_per_req"] = cpu
        if mset_n == 0:
            return res
        c0 = cpu_seconds(p.pid)
        m = bench(["mset"], mset_n, pipeline)
        c1 = cpu_seconds(p.pid)
        for k, v in m.items():
            v["cpu_us_per_req"] = (c1 - c0) / mset_n * 1e6
            res[k] = v
        return res
    finally:
        if p:
            stop(p)
        shutil.rmtree(parent, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--n", type=int, default=200000)
    ap.add_argument("--mset-n", type=int, default=20000)
    ap.add_argument("--strata", default="target/release/strata")
    ap.add_argument("--json")
    ap.add_argument("--tests", default=",".join(TESTS),
                    help="redis-benchmark tests measured together (CPU per request over all)")
    ap.add_argument("--pipelines", default="1,16")
    ap.add_argument("--evalsha", action="store_true",
                    help="benchmark EVALSHA of EVALSHA_SCRIPT instead of --tests")
    ap.add_argument("--kinds", default="redis-aof,strata,redis-mem",
                    help="servers measured (redis-aof and strata at least: the ratio)")
    a = ap.parse_args()
    TESTS[:] = ["evalsha"] if a.evalsha else a.tests.split(",")
    pipelines = [int(x) for x in a.pipelines.split(",")]
    kinds = a.kinds.split(",")
    runs = {}  # (kind, P) -> [results]
    for r in range(a.rounds):
        for pipeline in pipelines:
            order = kinds if r % 2 == 0 else list(reversed(kinds))
            for kind in order:
                res = run_one(kind, a.strata, pipeline, a.n, a.mset_n)
                runs.setdefault(f"{kind} P{pipeline}", []).append(res)
                print(f"round {r + 1} P{pipeline} {kind}: " + ", ".join(
                    f"{t} {v['rps']:.0f}/s" for t, v in res.items()), flush=True)
    print()
    print("| test | Redis + AOF | Strata | ratio | Redis in memory | CPU µs/req Redis+AOF | CPU µs/req Strata |")
    print("|---|---|---|---|---|---|---|")
    summary = {}
    for pipeline in pipelines:
        for t in TESTS + (["mset"] if a.mset_n else []):
            med = {}
            for kind in kinds:
                rs = runs[f"{kind} P{pipeline}"]
                med[kind] = (statistics.median(x[t]["rps"] for x in rs),
                             statistics.median(x[t]["cpu_us_per_req"] for x in rs))
            ratio = med["strata"][0] / med["redis-aof"][0]
            summary[f"{t} P{pipeline}"] = {k: {"rps": v[0], "cpu_us": v[1]} for k, v in med.items()}
            summary[f"{t} P{pipeline}"]["ratio"] = ratio
            mem = f"{med['redis-mem'][0]:,.0f}/s" if "redis-mem" in med else "-"
            print(f"| {t.upper()}, P{pipeline} | {med['redis-aof'][0]:,.0f}/s | {med['strata'][0]:,.0f}/s "
                  f"| {ratio:.2f}x | {mem} | {med['redis-aof'][1]:.1f} | {med['strata'][1]:.1f} |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"runs": runs, "summary": summary}, f, indent=1)


if __name__ == "__main__":
    main_guard(main)
