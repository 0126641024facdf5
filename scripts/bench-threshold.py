#!/usr/bin/env python3
"""The table that chooses `sep_threshold_bytes`'s default: one mixed-size workload run with
key-value separation at several thresholds and off, settings alternating round by round
(A B C D A B C D ...), medians over --rounds.

    python3 scripts/bench-threshold.py --rounds 3 --dir "$SCRATCH/thr" --json thr.json

Values are drawn uniformly from [--min, --max] bytes (default 64..8192: at 512 B about 95%
of them are separated, at 1 KiB 88%, at 4 KiB 50%, off none), 16-byte keys, 1 thread, the
bench's defaults otherwise (8 MiB block cache, background GC on). Per setting and round:

  1. fillrandom of --num keys, then readrandom (page cache warm) and three overwrites of the
     key space, in one invocation: ops/s of each, device write amplification of the load,
     space amplification right after the last overwrite;
  2. seekrandom + 100 nexts, then readrandom with direct I/O, on the database left by 1;
  3. on a fresh database, YCSB load and A, B, C, F, D, E over --ycsb-num records.

Needs a release build of strata (cargo build --release -p strata-cli).
"""
import argparse, json, os, shutil, statistics, subprocess, sys


def bench(strata, db, args, json_path):
    cmd = [strata, "bench", "--db", db, "--json", json_path] + args
    print("+", " ".join(cmd), flush=True)
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"failed ({out.returncode}): {' '.join(cmd)}\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")
    with open(json_path) as f:
        return json.load(f)["runs"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--strata", default="target/release/strata")
    ap.add_argument("--dir", required=True, help="scratch directory on the device to test")
    ap.add_argument("--thresholds", default="512,1024,4096,off")
    ap.add_argument("--min", type=int, default=64)
    ap.add_argument("--max", type=int, default=8192)
    ap.add_argument("--num", type=int, default=200_000)
    ap.add_argument("--reads", type=int, default=200_000)
    ap.add_argument("--direct-reads", type=int, default=50_000)
    ap.add_argument("--seeks", type=int, default=5_000)
    ap.add_argument("--ycsb-num", type=int, default=100_000)
    ap.add_argument("--ycsb-ops", type=int, default=100_000)
    ap.add_argument("--json", help="write every figure here")
    a = ap.parse_args()

    sizes = ["--value-size", str(a.min), "--value-size-max", str(a.max)]
    settings = a.thresholds.split(",")
    figures = {s: {} for s in settings}  # setting -> figure -> [per round]

    def note(setting, name, value):
        if value is not None:
            figures[setting].setdefault(name, []).append(value)

    os.makedirs(a.dir, exist_ok=True)
    for r in range(a.rounds):
        for s in settings:
            opt = ["--opt", f"sep_threshold_bytes={'inf' if s == 'off' else s}"]
            db = os.path.join(a.dir, "db")
            shutil.rmtree(db, ignore_errors=True)
            j = os.path.join(a.dir, "r.json")
            runs = bench(a.strata, db, ["--benchmarks",
                                        "fillrandom,readrandom,overwrite,overwrite,overwrite",
                                        "--num", str(a.num), "--reads", str(a.reads),
                                        "--keep"] + sizes + opt, j)
            by = {}
            for run in runs:
                by.setdefault(run["benchmark"], []).append(run)
            note(s, "load ops/s", by["fillrandom"][0]["ops_per_sec"])
            note(s, "load W-amp", by["fillrandom"][0].get("write_amp"))
            note(s, "read ops/s", by["readrandom"][0]["ops_per_sec"])
            note(s, "overwrite ops/s", statistics.mean(x["ops_per_sec"] for x in by["overwrite"]))
            note(s, "S-amp after overwrites", by["overwrite"][-1].get("space_amp"))
            runs = bench(a.strata, db, ["--benchmarks", "seekrandom", "--use-existing-db", "--keep",
                                        "--num", str(a.num), "--reads", str(a.seeks),
                                        "--seek-nexts", "100"] + sizes + opt, j)
            note(s, "scan seeks/s", runs[0]["ops_per_sec"])
            runs = bench(a.strata, db, ["--benchmarks", "readrandom", "--use-existing-db", "--keep",
                                        "--direct-io", "--num", str(a.num),
                                        "--reads", str(a.direct_reads)] + sizes + opt, j)
            note(s, "direct read ops/s", runs[0]["ops_per_sec"])
            shutil.rmtree(db, ignore_errors=True)
            runs = bench(a.strata, db, ["--benchmarks",
                                        "ycsb-load,ycsb-a,ycsb-b,ycsb-c,ycsb-f,ycsb-d,ycsb-e",
                                        "--num", str(a.ycsb_num), "--reads", str(a.ycsb_ops)]
                         + sizes + opt, j)
            for run in runs:
                note(s, f"{run['benchmark']} ops/s", run["ops_per_sec"])
            shutil.rmtree(db, ignore_errors=True)
            print(f"round {r + 1} {s}: " + ", ".join(f"{k} {v[-1]:,.2f}" for k, v in figures[s].items()),
                  flush=True)

    names = list(figures[settings[0]].keys())
    print("\n| figure | " + " | ".join(f"threshold {s}" for s in settings) + " |")
    print("|---|" + "--:|" * len(settings))
    for n in names:
        cells = []
        for s in settings:
            xs = figures[s].get(n, [])
            m = statistics.median(xs) if xs else float("nan")
            cells.append(f"{m:,.2f}" if m < 100 else f"{m:,.0f}")
        print(f"| {n} | " + " | ".join(cells) + " |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"args": vars(a), "figures": figures}, f, indent=1)


if __name__ == "__main__":
    main()
