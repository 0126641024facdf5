#!/usr/bin/env python3
"""Redis Cluster benchmarks (issue 29's performance figures; docs/benchmarks.md,
"Replication and cluster: to be measured"). Two parts, each alternating its sides over
--rounds rounds, medians and spreads:

  scaling  redis-benchmark --cluster -t set,get -P 16 -c 50 -d 128 -r 1000000 -n N over
           3 masters made by `redis-cli --cluster create`, against 1 node of the same kind
           in cluster mode holding all 16384 slots, under the same total load (the same
           command without --cluster, which redis-benchmark refuses for one node); for Strata
           and, as the peer, redis-server 7.0.15 with `appendonly yes appendfsync everysec`.
           The nodes share this machine's cores with each other and with redis-benchmark:
           the 3 masters do not get 3 times the CPU of the 1 node, and the output says so.
  reshard  a cluster of two masters (slots 0-8191 on the source, the rest on the target,
           joined by CLUSTER MEET); --keys keys of --value-size random bytes loaded into the
           source's first --slots slots; then
             redis-cli --cluster reshard --cluster-from SRC --cluster-to DST
                       --cluster-slots S --cluster-pipeline P --cluster-yes
           timed, as keys per second: Strata -> Strata, Strata -> redis-server and
           redis-server -> redis-server (the peer) in the same run.

    cargo build --release -p strata-cli
    python3 scripts/bench-cluster.py --rounds 3 --json cluster.json
    python3 scripts/bench-cluster.py --parts reshard --keys 1000000
    python3 scripts/bench-cluster.py --smoke        # tiny sizes: proves the script works

Every node listens on 127.0.0.1 (its bus on port + 10000), in a directory under --scratch;
every process is stopped and every directory removed at the end, also on Ctrl-C. The run
fails (message, exit status 1) when a node does not start, the cluster is not ok within its
bound, a load or a redis-benchmark run gets an error reply, redis-cli --cluster fails, or
the keys are not all on the target after a reshard.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import time

import benchlib as bl
from benchlib import BenchError

# side -> benchlib.server_argv kind: Strata with its WAL synced every second, redis-server
# with AOF synced every second.
KIND = {"strata": "strata", "redis": "redis-aof"}
NAME = {"strata": "Strata", "redis": "redis-server (AOF everysec)"}
SLOTS = 16384


def log(msg):
    print(msg, file=sys.stderr, flush=True)


# --- slots --------------------------------------------------------------------------------

def _crc16_table():
    table = []
    for i in range(256):
        crc = i << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else (crc << 1)
        table.append(crc & 0xFFFF)
    return table


_CRC16 = _crc16_table()


def key_slot(tag):
    """Redis Cluster's slot of a hash tag's content: CRC16-XMODEM mod 16384."""
    crc = 0
    for b in tag:
        crc = ((crc << 8) & 0xFFFF) ^ _CRC16[((crc >> 8) ^ b) & 0xFF]
    return crc % SLOTS


def tags_for_slots(count):
    """One hash tag per slot 0..count-1."""
    tags = [None] * count
    missing, j = count, 0
    while missing:
        t = b"t%d" % j
        s = key_slot(t)
        if s < count and tags[s] is None:
            tags[s] = t
            missing -= 1
        j += 1
    return tags


# --- nodes --------------------------------------------------------------------------------

def start_node(side, work, name, a):
    d = os.path.join(work, name)
    os.mkdir(d)
    return bl.start_server(KIND[side], d, port=bl.free_cluster_port(), strata=a.strata,
                           extra=["--cluster-enabled", "yes",
                                  "--cluster-node-timeout", a.node_timeout_ms])


def nodes_of(port):
    return [l.split() for l in bl.call(port, "CLUSTER", "NODES").strip().splitlines()]


def cluster_ok(nodes, slots_of=None):
    """Every node says cluster_state:ok and sees every node connected (and, given
    `slots_of` {node id: slot ranges text}, agrees on who owns which slots)."""
    for n in nodes:
        if bl.parse_info(bl.call(n.port, "CLUSTER", "INFO")).get("cluster_state") != "ok":
            return False
        view = nodes_of(n.port)
        if len([l for l in view if l[7] == "connected"]) != len(nodes):
            return False
        if slots_of and any(" ".join(l[8:]) != slots_of[l[0]] for l in view):
            return False
    return True


def cli(args, timeout, log_path=None):
    """redis-cli ARGS; BenchError on a non-zero exit or an [ERR] line. Returns the output."""
    argv = ["redis-cli"] + [str(x) for x in args]
    try:
        r = subprocess.run(argv, input="yes\n", capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise BenchError(f"{' '.join(argv)} did not finish within {timeout} s")
    out = r.stdout + r.stderr
    if log_path:
        with open(log_path, "w") as f:
            f.write(out)
    if r.returncode != 0 or "[ERR]" in out:
        raise BenchError(f"{' '.join(argv)} failed (exit {r.returncode}):\n{out[-3000:]}")
    return out


def make_cluster(nodes, a):
    if len(nodes) == 1:
        bl.call(nodes[0].port, "CLUSTER", "ADDSLOTSRANGE", 0, SLOTS - 1)
    else:
        out = cli(["--cluster", "create"] + [f"127.0.0.1:{n.port}" for n in nodes]
                  + ["--cluster-yes"], timeout=a.cluster_timeout)
        if "[OK] All 16384 slots covered." not in out:
            raise BenchError(f"redis-cli --cluster create did not cover every slot:\n{out}")
    bl.wait_until(f"a cluster of {len(nodes)} ok on every node", lambda: cluster_ok(nodes),
                  a.cluster_timeout, poll=0.1)


def stop_all(nodes):
    for n in nodes:
        n.stop()
        shutil.rmtree(n.dir, ignore_errors=True)


# --- scaling ------------------------------------------------------------------------------

def scaling_run(side, masters, a, work):
    nodes = []
    try:
        for i in range(masters):
            nodes.append(start_node(side, work, f"{side}-{masters}m-{i}", a))
        make_cluster(nodes, a)
        cpu0 = [bl.cpu_seconds(n.pid) for n in nodes]
        # redis-benchmark refuses --cluster over one node ("Invalid cluster: 1 node(s)");
        # that node owns every slot, so without --cluster no request is redirected either.
        args = (["--cluster"] if masters > 1 else []) + [
            "-t", "set,get", "-P", 16, "-c", a.clients, "-d", 128, "-r", 1000000, "-n", a.n]
        if a.bench_threads:
            args += ["--threads", a.bench_threads]
        res = bl.redis_benchmark(nodes[0].port, args, timeout=a.bench_timeout)
        cpu = sum(bl.cpu_seconds(n.pid) for n in nodes) - sum(cpu0)
        keys = [bl.call(n.port, "DBSIZE") for n in nodes]
        if not all(keys):
            raise BenchError(f"{side}, {masters} masters: a node got no keys ({keys})")
        for n in nodes:
            if not n.alive():
                raise BenchError(f"{n.name} died during the load:\n{n.log_tail()}")
        return {"set_rps": res["set"]["rps"], "get_rps": res["get"]["rps"],
                "set_p99_ms": res["set"]["p99_ms"], "get_p99_ms": res["get"]["p99_ms"],
                "cpu_us_per_req": cpu / (2 * a.n) * 1e6, "keys_per_node": keys}
    finally:
        stop_all(nodes)


def report_scaling(runs, a, cores):
    print()
    print(f"## Scaling: redis-benchmark --cluster -t set,get -P 16 -c {a.clients} -d 128 "
          f"-r 1000000 -n {a.n}, 3 masters against 1 node holding every slot; median "
          f"(min-max) of {a.rounds} rounds")
    print(f"(the nodes share this machine's {cores} cores with each other and with "
          f"redis-benchmark: 3 masters do not get 3x the CPU of 1 node; the 1 node runs in "
          f"cluster mode and is driven without --cluster, which redis-benchmark refuses "
          f"for one node)")
    print()
    print("| nodes | test | 1 node | 3 masters | 3 masters / 1 node | server CPU us/req, "
          "1 node | 3 masters |")
    print("|---|---|---|---|---|---|---|")
    summary = {}
    for side in a.kinds:
        one, three = runs[side][1], runs[side][3]
        cpu1 = bl.median_spread([r["cpu_us_per_req"] for r in one])[0]
        cpu3 = bl.median_spread([r["cpu_us_per_req"] for r in three])[0]
        for test in ("set", "get"):
            m1 = bl.median_spread([r[f"{test}_rps"] for r in one])
            m3 = bl.median_spread([r[f"{test}_rps"] for r in three])
            ratio = bl.median_spread([x[f"{test}_rps"] / y[f"{test}_rps"]
                                      for x, y in zip(three, one)])
            print(f"| {NAME[side]} | {test.upper()} | {m1[0]:,.0f}/s ({m1[1]:,.0f}-{m1[2]:,.0f}) "
                  f"| {m3[0]:,.0f}/s ({m3[1]:,.0f}-{m3[2]:,.0f}) "
                  f"| {ratio[0]:.2f}x ({ratio[1]:.2f}-{ratio[2]:.2f}) | {cpu1:.2f} | {cpu3:.2f} |")
            summary[f"{side} {test}"] = {"one": m1[0], "three": m3[0], "ratio": ratio[0]}
    return summary


# --- reshard ------------------------------------------------------------------------------

def slot_range(lo, hi):
    """A slot range as CLUSTER NODES prints it ("5" for one slot)."""
    return str(lo) if lo == hi else f"{lo}-{hi}"


def two_masters(src, dst, a):
    """Source owns slots 0-8191, target 8192-16383, joined by MEET; returns their ids."""
    half = SLOTS // 2
    ids = []
    for i, (n, lo, hi) in enumerate(((src, 0, half - 1), (dst, half, SLOTS - 1))):
        bl.call(n.port, "CLUSTER", "ADDSLOTSRANGE", lo, hi)
        bl.call(n.port, "CLUSTER", "SET-CONFIG-EPOCH", i + 1)
        ids.append(bl.call(n.port, "CLUSTER", "MYID"))
    bl.call(src.port, "CLUSTER", "MEET", "127.0.0.1", dst.port)
    owned = {ids[0]: slot_range(0, half - 1), ids[1]: slot_range(half, SLOTS - 1)}
    bl.wait_until("two masters ok, agreeing on the slots",
                  lambda: cluster_ok([src, dst], owned), a.cluster_timeout, poll=0.1)
    return ids


def reshard_run(direction, tags, a, work):
    src_side, dst_side = direction.split("-")
    nodes = []
    try:
        src = start_node(src_side, work, f"reshard-{direction}-src", a)
        nodes.append(src)
        dst = start_node(dst_side, work, f"reshard-{direction}-dst", a)
        nodes.append(dst)
        src_id, dst_id = two_masters(src, dst, a)
        for s in (0, a.slots - 1):
            got = bl.call(src.port, "CLUSTER", "KEYSLOT", b"{%s}" % tags[s])
            if got != s:
                raise BenchError(f"hash tag {tags[s]!r}: slot {got} on the node, {s} here")
        user = bl.pipe_load(src.port, a.keys, a.value_size,
                            key_of=lambda i: b"{%s}:%d" % (tags[i % a.slots], i),
                            timeout=a.load_timeout, log_dir=work)
        n = bl.call(src.port, "DBSIZE")
        if n != a.keys:
            raise BenchError(f"{src.name} holds {n} keys after loading {a.keys}")
        t0 = time.time()
        cli(["--cluster", "reshard", f"127.0.0.1:{src.port}", "--cluster-from", src_id,
             "--cluster-to", dst_id, "--cluster-slots", a.slots, "--cluster-yes",
             "--cluster-pipeline", a.migrate_pipeline, "--cluster-timeout", a.migrate_timeout_ms],
            timeout=a.reshard_timeout, log_path=os.path.join(work, f"reshard-{direction}.log"))
        took = time.time() - t0
        left, moved = bl.call(src.port, "DBSIZE"), bl.call(dst.port, "DBSIZE")
        if left != 0 or moved != a.keys:
            raise BenchError(f"{direction}: after the reshard the source holds {left} keys and "
                             f"the target {moved}, of {a.keys}")
        half = SLOTS // 2
        src_slots = slot_range(a.slots, half - 1) if a.slots < half else ""
        dst_slots = (slot_range(0, SLOTS - 1) if a.slots == half
                     else f"{slot_range(0, a.slots - 1)} {slot_range(half, SLOTS - 1)}")
        owned = {src_id: src_slots, dst_id: dst_slots}
        bl.wait_until("both nodes to agree on the moved slots",
                      lambda: cluster_ok(nodes, owned), a.cluster_timeout, poll=0.1)
        cli(["--cluster", "check", f"127.0.0.1:{src.port}"], timeout=a.cluster_timeout)
        return {"seconds": took, "keys_per_s": a.keys / took, "user_bytes": user}
    finally:
        stop_all(nodes)


def report_reshard(runs, a):
    print()
    print(f"## Reshard: {a.slots} slots holding {a.keys} keys x {a.value_size} B, "
          f"redis-cli --cluster reshard --cluster-pipeline {a.migrate_pipeline}; median "
          f"(min-max) of {a.rounds} rounds")
    print()
    print("| source -> target | seconds | keys/s | vs redis-server -> redis-server |")
    print("|---|---|---|---|")
    base = None
    if "redis-redis" in runs:
        base = bl.median_spread([r["keys_per_s"] for r in runs["redis-redis"]])[0]
    summary = {}
    names = {"strata": "Strata", "redis": "redis-server"}
    for d in a.directions:
        secs = bl.median_spread([r["seconds"] for r in runs[d]])
        kps = bl.median_spread([r["keys_per_s"] for r in runs[d]])
        vs = f"{kps[0] / base:.2f}x" if base else "-"
        s, t = d.split("-")
        print(f"| {names[s]} -> {names[t]} | {secs[0]:.2f} ({secs[1]:.2f}-{secs[2]:.2f}) "
              f"| {kps[0]:,.0f} ({kps[1]:,.0f}-{kps[2]:,.0f}) | {vs} |")
        summary[d] = {"seconds": secs[0], "keys_per_s": kps[0]}
    return summary


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--parts", default="scaling,reshard", help="scaling, reshard or both")
    ap.add_argument("--rounds", type=int, default=None, help="default 3 (1 with --smoke)")
    ap.add_argument("--kinds", default="strata,redis", help="sides of the scaling part")
    ap.add_argument("--n", type=int, default=2_000_000,
                    help="requests per redis-benchmark test (SET, then GET)")
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--bench-threads", type=int, default=0,
                    help="redis-benchmark --threads (0: its default, one thread)")
    ap.add_argument("--directions", default="strata-strata,strata-redis,redis-redis")
    ap.add_argument("--keys", type=int, default=1_000_000, help="keys in the moved slots")
    ap.add_argument("--value-size", type=int, default=128)
    ap.add_argument("--slots", type=int, default=1000, help="slots moved (at most 8192)")
    ap.add_argument("--migrate-pipeline", type=int, default=10,
                    help="redis-cli --cluster-pipeline: keys per MIGRATE (10 is its default)")
    ap.add_argument("--migrate-timeout-ms", type=int, default=60000,
                    help="redis-cli --cluster-timeout (its default)")
    ap.add_argument("--node-timeout-ms", type=int, default=15000,
                    help="cluster-node-timeout of every node (both servers' default)")
    ap.add_argument("--cluster-timeout", type=float, default=120,
                    help="bound of a cluster becoming ok and of create/check, seconds")
    ap.add_argument("--reshard-timeout", type=float, default=3600)
    ap.add_argument("--bench-timeout", type=float, default=1800)
    ap.add_argument("--load-timeout", type=float, default=3600)
    ap.add_argument("--strata", default=bl.STRATA, help="the strata binary")
    ap.add_argument("--scratch", default=None,
                    help="parent of the run's directory (default: the system's temp dir)")
    ap.add_argument("--json", default=None, help="write every run and the medians here")
    ap.add_argument("--smoke", action="store_true", help="tiny sizes: proves the script works")
    a = ap.parse_args()
    if a.smoke:
        a.n, a.keys, a.slots = 20_000, 2_000, 20
    if a.rounds is None:
        a.rounds = 1 if a.smoke else 3
    a.parts = a.parts.split(",")
    a.kinds = [k for k in a.kinds.split(",") if k]
    a.directions = [d for d in a.directions.split(",") if d]
    for k in a.kinds:
        if k not in KIND:
            ap.error(f"unknown side {k!r}: strata or redis")
    for d in a.directions:
        if len(d.split("-")) != 2 or any(s not in KIND for s in d.split("-")):
            ap.error(f"bad direction {d!r}: SOURCE-TARGET of strata and redis")
    if not 0 < a.slots <= SLOTS // 2:
        ap.error("--slots must be within 1..8192")
    env, work = bl.begin_run(a, "bench-cluster-")
    out = {"env": env, "scaling": {}, "reshard": {}}

    if "scaling" in a.parts:
        runs = {side: {1: [], 3: []} for side in a.kinds}
        for r in range(a.rounds):
            order = a.kinds if r % 2 == 0 else a.kinds[::-1]
            for i, side in enumerate(order):
                for masters in ([1, 3] if (r + i) % 2 == 0 else [3, 1]):
                    res = scaling_run(side, masters, a, work)
                    runs[side][masters].append(res)
                    log(f"round {r + 1} {side} {masters} node(s): SET {res['set_rps']:,.0f}/s, "
                        f"GET {res['get_rps']:,.0f}/s")
        out["scaling"] = {"runs": runs, "summary": report_scaling(runs, a, env["cores"])}

    if "reshard" in a.parts:
        tags = tags_for_slots(a.slots)
        runs = {d: [] for d in a.directions}
        for r in range(a.rounds):
            for d in (a.directions if r % 2 == 0 else a.directions[::-1]):
                res = reshard_run(d, tags, a, work)
                runs[d].append(res)
                log(f"round {r + 1} reshard {d}: {res['seconds']:.3f} s, "
                    f"{res['keys_per_s']:,.0f} keys/s")
        out["reshard"] = {"runs": runs, "summary": report_reshard(runs, a)}

    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    bl.main_guard(main)
