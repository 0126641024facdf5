#!/usr/bin/env python3
"""Replication benchmarks (issue 28's performance targets; docs/benchmarks.md, "Replication
and cluster: to be measured"). Two parts, each alternating its sides over --rounds rounds,
medians and spreads:

  throughput  a master's SET throughput under
                redis-benchmark -t set -P 16 -c 50 -d 128 -r 1000000 -n N
              without a replica and with one replica attached (in sync before the load),
              for Strata master + Strata replica and for the peer, redis-server 7.0.15 with
              `appendonly yes appendfsync everysec` + a redis-server replica (the same
              configuration). With the replica: its lag sampled every 100 ms (INFO replication
              on the replica, then on the master: master_repl_offset minus the replica's
              applied slave_repl_offset, in bytes; also minus the offset the replica last
              acknowledged, from the master's slave0 line), max and p99 over the load, and the
              time from the load's end until the replica applied the master's last offset.
  sync        full sync of --sync-keys keys (`key:%012d`) of --sync-value-size random bytes,
              from REPLICAOF until the replica says master_link_status:up and has applied
              the master's offset, as MB/s of user data (keys + values): Strata -> Strata
              (side `strata`: the snapshot stream between two Strata nodes; side
              `strata-rdb`: the same pair with the replica's `repl-strata-snapshot no`, an
              RDB), and redis-server -> redis-server as the peer; beside fio's sequential read of
              the same filesystem (1 MiB blocks, direct I/O, queue depth 16) in the same run.
              Each master's dataset is loaded once through the server (`redis-cli --pipe`)
              into a directory reused by every round (a stopped master restarted on it);
              every round's replica starts empty. --drop-caches drops the page cache before
              each round (root), so the master reads its files from the device as fio does.

    cargo build --release -p strata-cli
    python3 scripts/bench-repl.py --rounds 3 --json repl.json
    python3 scripts/bench-repl.py --parts sync --sync-keys 10000000 --drop-caches
    python3 scripts/bench-repl.py --smoke           # tiny sizes: proves the script works

Every server listens on 127.0.0.1 on a free port, in a directory under --scratch; every
process is stopped and every directory removed at the end, also on Ctrl-C. The run fails
(message, exit status 1) when a server does not start, a sync or a catch-up does not finish
within its bound, a load or a redis-benchmark run gets an error reply, or a replica ends
with another number of keys than its master.
"""

import argparse
import json
import os
import shutil
import statistics
import sys
import threading
import time

import benchlib as bl
from benchlib import BenchError

# side -> (master kind, replica kind) of benchlib.server_argv.
PAIRS = {"strata": ("strata", "strata"), "redis": ("redis-aof", "redis-aof")}
NAMES = {"strata": "Strata -> Strata",
         "redis": "redis-server -> redis-server (AOF everysec)"}
# The full sync's redis-server master keeps its dataset in dump.rdb (loaded at start, not an
# AOF replayed); its replica is configured as the peer.
SYNC_PAIRS = {"strata": ("strata", "strata"), "strata-rdb": ("strata", "strata"),
              "redis": ("redis-mem", "redis-aof")}
# Replica arguments of a sync side: `strata-rdb` turns the snapshot stream off.
SYNC_REPLICA_EXTRA = {"strata-rdb": ["--repl-strata-snapshot", "no"]}
NAMES["strata-rdb"] = "Strata -> Strata by RDB (repl-strata-snapshot no)"


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def master_extra(a):
    # No wait for more replicas before a diskless transfer (both default to 5 s).
    return ["--repl-diskless-sync", a.repl_diskless_sync, "--repl-diskless-sync-delay", "0"]


def offsets(mc, rc):
    """(master_repl_offset, replica's applied offset, replica's acknowledged offset or
    None): the replica asked first, so master - replica is never below the true lag."""
    r = bl.parse_info(rc.call("INFO", "replication"))
    m = bl.parse_info(mc.call("INFO", "replication"))
    acked = None
    if "slave0" in m:
        fields = dict(kv.split("=", 1) for kv in m["slave0"].split(","))
        acked = int(fields["offset"])
    return int(m["master_repl_offset"]), int(r["slave_repl_offset"]), acked


def in_sync(master_port, replica_port):
    r = bl.info(replica_port, "replication")
    if r.get("master_link_status") != "up":
        return False
    m = bl.info(master_port, "replication")
    if "state=online" not in m.get("slave0", ""):
        return False
    return int(r["slave_repl_offset"]) >= int(m["master_repl_offset"])


