#!/usr/bin/env python3
"""Runs RocksDB's db_bench and `strata bench` on the same workloads, alternating A B A B for
--rounds rounds, and prints per-workload medians (ops/s), spreads and the Strata/RocksDB ratio.

Both tools get the same num, key/value sizes, threads, cache, bloom bits (Strata's filter is a
binary fuse filter at ~9 bits/key), compression off, WAL on without sync.

    python3 scripts/compare-dbbench.py --num 1000000 --rounds 3 \
        --benchmarks fillseq,fillrandom,overwrite,readrandom,readseq,seekrandom

Needs `db_bench` (Debian: apt-get install rocksdb-tools) and a release build of strata
(cargo build --release -p strata-cli).
"""
import argparse, os, re, shutil, statistics, subprocess, sys, tempfile

LINE = re.compile(r"^(\w+)\s*:\s*([\d.]+) micros/op\s+(\d+) ops/sec")


def run(cmd):
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"command failed ({out.returncode}): {' '.join(cmd)}\n{out.stderr[-2000:]}")
    res = {}
    for line in out.stdout.splitlines():
        m = LINE.match(line.strip())
        if m:
            res[m.group(1)] = int(m.group(3))
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--num", type=int, default=1_000_000)
    ap.add_argument("--key-size", type=int, default=16)
    ap.add_argument("--value-size", type=int, default=128)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--cache-bytes", type=int, default=8 << 20)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--benchmarks", default="fillrandom,readrandom")
    ap.add_argument("--strata", default="target/release/strata")
    ap.add_argument("--db-bench", default="db_bench")
    ap.add_argument("--dir", default=None, help="where the databases live (default: a temp dir)")
    a = ap.parse_args()
    base = a.dir or tempfile.mkdtemp(prefix="strata-cmp-")
    rdir, sdir = os.path.join(base, "rocksdb"), os.path.join(base, "strata")
    rocks = [a.db_bench, f"--benchmarks={a.benchmarks}", f"--num={a.num}",
             f"--key_size={a.key_size}", f"--value_size={a.value_size}", f"--threads={a.threads}",
             "--compression_type=none", "--bloom_bits=10", f"--cache_size={a.cache_bytes}",
             "--sync=false", "--disable_wal=false", f"--db={rdir}"]
    strata = [a.strata, "bench", "--benchmarks", a.benchmarks, "--num", str(a.num),
              "--key-size", str(a.key_size), "--value-size", str(a.value_size),
              "--threads", str(a.threads), "--opt", f"block_cache_bytes={a.cache_bytes}",
              "--db", sdir]
    print("rocksdb:", " ".join(rocks))
    print("strata: ", " ".join(strata))
    results = {"rocksdb": [], "strata": []}
    for r in range(a.rounds):
        for name, cmd, d in (("rocksdb", rocks, rdir), ("strata", strata, sdir)):
            shutil.rmtree(d, ignore_errors=True)
            res = run(cmd)
            results[name].append(res)
            print(f"round {r + 1} {name:8s} " + " ".join(f"{k}={v}" for k, v in res.items()),
                  flush=True)
        shutil.rmtree(rdir, ignore_errors=True)
        shutil.rmtree(sdir, ignore_errors=True)
    print()
    print(f"| workload | RocksDB ops/s (median, min-max) | Strata ops/s (median, min-max) | Strata / RocksDB |")
    print("|---|---|---|---|")
    for b in a.benchmarks.split(","):
        rv = [x[b] for x in results["rocksdb"] if b in x]
        sv = [x[b] for x in results["strata"] if b in x]
        if not rv or not sv:
            continue
        rm, sm = statistics.median(rv), statistics.median(sv)
        print(f"| {b} | {rm:,.0f} ({min(rv):,}-{max(rv):,}) | {sm:,.0f} ({min(sv):,}-{max(sv):,}) | {sm / rm:.2f}x |")
    if not a.dir:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
