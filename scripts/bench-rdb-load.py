#!/usr/bin/env python3
"""Full sync from redis-server into Strata against redis-server's own RDB load of the same
file, alternating, medians over --rounds.

Builds an RDB of --keys keys of mixed types with a scratch redis-server 7.0.15 (DEBUG
POPULATE for the strings, then lists, hashes, sets and sorted sets of --members members
each for one key in --collection-every), SAVEs it, then per round:

  (a) redis-server's load: a redis-server started with that file as its dump, time from the
      start of the process until INFO persistence says `loading:0` (and the keys are there);
  (b) Strata's full sync: a redis-server serving that file as the master, an empty
      `strata serve`, time from `REPLICAOF` until INFO replication says
      `master_link_status:up` (the RDB transferred, checked, loaded and switched in).

Prints a Markdown table of the medians and the ratio; --json FILE writes every run.

    cargo build --release -p strata-cli
    python3 scripts/bench-rdb-load.py --keys 10000000 --rounds 3 --json rdb-load.json
    python3 scripts/bench-rdb-load.py --smoke        # tiny, one round: seconds

Every server runs on 127.0.0.1 on a free port, in a directory of its own under --work
(removed afterwards); every server is stopped at the end.
"""
import argparse, json, os, shutil, statistics, sys, tempfile, time

from benchlib import STRATA, Proc, call, free_port, info, main_guard, redis_server, wait_until


def build_rdb(work, keys, members, every):
    """Writes dump.rdb of `keys` keys under `work`; returns its path."""
    d = os.path.join(work, "build")
    os.makedirs(d)
    srv = redis_server(d)
    try:
        srv.wait_listening()
        colls = keys // every
        call(srv.port, "DEBUG", "POPULATE", keys - colls, "s", 32)
        for i in range(colls):
            kind = i % 4
            m = [f"m{j}" for j in range(members)]
            if kind == 0:
                call(srv.port, "RPUSH", f"l:{i}", *m)
            elif kind == 1:
                call(srv.port, "HSET", f"h:{i}", *[x for j in m for x in (j, j)])
            elif kind == 2:
                call(srv.port, "SADD", f"set:{i}", *m)
            else:
                call(srv.port, "ZADD", f"z:{i}", *[x for j, n in enumerate(m) for x in (j, n)])
        call(srv.port, "SAVE")
    finally:
        srv.stop()
    return os.path.join(d, "dump.rdb")


def redis_load(work, rdb, keys):
    d = tempfile.mkdtemp(dir=work)
    shutil.copy(rdb, os.path.join(d, "dump.rdb"))
    port = free_port()
    started = time.time()
    srv = redis_server(d, port=port)
    try:
        srv.wait_listening()
        wait_until("loading:0", lambda: info(port, "persistence").get("loading") == "0", 3600)
        took = time.time() - started
        assert call(port, "DBSIZE") == keys
        return took
    finally:
        srv.stop()
        shutil.rmtree(d, ignore_errors=True)


def strata_sync(work, rdb, keys):
    md = tempfile.mkdtemp(dir=work)
    sd = tempfile.mkdtemp(dir=work)
    shutil.copy(rdb, os.path.join(md, "dump.rdb"))
    master = redis_server(md)
    sport = free_port()
    strata = Proc([STRATA, "serve", "--bind", "127.0.0.1", "--port", str(sport), "--dir", sd],
                  sport, sd)
    try:
        master.wait_listening()
        wait_until("the master's load", lambda: info(master.port, "persistence").get("loading") == "0", 3600)
        strata.wait_listening()
        started = time.time()
        call(sport, "REPLICAOF", "127.0.0.1", master.port)
        wait_until("master_link_status:up",
                   lambda: info(sport, "replication").get("master_link_status") == "up", 3600)
        took = time.time() - started
        assert call(sport, "DBSIZE") == keys, call(sport, "DBSIZE")
        return took
    finally:
        strata.stop()
        master.stop()
        shutil.rmtree(md, ignore_errors=True)
        shutil.rmtree(sd, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--members", type=int, default=100, help="members per collection")
    ap.add_argument("--collection-every", type=int, default=20,
                    help="one key in this many is a collection")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--work", default=None, help="scratch directory (default: a temporary one)")
    ap.add_argument("--json", default=None)
    ap.add_argument("--smoke", action="store_true", help="tiny sizes, one round")
    a = ap.parse_args()
    if a.smoke:
        a.keys, a.members, a.rounds = 2000, 10, 1
    if not os.path.exists(STRATA):
        sys.exit(f"{STRATA} missing: cargo build --release -p strata-cli")
    work = tempfile.mkdtemp(prefix="bench-rdb-load-", dir=a.work)
    runs = {"redis-server load": [], "strata full sync": []}
    try:
        rdb = build_rdb(work, a.keys, a.members, a.collection_every)
        size = os.path.getsize(rdb)
        for r in range(a.rounds):
            # Alternating, the order swapped each round.
            order = [("redis-server load", redis_load), ("strata full sync", strata_sync)]
            for name, fn in (order if r % 2 == 0 else order[::-1]):
                runs[name].append(fn(work, rdb, a.keys))
                print(f"round {r + 1}: {name}: {runs[name][-1]:.3f} s", file=sys.stderr)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    med = {k: statistics.median(v) for k, v in runs.items()}
    print(f"RDB: {a.keys} keys, {size} bytes; {a.rounds} rounds, medians")
    print()
    print("| run | seconds | keys/s | vs redis-server |")
    print("|---|---|---|---|")
    for k, v in med.items():
        ratio = med["redis-server load"] / v if v else float("nan")
        print(f"| {k} | {v:.3f} | {a.keys / v:,.0f} | {ratio:.2f}x |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"keys": a.keys, "rdb_bytes": size, "runs": runs, "medians": med}, f,
                      indent=1)


if __name__ == "__main__":
    main_guard(main)