def attach(master, replica, timeout):
    """REPLICAOF, then waits until the link is up, the master lists the replica online and
    the replica applied the master's offset; returns the seconds it took."""
    t0 = time.time()
    bl.call(replica.port, "REPLICAOF", "127.0.0.1", master.port)
    try:
        bl.wait_until(f"{replica.name} to sync from {master.name}",
                      lambda: in_sync(master.port, replica.port), timeout, poll=0.01)
    except BenchError:
        if not replica.alive() or not master.alive():
            raise BenchError(f"a server died during the sync:\n{replica.log_tail()}\n"
                             f"{master.log_tail()}")
        raise
    return time.time() - t0


class LagSampler(threading.Thread):
    """Samples (time, master offset, applied offset, acknowledged offset) every `period`
    seconds on connections of its own until stopped."""

    def __init__(self, master_port, replica_port, period=0.1):
        super().__init__(daemon=True)
        self.ports = (master_port, replica_port)
        self.period = period
        self.samples = []
        self.error = None
        self.done = threading.Event()

    def run(self):
        try:
            mc, rc = bl.Conn(self.ports[0], 10), bl.Conn(self.ports[1], 10)
            try:
                while not self.done.is_set():
                    t = time.time()
                    self.samples.append((t,) + offsets(mc, rc))
                    self.done.wait(max(0.0, self.period - (time.time() - t)))
            finally:
                mc.close()
                rc.close()
        except Exception as e:  # reported by stop(): a sampler that failed is a failed run
            self.error = e

    def stop(self):
        self.done.set()
        self.join(timeout=30)
        if self.error:
            raise BenchError(f"sampling INFO replication failed: {self.error!r}")


def sync_full_count(port):
    return int(bl.info(port, "stats").get("sync_full", "0"))


def throughput_run(side, with_replica, a, work):
    mkind, rkind = PAIRS[side]
    mdir = os.path.join(work, f"{side}-master")
    rdir = os.path.join(work, f"{side}-replica")
    os.mkdir(mdir)
    master = replica = sampler = None
    try:
        master = bl.start_server(mkind, mdir, strata=a.strata, extra=master_extra(a))
        if with_replica:
            os.mkdir(rdir)
            replica = bl.start_server(rkind, rdir, strata=a.strata)
            attach(master, replica, a.sync_timeout)
            full0 = sync_full_count(master.port)
            sampler = LagSampler(master.port, replica.port, a.sample_ms / 1000)
            sampler.start()
        pids = [master.pid] + ([replica.pid] if replica else [])
        cpu0 = [bl.cpu_seconds(p) for p in pids]
        t0 = time.time()
        res = bl.redis_benchmark(master.port, ["-t", "set", "-P", 16, "-c", 50, "-d", 128,
                                               "-r", 1000000, "-n", a.n],
                                 timeout=a.bench_timeout)["set"]
        t1 = time.time()
        cpu1 = [bl.cpu_seconds(p) for p in pids]
        out = {"rps": res["rps"], "p50_ms": res["p50_ms"], "p99_ms": res["p99_ms"],
               "seconds": t1 - t0,
               "master_cpu_us_per_req": (cpu1[0] - cpu0[0]) / a.n * 1e6}
        if not with_replica:
            return out
        end = int(bl.info(master.port, "replication")["master_repl_offset"])
        bl.wait_until("the replica to apply the master's last offset after the load",
                      lambda: int(bl.info(replica.port, "replication")["slave_repl_offset"])
                      >= end, a.catchup_timeout, poll=0.01)
        caught = time.time()
        sampler.stop()
        during = [s for s in sampler.samples if t0 <= s[0] <= t1]
        if not during:
            raise BenchError("no lag sample during the load (a load shorter than the period?)")
        lag = [m - applied for _, m, applied, _ in during]
        acked = [m - ack for _, m, _, ack in during if ack is not None]
        out.update({
            "replica_cpu_us_per_req": (cpu1[1] - cpu0[1]) / a.n * 1e6,
            "lag_max_bytes": max(lag), "lag_p99_bytes": bl.percentile(lag, 99),
            "acked_lag_max_bytes": max(acked) if acked else None,
            "catchup_seconds": caught - t1, "samples": len(during),
            "full_syncs_during_load": sync_full_count(master.port) - full0,
            "master_offset": end,
        })
        keys_m, keys_r = bl.call(master.port, "DBSIZE"), bl.call(replica.port, "DBSIZE")
        if keys_m != keys_r:
            raise BenchError(f"{NAMES[side]}: the replica has {keys_r} keys, the master {keys_m}")
        return out
    finally:
        if sampler and sampler.is_alive():
            sampler.done.set()
        for p in (replica, master):
            if p:
                p.stop()
        shutil.rmtree(mdir, ignore_errors=True)
        shutil.rmtree(rdir, ignore_errors=True)


