#!/usr/bin/env python3
"""Key-value separation benchmarks: Strata (value log on) vs RocksDB db_bench in one run,
alternating A B A B, medians over --rounds, with device write amplification from the kernel's
I/O accounting (write_bytes of the reaped benchmark process) and space on disk.

    python3 scripts/bench-vlog.py --gb 1 --rounds 3 --out /tmp/vlog-bench.md

Workloads (16-byte keys, random incompressible values, compression off, 64 MiB block cache,
WAL (Strata: value log) on without sync):
  load1k   fillrandom, 1 KiB values, --gb of user data
  load4k   fillrandom, 4 KiB values, --gb of user data (+ fio sequential write bandwidth)
  read1k   readrandom on a 1 KiB fillrandom set (page cache warm)
  read1k-direct  the same with direct I/O (Strata: tables and value log; RocksDB:
           use_direct_reads)
  scan1k   seekrandom with 100 nexts on the same databases
  gc1k     Strata only: fillrandom then 3 overwrites of the whole set, GC on vs off:
           throughput per phase, space amplification at the end (bytes on disk / user bytes)

Needs db_bench (apt-get install rocksdb-tools), fio, and a release build of strata.
"""
import argparse, os, re, shutil, statistics, subprocess, sys, tempfile

LINE = re.compile(r"^(\w+)\s*:\s*([\d.]+) micros/op\s+(\d+) ops/sec")


