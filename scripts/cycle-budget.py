#!/usr/bin/env python3
"""Per-operation CPU budget by stage, Strata against RocksDB's db_bench, for 1-thread
fillrandom and readrandom (16-byte keys, 128-byte values, --num keys).

For each side and benchmark: `perf stat -e task-clock` over a run gives the process's CPU
time (the cycle budget in ns: virtual machines often expose no cycle counter); `perf record`
of the same workload gives each symbol's share of it; symbols are put into stages by name
(STAGES below: the benchmark tool's own work, memtable, log, key comparison, block search
with the block cache, filter, allocation, locking and waking, checksums, kernel I/O, copies,
other). RocksDB's side needs a db_bench with symbols (release-db-bench.sh strips its copy:
rebuild it with the same make command and keep the unstripped binary). A stage's cost per operation is the process's
CPU time x its share / operations. The load of readrandom is a separate, untimed
fillrandom with the same seed (db_bench and `strata bench` each load their own database).

    cargo build --release -p strata-cli
    python3 scripts/cycle-budget.py --db-bench "$DB_BENCH" --num 1000000 --dir "$SCRATCH/cyc"

Needs `perf`. Run it on a quiet machine: cycles per operation include cache misses that
other processes' work makes worse.
"""
import argparse, os, re, shutil, subprocess, sys

# (stage, regular expression over the symbol name); first match wins.
STAGES = [
    ("benchmark tool (keys, values, histograms)",
     r"Benchmark::|RandomGenerator|HistogramImpl|HistogramStat|Stats::Finished|strata::bench|hdrhistogram|KeyGen|ValueGen"),
    ("checksum", r"crc32|crc_u64|Crc32c|crc32c"),
    ("memtable", r"SkipList|skiplist|MemTable|memtable|InlineSkipList|MemTableRep|crossbeam_skiplist|crossbeam_epoch"),
    ("key comparison", r"memcmp|Compare|compare_internal|Comparator|cmp::"),
    ("block search", r"Block|block::|BlockIter|IndexBlock|find_block|DataBlockIter|Index::find|BinarySeek|restart|LRUCache|ShardedCache|LRUHandle|BlockCache"),
    ("filter", r"Filter|filter|Bloom|bloom|xorf|fuse|may_contain"),
    ("log", r"LogWriter|log::Writer|log_writer|add_record|WriteBatch|batch|append_group|WalAdd|EmitPhysicalRecord"),
    ("allocation", r"malloc|free|je_|rjem|jemalloc|arena|tcache|operator new|operator delete|sdallocx|realloc|__rust_alloc|__rust_dealloc"),
    ("locking, waking", r"mutex|Mutex|futex|parking_lot|pthread_|condvar|Condvar|lock|Lock|sched|schedule"),
    ("kernel I/O", r"copy_folio|ext4|block_commit|filemap|folio|page|vfs_|ksys_|do_syscall|entry_SYSCALL|__x64_sys|syscall|copy_user|_copy_to_iter|memset"),
    ("copies", r"memmove|memcpy"),
]


def run(cmd, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if p.returncode != 0:
        sys.exit(f"failed ({p.returncode}): {' '.join(cmd)}\n{p.stderr[-2000:]}")
    return p


def cpu_ns_of(cmd):
    """CPU time of the whole process (all threads), in ns: `perf stat -e task-clock`
    (virtual machines often expose no cycle counter, so time stands in for cycles)."""
    p = run(["perf", "stat", "-x", ",", "-e", "task-clock", "--", *cmd])
    for line in p.stderr.splitlines():
        parts = line.split(",")
        if len(parts) > 2 and parts[2].startswith("task-clock"):
            return float(parts[0]) * 1e6  # msec
    sys.exit(f"no task-clock in: {p.stderr[-500:]}")


def shares_of(cmd, data):
    run(["perf", "record", "-F", "1999", "-o", data, "--", *cmd])
    p = run(["perf", "report", "-i", data, "--stdio", "--no-children", "--sort", "sym",
             "--percent-limit", "0.05"])
    out = {}
    for line in p.stdout.splitlines():
        m = re.match(r"\s*([\d.]+)%\s+\[[.k]\]\s+(.*)", line)
        if m:
            out[m.group(2).strip()] = out.get(m.group(2).strip(), 0.0) + float(m.group(1))
    return out


def stage_of(sym):
    for name, pat in STAGES:
        if re.search(pat, sym):
            return name
    return "other"


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--strata", default="target/release/strata")
    ap.add_argument("--db-bench", required=True)
    ap.add_argument("--num", type=int, default=1_000_000)
    ap.add_argument("--dir", default="/tmp/cycle-budget")
    a = ap.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    sdb, rdb = os.path.join(a.dir, "strata"), os.path.join(a.dir, "rocksdb")
    common_r = [f"--num={a.num}", "--key_size=16", "--value_size=128", "--threads=1",
                "--compression_type=none", "--bloom_bits=10", "--cache_size=67108864",
                "--seed=1000", f"--db={rdb}"]
    common_s = ["--num", str(a.num), "--key-size", "16", "--value-size", "128", "--threads",
                "1", "--opt", "block_cache_bytes=67108864", "--seed", "1000", "--db", sdb]
    rows = {}
    for bench in ("fillrandom", "readrandom"):
        for side in ("rocksdb", "strata"):
            d = rdb if side == "rocksdb" else sdb
            shutil.rmtree(d, ignore_errors=True)
            if side == "rocksdb":
                load = [a.db_bench, "--benchmarks=fillrandom", *common_r]
                cmd = [a.db_bench, f"--benchmarks={bench}", *common_r]
                if bench == "readrandom":
                    cmd.append("--use_existing_db=true")
            else:
                load = [a.strata, "bench", "--benchmarks", "fillrandom", *common_s]
                cmd = [a.strata, "bench", "--benchmarks", bench, *common_s]
                if bench == "readrandom":
                    cmd.append("--use-existing-db")
            for _ in range(2):  # once for perf stat, once for perf record
                if bench == "readrandom":
                    shutil.rmtree(d, ignore_errors=True)
                    run(load)
                else:
                    shutil.rmtree(d, ignore_errors=True)
                if _ == 0:
                    total = cpu_ns_of(cmd)
                else:
                    shares = shares_of(cmd, os.path.join(a.dir, f"{side}-{bench}.perf"))
            by = {}
            for sym, pct in shares.items():
                by[stage_of(sym)] = by.get(stage_of(sym), 0.0) + pct
            seen = sum(by.values()) or 100.0
            rows[(bench, side)] = (total / a.num,
                                   {k: total / a.num * v / seen for k, v in by.items()})
            print(f"{bench} {side}: {total / a.num:,.0f} ns of CPU/op", flush=True)
    stages = [s for s, _ in STAGES] + ["other"]
    for bench in ("fillrandom", "readrandom"):
        r_total, r = rows[(bench, "rocksdb")]
        s_total, s = rows[(bench, "strata")]
        print(f"\n### {bench}: CPU ns per operation (whole process, all threads)\n")
        print("| stage | RocksDB | Strata | Strata − RocksDB |")
        print("|---|--:|--:|--:|")
        for st in stages:
            rv, sv = r.get(st, 0.0), s.get(st, 0.0)
            if rv < 1 and sv < 1:
                continue
            print(f"| {st} | {rv:,.0f} | {sv:,.0f} | {sv - rv:+,.0f} |")
        print(f"| **total** | **{r_total:,.0f}** | **{s_total:,.0f}** | {s_total - r_total:+,.0f} |")
    shutil.rmtree(a.dir, ignore_errors=True)


if __name__ == "__main__":
    main()
