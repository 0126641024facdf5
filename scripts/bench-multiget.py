#!/usr/bin/env python3
"""Batched point reads (MultiGet) with direct I/O, against RocksDB and fio, in one run.

Loads (with --load) --num keys of 1 KiB values into Strata and RocksDB (fillrandom, then a
full compaction), then alternates for --rounds rounds, with an 8 MiB block cache and O_DIRECT:

  strata readrandom                       (one key at a time: queue depth 1)
  strata multireadrandom, batch 32        on io_uring, on the thread pool, and sync
  strata multireadrandom, batch 32, --pipeline 32 (32 batches per multi_get_batches call,
                                          at most 32 reads in flight across them; io_uring)
  (with --strata-before) the same io_uring case run by an older binary, for before/after
  rocksdb multireadrandom --batch_size=32 --multiread_batched=true --use_direct_reads=true
  rocksdb readrandom --use_direct_reads=true
  fio 4 KiB random reads, O_DIRECT: io_uring at queue depth 32, psync at depth 1

and prints medians, spreads and the ratios: multireadrandom on io_uring against strata
readrandom and against RocksDB's batched MultiGet, and strata's device reads per second
as a share of fio's at queue depth 32. With --cached it measures
instead the fully cached case: a --num key set smaller than the block cache, readrandom and
multireadrandom alternating 14 times in one process (the first 2 pairs warm the cache and
are dropped), and prints the pairwise multireadrandom/readrandom ratios. Strata's reads per second are
its keys per second times the reads per key counted by its stats (one `stats` run at the end).

    cargo build --release -p strata-cli
    python3 scripts/bench-multiget.py --dir /path/on/the/ssd --num 1000000 --load --rounds 5

Needs `db_bench` (apt-get install rocksdb-tools) and `fio` (apt-get install fio).
"""
import argparse, json, os, re, shutil, statistics, subprocess, sys

LINE = re.compile(r"^(\w+)\s*:\s*([\d.]+) micros/op\s+(\d+) ops/sec")


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"command failed ({p.returncode}): {' '.join(cmd)}\n{p.stderr[-2000:]}")
    return p.stdout