def build_sync_master(side, a, work):
    """Loads the full sync's dataset into a stopped master's directory; returns (dir, user
    bytes)."""
    mkind, _ = SYNC_PAIRS[side]
    d = os.path.join(work, f"sync-{side}-master")
    os.mkdir(d)
    srv = bl.start_server(mkind, d, strata=a.strata)
    try:
        t0 = time.time()
        user = bl.pipe_load(srv.port, a.sync_keys, a.sync_value_size, timeout=a.load_timeout,
                            log_dir=work)
        n = bl.call(srv.port, "DBSIZE")
        if n != a.sync_keys:
            raise BenchError(f"{mkind} holds {n} keys after loading {a.sync_keys}")
        if mkind != "strata":
            bl.call(srv.port, "SAVE", timeout=a.load_timeout)
        log(f"sync dataset for {side}: {a.sync_keys} keys, {user / 1e6:.1f} MB of user data "
            f"loaded in {time.time() - t0:.1f} s")
    finally:
        srv.stop()
    return d, user


def sync_run(side, mdir, a, work):
    mkind, rkind = SYNC_PAIRS[side]
    rdir = os.path.join(work, f"sync-{side}-replica")
    master = replica = None
    try:
        if a.drop_caches:
            bl.drop_page_cache()
        master = bl.start_server(mkind, mdir, strata=a.binaries.get(side, a.strata),
                                 extra=master_extra(a),
                                 timeout=a.sync_timeout)
        bl.wait_until(f"{master.name} to load its dataset",
                      lambda: bl.info(master.port, "persistence").get("loading", "0") == "0",
                      a.sync_timeout, poll=0.05)
        n = bl.call(master.port, "DBSIZE")
        if n != a.sync_keys:
            raise BenchError(f"{master.name} restarted with {n} keys, not {a.sync_keys}")
        os.mkdir(rdir)
        replica = bl.start_server(rkind, rdir, strata=a.binaries.get(side, a.strata),
                                  extra=SYNC_REPLICA_EXTRA.get(side, []))
        took = attach(master, replica, a.sync_timeout)
        if rkind == "strata":
            # The two sides' account of the sync's stages (what the master sent, what the
            # replica received and loaded, and when), for finding which stage bounds it.
            for who, p in (("master", master), ("replica", replica)):
                with open(p.log.name, "rb") as f:
                    for line in f.read().decode(errors="replace").splitlines():
                        if "replication: sent" in line or (
                                who == "replica" and "replication:" in line):
                            log(f"  {side} {who}: {line}")
        n = bl.call(replica.port, "DBSIZE")
        if n != a.sync_keys:
            raise BenchError(f"{NAMES[side]}: the replica has {n} keys after the sync, "
                             f"not {a.sync_keys}")
        return {"seconds": took, "replica_rss_bytes": bl.rss_bytes(replica.pid),
                "replica_dir_bytes": bl.dir_bytes(rdir)}
    finally:
        for p in (replica, master):
            if p:
                p.stop()
        shutil.rmtree(rdir, ignore_errors=True)


def fmt_bytes(n):
    return f"{n / 1e6:,.2f} MB" if n >= 1e6 else f"{n / 1e3:,.1f} kB"