def run(cmd, db_dir=None):
    """Runs cmd under a shell that reports the bytes its reaped child wrote to the device."""
    script = ('b=$(awk \'/^write_bytes/{print $2}\' /proc/$$/io); "$@"; rc=$?; '
              'a=$(awk \'/^write_bytes/{print $2}\' /proc/$$/io); '
              'echo "DEVICE_WRITE_BYTES $((a-b))"; exit $rc')
    out = subprocess.run(["bash", "-c", script, "bench"] + cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"failed ({out.returncode}): {' '.join(cmd)}\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")
    res = {"ops": {}, "written": 0, "disk": 0}
    for line in out.stdout.splitlines():
        m = LINE.match(line.strip())
        if m:
            res["ops"].setdefault(m.group(1), []).append(int(m.group(3)))
        if line.startswith("DEVICE_WRITE_BYTES"):
            res["written"] = int(line.split()[1])
    if db_dir and os.path.isdir(db_dir):
        res["disk"] = sum(os.path.getsize(os.path.join(r, f))
                          for r, _, fs in os.walk(db_dir) for f in fs)
    return res


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def spread(xs):
    return f"{min(xs):,.0f}-{max(xs):,.0f}" if xs else "-"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gb", type=float, default=1.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--strata", default="target/release/strata")
    ap.add_argument("--db-bench", default="db_bench")
    ap.add_argument("--dir", default=None)
    ap.add_argument("--threshold", type=int, default=1024)
    ap.add_argument("--workloads", default="load1k,load4k,read1k,read1k-direct,scan1k,gc1k")
    ap.add_argument("--reads", type=int, default=200000)
    ap.add_argument("--scans", type=int, default=20000)
    ap.add_argument("--out", default=None)
    ap.add_argument("--opt", action="append", default=[], metavar="NAME=VALUE",
                    help="an engine option for every strata command (repeatable), e.g. vlog_mmap=false")
    a = ap.parse_args()
    base = a.dir or tempfile.mkdtemp(prefix="strata-vlog-")
    os.makedirs(base, exist_ok=True)
    rdir, sdir = os.path.join(base, "rocksdb"), os.path.join(base, "strata")
    work = a.workloads.split(",")
    cache = 64 << 20
    lines = []

    def say(s=""):
        print(s, flush=True)
        lines.append(s)

    def rocks(bench, vs, num, extra=()):
        return [a.db_bench, f"--benchmarks={bench}", f"--num={num}", "--key_size=16",
                f"--value_size={vs}", "--threads=1", "--compression_type=none",
                "--bloom_bits=10", f"--cache_size={cache}", "--sync=false",
                "--disable_wal=false", f"--db={rdir}", *extra]

    def strata(bench, vs, num, extra=(), opts=()):
        cmd = [a.strata, "bench", "--benchmarks", bench, "--num", str(num), "--key-size", "16",
               "--value-size", str(vs), "--threads", "1", "--db", sdir,
               "--opt", f"block_cache_bytes={cache}",
               "--opt", f"sep_threshold_bytes={a.threshold}", *extra]
        for o in [*a.opt, *opts]:
            cmd += ["--opt", o]
        return cmd

    say(f"commands (one round; --gb {a.gb}, threshold {a.threshold}):")
    for vs, name in ((1024, "load1k"), (4096, "load4k")):
        if name not in work:
            continue
        num = int(a.gb * (1 << 30) / (16 + vs))
        user = num * (16 + vs)
        say(f"  {name} rocksdb: {' '.join(rocks('fillrandom', vs, num))}")
        say(f"  {name} strata:  {' '.join(strata('fillrandom', vs, num))}")
        res = {"rocksdb": [], "strata": []}
        for r in range(a.rounds):
            for side, cmd, d in (("rocksdb", rocks("fillrandom", vs, num), rdir),
                                 ("strata", strata("fillrandom", vs, num), sdir)):
                shutil.rmtree(d, ignore_errors=True)
                x = run(cmd, d)
                x["wa"] = x["written"] / user
                res[side].append(x)
                say(f"  round {r + 1} {name} {side}: {x['ops'].get('fillrandom')} ops/s, "
                    f"device WA {x['wa']:.2f}, disk {x['disk'] / user:.2f}x user")
        ro = [x["ops"]["fillrandom"][0] for x in res["rocksdb"]]
        so = [x["ops"]["fillrandom"][0] for x in res["strata"]]
        say(f"| {name} fillrandom | {med(ro):,.0f} ({spread(ro)}) | {med(so):,.0f} ({spread(so)}) "
            f"| {med(so) / med(ro):.2f}x | WA rocksdb {med([x['wa'] for x in res['rocksdb']]):.2f}, "
            f"strata {med([x['wa'] for x in res['strata']]):.2f} |")
        if name == "load4k" and shutil.which("fio"):
            f = os.path.join(base, "fio.dat")
            out = subprocess.run(["fio", "--name=seqw", f"--filename={f}", "--size=2G", "--bs=1M",
                                  "--rw=write", "--direct=1", "--ioengine=libaio", "--iodepth=16",
                                  "--output-format=terse"], capture_output=True, text=True)
            try:
                kbs = int(out.stdout.split(";")[47])
                mbs = kbs * 1024 / 1e6
                best = med(so) * (16 + vs) / 1e6
                say(f"  fio sequential write: {mbs:.0f} MB/s; strata load4k median "
                    f"{best:.0f} MB/s of user data = {100 * best / mbs:.0f}%")
            except (IndexError, ValueError):
                say(f"  fio output not understood: {out.stdout[:200]} {out.stderr[:200]}")
            os.remove(f) if os.path.exists(f) else None
    num = int(a.gb * (1 << 30) / (16 + 1024))
    loaded = False
    for name, rb, sb, extra_r, extra_s in (
            ("read1k", "readrandom", "readrandom", [f"--reads={a.reads}"], ["--reads", str(a.reads)]),
            ("read1k-direct", "readrandom", "readrandom",
             [f"--reads={a.reads}", "--use_direct_reads=true"],
             ["--reads", str(a.reads), "--direct-io"]),
            ("scan1k", "seekrandom", "seekrandom",
             [f"--reads={a.scans}", "--seek_nexts=100"], ["--reads", str(a.scans), "--seek-nexts", "100"])):
        if name not in work:
            continue
        # Load once per side for all the reading workloads (not timed), then alternate the
        # reading benchmark. Another seed than the load's, so that lookups draw other keys
        # than the ones written (about 63% of them exist, on both sides).
        if not loaded:
            shutil.rmtree(rdir, ignore_errors=True)
            shutil.rmtree(sdir, ignore_errors=True)
            run(rocks("fillrandom", 1024, num), rdir)
            run(strata("fillrandom", 1024, num), sdir)
            loaded = True
        rcmd = rocks(rb, 1024, num, ["--use_existing_db=true", "--seed=3", *extra_r])
        scmd = strata(sb, 1024, num, ["--use-existing-db", "--seed", "3", *extra_s])
        say(f"  {name} rocksdb: {' '.join(rcmd)}")
        say(f"  {name} strata:  {' '.join(scmd)}")
        ro, so = [], []
        for r in range(a.rounds):
            ro.append(run(rcmd)["ops"][rb][0])
            so.append(run(scmd)["ops"][sb][0])
            say(f"  round {r + 1} {name}: rocksdb {ro[-1]:,} ops/s, strata {so[-1]:,} ops/s")
        say(f"| {name} {rb} | {med(ro):,.0f} ({spread(ro)}) | {med(so):,.0f} ({spread(so)}) "
            f"| {med(so) / med(ro):.2f}x | |")
    if "gc1k" in work:
        user = num * (16 + 1024)
        bench = "fillrandom,overwrite,overwrite,overwrite"
        res = {"on": [], "off": []}
        for r in range(a.rounds):
            for mode, opts in (("on", ()), ("off", ("gc_interval_ms=0",))):
                shutil.rmtree(sdir, ignore_errors=True)
                cmd = strata(bench, 1024, num, opts=opts)
                if r == 0:
                    say(f"  gc1k {mode}: {' '.join(cmd)}")
                x = run(cmd, sdir)
                ow = x["ops"].get("overwrite", [])
                res[mode].append((statistics.mean(ow), x["disk"] / user, ow))
                say(f"  round {r + 1} gc {mode}: overwrite ops/s {ow}, "
                    f"space amplification {x['disk'] / user:.2f}")
        on = [x[0] for x in res["on"]]
        off = [x[0] for x in res["off"]]
        say(f"| gc1k overwrite x3 | GC off {med(off):,.0f} | GC on {med(on):,.0f} "
            f"| {med(on) / med(off):.2f}x | space amp GC on {med([x[1] for x in res['on']]):.2f}, "
            f"off {med([x[1] for x in res['off']]):.2f} |")
    if a.out:
        with open(a.out, "w") as f:
            f.write("\n".join(lines) + "\n")
    if not a.dir:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