def ops(out, name):
    for line in out.splitlines():
        m = LINE.match(line.strip())
        if m and m.group(1) == name:
            return int(m.group(3))
    sys.exit(f"no {name} result in:\n{out[-2000:]}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True, help="directory on the device to measure")
    ap.add_argument("--num", type=int, default=1_000_000)
    ap.add_argument("--value-size", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--load", action="store_true", help="(re)load both databases first")
    ap.add_argument("--strata", default="target/release/strata")
    ap.add_argument("--strata-before", metavar="PATH",
                    help="an older strata binary whose multireadrandom on io_uring runs "
                         "alternating with the others, for a before/after comparison")
    ap.add_argument("--pipeline", type=int, default=32,
                    help="batches per call in the pipelined case (0: leave it out)")
    ap.add_argument("--cache-bytes", type=int, default=8 << 20)
    ap.add_argument("--single-reads", type=int, default=40_000)
    ap.add_argument("--multi-reads", type=int, default=300_000)
    ap.add_argument("--cached", action="store_true", help="fully cached comparison instead")
    ap.add_argument("--strata-opt", action="append", default=[], metavar="NAME=VALUE",
                    help="engine option for Strata's load and reads (repeatable), e.g. "
                         "block_align=true")
    a = ap.parse_args()
    if a.cached:
        return cached(a)
    sdb, rdb, fio_file = (os.path.join(a.dir, n) for n in ("strata", "rocks", "fio.dat"))
    common = ["--num", str(a.num), "--value-size", str(a.value_size)]
    for o in a.strata_opt:
        common += ["--opt", o]
    rcommon = [f"--num={a.num}", "--key_size=16", f"--value_size={a.value_size}",
               "--compression_type=none", "--bloom_bits=10", f"--cache_size={a.cache_bytes}",
               "--threads=1"]
    if a.load:
        for d in (sdb, rdb):
            shutil.rmtree(d, ignore_errors=True)
        print(run([a.strata, "bench", "--db", sdb, "--keep", "--benchmarks",
                   "fillrandom,compact", *common]).strip().splitlines()[-1])
        run(["db_bench", "--benchmarks=fillrandom,compact", f"--db={rdb}",
             "--use_existing_db=0", *rcommon])

    def strata(bench, reads, *opts, binary=None, extra=()):
        cmd = [binary or a.strata, "bench", "--db", sdb, "--use-existing-db", "--seed", "3",
               "--benchmarks", bench, "--reads", str(reads), "--batch-size", "32", *common,
               "--opt", "direct_io=true", "--opt", f"block_cache_bytes={a.cache_bytes}"]
        for o in opts:
            cmd += ["--opt", o]
        return cmd + list(extra)

    def rocks(bench, reads, *extra):
        return ["db_bench", f"--benchmarks={bench}", f"--db={rdb}", "--use_existing_db=1",
                f"--reads={reads}", "--use_direct_reads=true", *rcommon, *extra]

    def fio(name, engine, depth):
        return ["fio", f"--name={name}", f"--filename={fio_file}", "--size=2G", "--bs=4k",
                "--rw=randread", "--direct=1", f"--ioengine={engine}", f"--iodepth={depth}",
                "--runtime=8", "--time_based", "--output-format=json"]

    cases = {
        "strata readrandom": (strata("readrandom", a.single_reads), "readrandom"),
        "strata multireadrandom io_uring": (
            strata("multireadrandom", a.multi_reads, "io_backend=io_uring"), "multireadrandom"),
        **({"strata multireadrandom io_uring pipelined": (
            strata("multireadrandom", a.multi_reads, "io_backend=io_uring",
                   extra=("--pipeline", str(a.pipeline))), "multireadrandom")}
           if a.pipeline > 0 else {}),
        **({"before: strata multireadrandom io_uring": (
            strata("multireadrandom", a.multi_reads, "io_backend=io_uring",
                   binary=a.strata_before), "multireadrandom")}
           if a.strata_before else {}),
        "strata multireadrandom threads": (
            strata("multireadrandom", a.multi_reads * 2 // 3, "io_backend=threads"),
            "multireadrandom"),
        "strata multireadrandom sync": (
            strata("multireadrandom", a.single_reads, "io_backend=sync"), "multireadrandom"),
        "rocksdb multireadrandom batched": (
            rocks("multireadrandom", a.multi_reads // 3, "--batch_size=32",
                  "--multiread_batched=true"), "multireadrandom"),
        "rocksdb readrandom": (rocks("readrandom", a.single_reads), "readrandom"),
    }
    fios = {"fio randread 4k qd32 io_uring": ("rr32", "io_uring", 32),
            "fio randread 4k qd1 psync": ("rr1", "psync", 1)}
    res = {k: [] for k in list(cases) + list(fios)}
    run(["fio", "--name=prep", f"--filename={fio_file}", "--size=2G", "--bs=1M", "--rw=write",
         "--direct=1", "--ioengine=libaio", "--iodepth=8", "--output-format=json"])
    for r in range(a.rounds):
        for k, (cmd, name) in cases.items():
            res[k].append(ops(run(cmd), name))
            print(f"round {r} {k}: {res[k][-1]}", flush=True)
        for k, (n, e, d) in fios.items():
            res[k].append(int(json.loads(run(fio(n, e, d)))["jobs"][0]["read"]["iops"]))
            print(f"round {r} {k}: {res[k][-1]}", flush=True)
    # Reads per key of multireadrandom, from the engine's counters.
    out = run(strata("multireadrandom,stats", 32_000, "io_backend=io_uring"))
    m = re.search(r"Batched reads: .*?\((\d+) keys\); (\d+) reads", out)
    per_key = int(m.group(2)) / int(m.group(1)) if m else float("nan")
    med = {k: statistics.median(v) for k, v in res.items()}
    print("\n| case | median ops/s | min–max |\n|---|---|---|")
    for k, v in res.items():
        print(f"| {k} | {med[k]:,.0f} | {min(v):,}–{max(v):,} |")
    mu = med["strata multireadrandom io_uring"]
    print(f"\nreads per key (multireadrandom): {per_key:.3f}")
    print(f"multireadrandom io_uring / strata readrandom: {mu / med['strata readrandom']:.2f}x")
    print(f"multireadrandom io_uring / rocksdb multireadrandom: "
          f"{mu / med['rocksdb multireadrandom batched']:.2f}x")
    fio32 = med["fio randread 4k qd32 io_uring"]
    for k in res:
        if k.startswith(("strata multireadrandom io_uring", "before: ")):
            print(f"{k}: reads/s {med[k] * per_key:,.0f} = "
                  f"{100 * med[k] * per_key / fio32:.0f}% of fio qd32")
    print(json.dumps(res))


def cached(a):
    db = os.path.join(a.dir, "strata-cached")
    common = ["--num", str(a.num), "--value-size", str(a.value_size)]
    if a.load:
        shutil.rmtree(db, ignore_errors=True)
        run([a.strata, "bench", "--db", db, "--keep", "--benchmarks", "fillrandom,compact",
             *common])
    benches = ",".join(["readrandom,multireadrandom"] * 14)
    out = run([a.strata, "bench", "--db", db, "--use-existing-db", "--seed", "3",
               "--benchmarks", benches + ",stats", "--reads", "200000", *common,
               "--opt", "direct_io=true", "--opt", "block_cache_bytes=536870912"])
    res = {"readrandom": [], "multireadrandom": []}
    for line in out.splitlines():
        m = LINE.match(line.strip())
        if m and m.group(1) in res:
            res[m.group(1)].append(int(m.group(3)))
    g, mg = res["readrandom"][2:], res["multireadrandom"][2:]
    ratios = [b / x for x, b in zip(g, mg)]
    print(f"readrandom      median {statistics.median(g):,.0f} ops/s {g}")
    print(f"multireadrandom median {statistics.median(mg):,.0f} ops/s {mg}")
    print(f"pairwise multi/single: median {statistics.median(ratios):.3f} "
          f"{['%.2f' % r for r in ratios]}")
    m = re.search(r"Batched reads: .*", out)
    print(m.group(0) if m else "")


if __name__ == "__main__":
    main()