def report_throughput(runs, a, cores):
    print()
    print(f"## Master SET throughput with one replica attached: redis-benchmark -t set -P 16 "
          f"-c 50 -d 128 -r 1000000 -n {a.n}; median (min-max) of {a.rounds} rounds")
    print(f"(the master, its replica and redis-benchmark share this machine's {cores} cores)")
    print()
    print("| master + replica | without replica | with one replica | with/without "
          "| CPU us/SET master (with) | CPU us/SET replica |")
    print("|---|---|---|---|---|---|")
    summary = {}
    for side in a.kinds:
        alone = [r["rps"] for r in runs[side]["alone"]]
        withr = [r["rps"] for r in runs[side]["replica"]]
        ratios = [w / x for w, x in zip(withr, alone)]
        ma, mw, mr = (bl.median_spread(v) for v in (alone, withr, ratios))
        cpu_m = statistics.median(r["master_cpu_us_per_req"] for r in runs[side]["replica"])
        cpu_r = statistics.median(r["replica_cpu_us_per_req"] for r in runs[side]["replica"])
        print(f"| {NAMES[side]} | {ma[0]:,.0f}/s ({ma[1]:,.0f}-{ma[2]:,.0f}) "
              f"| {mw[0]:,.0f}/s ({mw[1]:,.0f}-{mw[2]:,.0f}) "
              f"| {mr[0]:.2f}x ({mr[1]:.2f}-{mr[2]:.2f}) | {cpu_m:.2f} | {cpu_r:.2f} |")
        summary[side] = {"rps_alone": ma[0], "rps_with_replica": mw[0], "ratio": mr[0]}
    print()
    print(f"## The replica's lag during that load (INFO replication every {a.sample_ms} ms); "
          f"median (min-max) of {a.rounds} rounds")
    print()
    print("| master -> replica | max lag | p99 lag | max lag to the acknowledged offset "
          "| catch-up after the load | full resyncs |")
    print("|---|---|---|---|---|---|")
    for side in a.kinds:
        rs = runs[side]["replica"]
        mx, p99, ack, cu = (bl.median_spread([r[k] or 0 for r in rs]) for k in (
            "lag_max_bytes", "lag_p99_bytes", "acked_lag_max_bytes", "catchup_seconds"))
        resyncs = sum(r["full_syncs_during_load"] for r in rs)
        print(f"| {NAMES[side]} | {fmt_bytes(mx[0])} ({fmt_bytes(mx[1])}-{fmt_bytes(mx[2])}) "
              f"| {fmt_bytes(p99[0])} | {fmt_bytes(ack[0])} "
              f"| {cu[0]:.3f} s ({cu[1]:.3f}-{cu[2]:.3f}) | {resyncs} |")
        summary[side].update({"lag_max_bytes": mx[0], "lag_p99_bytes": p99[0],
                              "catchup_seconds": cu[0], "full_resyncs": resyncs})
    return summary


def report_sync(runs, user, a):
    print()
    print(f"## Full sync of {a.sync_keys} keys x {a.sync_value_size} B "
          f"({user / 1e6:,.1f} MB of keys and values), REPLICAOF to link up with the master's "
          f"offset applied; median (min-max) of {a.rounds} rounds; page cache "
          f"{'dropped before each round' if a.drop_caches else 'not dropped'}; "
          f"repl-diskless-sync {a.repl_diskless_sync}")
    print()
    fio = statistics.median(runs["fio"]) / 1e6
    print("| run | seconds | MB/s of user data | vs fio sequential read |")
    print("|---|---|---|---|")
    summary = {"fio_seqread_mb_s": fio}
    for side in a.sync_kinds:
        secs = bl.median_spread([r["seconds"] for r in runs[side]])
        mbs = user / secs[0] / 1e6
        print(f"| {NAMES[side]} | {secs[0]:.2f} ({secs[1]:.2f}-{secs[2]:.2f}) | {mbs:,.1f} "
              f"| {mbs / fio:.2f}x |")
        summary[side] = {"seconds": secs[0], "mb_s": mbs, "vs_fio": mbs / fio}
    lo, hi = min(runs["fio"]) / 1e6, max(runs["fio"]) / 1e6
    print(f"| fio --rw=read --bs=1M --direct=1 --iodepth=16, {a.fio_size_mb} MiB | - "
          f"| {fio:,.1f} ({lo:,.1f}-{hi:,.1f}) | 1.00x |")
    return summary


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--parts", default="throughput,sync", help="throughput, sync or both")
    ap.add_argument("--rounds", type=int, default=None, help="default 3 (1 with --smoke)")
    ap.add_argument("--kinds", default="strata,redis", help="sides of the throughput part")
    ap.add_argument("--sync-kinds", default="strata,redis",
                    help="sides of the sync part: strata, strata-rdb, redis")
    ap.add_argument("--n", type=int, default=5_000_000, help="SETs per throughput run")
    ap.add_argument("--sync-keys", type=int, default=10_000_000)
    ap.add_argument("--sync-value-size", type=int, default=512)
    ap.add_argument("--fio-size-mb", type=int, default=4096)
    ap.add_argument("--drop-caches", action="store_true",
                    help="drop the page cache before each full sync (needs root)")
    ap.add_argument("--repl-diskless-sync", choices=("yes", "no"), default="yes",
                    help="both masters' repl-diskless-sync (yes is both servers' default)")
    ap.add_argument("--sample-ms", type=int, default=100)
    ap.add_argument("--sync-timeout", type=float, default=600,
                    help="bound of a full sync and of a master's restart, seconds")
    ap.add_argument("--catchup-timeout", type=float, default=300)
    ap.add_argument("--bench-timeout", type=float, default=1800)
    ap.add_argument("--load-timeout", type=float, default=3600)
    ap.add_argument("--strata", default=bl.STRATA, help="the strata binary")
    ap.add_argument("--strata-baseline", default=None,
                    help="a second strata binary (an A/B run): each Strata sync side also runs "
                         "with it as side <side>@baseline, master and replica, alternated with "
                         "the first in every round on the same master dataset")
    ap.add_argument("--scratch", default=None,
                    help="parent of the run's directory (default: the system's temp dir); "
                         "the full sync and fio measure this filesystem")
    ap.add_argument("--json", default=None, help="write every run and the medians here")
    ap.add_argument("--smoke", action="store_true", help="tiny sizes: proves the script works")
    a = ap.parse_args()
    if a.smoke:
        a.n, a.sync_keys, a.fio_size_mb = 20_000, 2_000, 64
    if a.rounds is None:
        a.rounds = 1 if a.smoke else 3
    a.parts = a.parts.split(",")
    a.kinds = [k for k in a.kinds.split(",") if k]
    a.sync_kinds = [k for k in a.sync_kinds.split(",") if k]
    for k in a.kinds:
        if k not in PAIRS:
            ap.error(f"unknown side {k!r}: strata or redis")
    for k in a.sync_kinds:
        if k not in SYNC_PAIRS:
            ap.error(f"unknown sync side {k!r}: strata, strata-rdb or redis")
    a.binaries = {}
    if a.strata_baseline:
        for k in list(a.sync_kinds):
            if SYNC_PAIRS[k][0] == "strata":
                b = f"{k}@baseline"
                SYNC_PAIRS[b] = SYNC_PAIRS[k]
                SYNC_REPLICA_EXTRA[b] = SYNC_REPLICA_EXTRA.get(k, [])
                NAMES[b] = f"{NAMES[k]}, baseline binary"
                a.binaries[b] = os.path.abspath(a.strata_baseline)
                a.sync_kinds.append(b)
    env, work = bl.begin_run(a, "bench-repl-")
    out = {"env": env, "throughput": {}, "sync": {}}

    if "throughput" in a.parts:
        runs = {side: {"alone": [], "replica": []} for side in a.kinds}
        for r in range(a.rounds):
            order = a.kinds if r % 2 == 0 else a.kinds[::-1]
            for i, side in enumerate(order):
                modes = [False, True] if (r + i) % 2 == 0 else [True, False]
                for with_replica in modes:
                    res = throughput_run(side, with_replica, a, work)
                    runs[side]["replica" if with_replica else "alone"].append(res)
                    extra = (f", lag max {fmt_bytes(res['lag_max_bytes'])}, catch-up "
                             f"{res['catchup_seconds']:.3f} s" if with_replica else "")
                    log(f"round {r + 1} {side} {'with' if with_replica else 'without'} "
                        f"replica: {res['rps']:,.0f} SET/s{extra}")
        out["throughput"] = {"runs": runs, "summary": report_throughput(runs, a, env["cores"])}

    if "sync" in a.parts:
        masters, user = {}, None
        for side in a.sync_kinds:
            # Sides with the same master kind share its dataset (a master only reads it).
            same = [s for s in masters if SYNC_PAIRS[s][0] == SYNC_PAIRS[side][0]]
            if same:
                masters[side] = masters[same[0]]
                continue
            masters[side], u = build_sync_master(side, a, work)
            if user is not None and u != user:
                raise BenchError("the two sides loaded different datasets")
            user = u
        runs = {side: [] for side in a.sync_kinds}
        runs["fio"] = []
        for r in range(a.rounds):
            order = a.sync_kinds + ["fio"]
            for what in (order if r % 2 == 0 else order[::-1]):
                if what == "fio":
                    if a.drop_caches:
                        bl.drop_page_cache()
                    runs["fio"].append(bl.fio_seq_read(work, a.fio_size_mb << 20))
                    log(f"round {r + 1} fio sequential read: {runs['fio'][-1] / 1e6:,.1f} MB/s")
                else:
                    res = sync_run(what, masters[what], a, work)
                    runs[what].append(res)
                    log(f"round {r + 1} full sync {what}: {res['seconds']:.3f} s")
        out["sync"] = {"user_bytes": user, "runs": runs, "summary": report_sync(runs, user, a)}

    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    bl.main_guard(main)
