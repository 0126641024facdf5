#!/usr/bin/env python3
"""The byte-addressable L0 tier's experiments (NVM seed) in one run, with the release `strata`
binary and, given --db-bench PATH, RocksDB's db_bench, alternating configurations within each
round, medians over --rounds:

  (a) write latency: fillseq of --num values of 4, 8 and 16 KiB (--value-sizes), mean and p99
      per put, for Strata with the tier on (l0_tier_dir under --tier-root, a tmpfs; removed
      afterwards), Strata with the tier off, and RocksDB.
      "L0 limit 10" (--l0-limit): writes stop once L0 holds that many tables. Tier off and
      RocksDB: L0 slowdown and stop triggers both at the limit (compaction still starts at 4
      files, both engines' default). Tier on: the tier replaces the file-count triggers, so
      its capacity (l0_tier_bytes) is the limit times the write buffer (--write-buffer-bytes,
      64 MiB, given to both engines), the bytes of that many flushed tables.
  (b) read latency: --reads point reads right after each fillseq, in the same process, over
      the keys it wrote, drawn from a Gaussian centred on the middle of the key space with
      standard deviation --gaussian-sigma x --num (`strata bench --read-distribution
      gaussian`). db_bench has no Gaussian distribution: its row is readrandom (uniform) and
      says so; compare RocksDB's reads with care.
  (c) `strata index-bench` (PGM learned index against binary search) and `strata l0-space`
      (an L0 table's bytes against an SSTable's), printed as the tools print them.

Prints a Markdown table of medians (mean and p99 in microseconds) and ratios to the tier-off
run; --json FILE writes every run and the medians.

    cargo build --release -p strata-cli
    python3 scripts/bench-l0tier.py --rounds 3 --db-bench /path/to/db_bench --json l0tier.json
    python3 scripts/bench-l0tier.py --smoke      # tiny sizes, 1 round, no db_bench: seconds

Whether the tier was really used is checked after each tier-on run: the tier directory must
hold files (its lock or tables); a binary whose engine ignores l0_tier_dir leaves it empty,
and the run is marked "tier unused" rather than reported as the tier's figure.
"""
import argparse, importlib.util, json, os, re, shutil, subprocess, sys, tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def _script(name):
    """Loads scripts/NAME.py as a module (the file names have dashes)."""
    spec = importlib.util.spec_from_file_location(name.replace("-", "_"),
                                                  os.path.join(HERE, name + ".py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


_cmp = _script("compare-dbbench")
_vlog = _script("bench-vlog")
LINE = _cmp.LINE          # db_bench's result line, which `strata bench` prints too
med = _vlog.med


def spread(xs):
    return f"{min(xs):,.1f}–{max(xs):,.1f}" if xs else "-"

AVERAGE = re.compile(r"Average:\s*([\d.]+)")
P99 = re.compile(r"P99:\s*([\d.]+)")


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"command failed ({p.returncode}): {' '.join(cmd)}\n"
                           f"{p.stdout[-1500:]}\n{p.stderr[-1500:]}")
    return p.stdout


def parse_db_bench(out):
    """{benchmark: {"mean_us", "p99_us"}} from db_bench --histogram=1 output: each result
    line is followed by its histogram ("Count: .. Average: ..", "Percentiles: P50: .. P99: ..")."""
    res, cur = {}, None
    for line in out.splitlines():
        m = LINE.match(line.strip())
        if m:
            cur = m.group(1)
            res[cur] = {"mean_us": None, "p99_us": None}
            continue
        if cur is None:
            continue
        a = AVERAGE.search(line)
        if a and res[cur]["mean_us"] is None:
            res[cur]["mean_us"] = float(a.group(1))
        p = P99.search(line)
        if p and res[cur]["p99_us"] is None:
            res[cur]["p99_us"] = float(p.group(1))
    return res


def files_under(d):
    return sum(len(fs) for _, _, fs in os.walk(d)) if os.path.isdir(d) else 0


def strata_run(a, base, value_size, tier, extra=()):
    """One `strata bench` of fillseq then Gaussian readrandom; {benchmark: latency}. `extra`:
    more engine options (NAME=VALUE)."""
    db = tempfile.mkdtemp(prefix="db-", dir=base)
    os.rmdir(db)  # strata bench wants a new or empty directory
    js = db + ".json"
    cmd = [a.strata, "bench", "--benchmarks", "fillseq,readrandom", "--num", str(a.num),
           "--reads", str(a.reads), "--key-size", str(a.key_size),
           "--value-size", str(value_size), "--read-distribution", "gaussian",
           "--gaussian-sigma", str(a.gaussian_sigma), "--seed", str(a.seed),
           "--opt", f"write_buffer_bytes={a.write_buffer_bytes}", "--db", db, "--json", js]
    for o in extra:
        cmd += ["--opt", o]
    tier_dir = None
    if tier:
        tier_dir = tempfile.mkdtemp(prefix="strata-l0tier-", dir=a.tier_root)
        cmd += ["--opt", f"l0_tier_dir={tier_dir}",
                "--opt", f"l0_tier_bytes={a.l0_limit * a.write_buffer_bytes}"]
    else:
        cmd += ["--opt", f"l0_slowdown_writes_trigger={a.l0_limit}",
                "--opt", f"l0_stop_writes_trigger={a.l0_limit}"]
    try:
        run(cmd)
        with open(js) as f:
            doc = json.load(f)
        res = {}
        for r in doc["runs"]:
            lat = r.get("latency") or {}
            res[r["benchmark"]] = {"mean_us": lat.get("mean_us"), "p99_us": lat.get("p99_us")}
        used = files_under(tier_dir) > 0 if tier else None
        return res, used
    finally:
        shutil.rmtree(db, ignore_errors=True)
        if os.path.exists(js):
            os.remove(js)
        if tier_dir:
            shutil.rmtree(tier_dir, ignore_errors=True)


def rocks_run(a, base, value_size):
    db = tempfile.mkdtemp(prefix="rocksdb-", dir=base)
    cmd = [a.db_bench, "--benchmarks=fillseq,readrandom", f"--num={a.num}",
           f"--reads={a.reads}", f"--key_size={a.key_size}", f"--value_size={value_size}",
           "--threads=1", "--compression_type=none", "--bloom_bits=10",
           f"--cache_size={8 << 20}", "--sync=false", "--disable_wal=false",
           f"--write_buffer_size={a.write_buffer_bytes}", "--level0_file_num_compaction_trigger=4",
           f"--level0_slowdown_writes_trigger={a.l0_limit}",
           f"--level0_stop_writes_trigger={a.l0_limit}", "--histogram=1",
           f"--seed={a.seed}", f"--db={db}"]
    try:
        return parse_db_bench(run(cmd)), None
    finally:
        shutil.rmtree(db, ignore_errors=True)


CONFIGS = [("tier-on", "Strata, L0 tier on"), ("tier-off", "Strata, L0 tier off"),
           ("rocksdb", "RocksDB")]


# With --value-cache-ab: the tier on with a 64 MiB verified-value cache, beside the default
# (off since the quiet-machine run of 2026-11-29 found it slower than verifying every read).
CACHED = ("tier-on-cache", "Strata, L0 tier on, verified-value cache 64 MiB")


def latency(a, base):
    configs = [c for c in CONFIGS if c[0] != "rocksdb" or a.db_bench]
    if a.value_cache_ab:
        configs.insert(1, CACHED)
    runs = []
    for rnd in range(1, a.rounds + 1):
        for vs in a.value_sizes:
            for key, _ in configs:
                try:
                    if key == "rocksdb":
                        res, used = rocks_run(a, base, vs)
                    else:
                        extra = (["vlog_value_cache_bytes=67108864"] if key == CACHED[0] else [])
                        res, used = strata_run(a, base, vs, key.startswith("tier-on"), extra)
                    err = None
                except RuntimeError as e:
                    res, used, err = {}, None, str(e)
                runs.append({"round": rnd, "value_size": vs, "config": key, "results": res,
                             "tier_used": used, "error": err})
                state = ("failed" if err else
                         "tier unused" if used is False else "ok")
                print(f"round {rnd} value {vs} {key:9s} {state} " + " ".join(
                    f"{b}: mean {v['mean_us']} p99 {v['p99_us']}" for b, v in res.items()),
                    flush=True)
                if err:
                    print(err, file=sys.stderr)
    return runs, configs


def medians(runs, configs, value_sizes):
    rows = []
    for vs in value_sizes:
        for bench, workload in (("fillseq", "write (fillseq)"),
                                ("readrandom", "read (Gaussian readrandom)")):
            base = None
            for key, label in configs:
                rs = [r for r in runs if r["value_size"] == vs and r["config"] == key
                      and not r["error"] and r["tier_used"] is not False
                      and bench in r["results"]]
                means = [r["results"][bench]["mean_us"] for r in rs
                         if r["results"][bench]["mean_us"] is not None]
                p99s = [r["results"][bench]["p99_us"] for r in rs
                        if r["results"][bench]["p99_us"] is not None]
                row = {"value_size": vs, "workload": workload, "config": key, "label": label,
                       "runs": len(rs), "mean_us": med(means) if means else None,
                       "mean_spread": spread(means), "p99_us": med(p99s) if p99s else None,
                       "p99_spread": spread(p99s)}
                if key == "rocksdb" and bench == "readrandom":
                    row["label"] += " (readrandom, uniform: db_bench has no Gaussian)"
                if key == "tier-off":
                    base = row
                rows.append(row)
            for row in rows[-len(configs):]:
                for f in ("mean_us", "p99_us"):
                    ok = base and base[f] and row[f] is not None
                    row[f.replace("_us", "_vs_tier_off")] = row[f] / base[f] if ok else None
    return rows


def table(rows):
    fmt = lambda v, p=1: "-" if v is None else f"{v:,.{p}f}"
    ratio = lambda v: "-" if v is None else f"{v:.2f}x"
    out = ["| value | workload | configuration | runs | mean µs (median) | min–max | "
           "p99 µs (median) | min–max | mean vs tier off | p99 vs tier off |",
           "|--:|---|---|--:|--:|--:|--:|--:|--:|--:|"]
    for r in rows:
        out.append(f"| {r['value_size'] // 1024} KiB | {r['workload']} | {r['label']} | "
                   f"{r['runs']} | {fmt(r['mean_us'])} | {r['mean_spread']} | "
                   f"{fmt(r['p99_us'])} | {r['p99_spread']} | {ratio(r['mean_vs_tier_off'])} | "
                   f"{ratio(r['p99_vs_tier_off'])} |")
    return "\n".join(out)


def tools(a, base):
    """(c): index-bench's and l0-space's output, and l0-space's figures."""
    idx = run([a.strata, "index-bench", "--max-keys", str(a.index_max_keys),
               "--lookups", str(a.index_lookups), "--rounds", str(a.rounds)])
    js = os.path.join(base, "l0-space.json")
    space_text = run([a.strata, "l0-space", "--keys", str(a.space_keys),
                      "--key-size", str(a.space_key_size), "--value-size", "0",
                      "--dir", os.path.join(base, "l0-space"), "--json", js])
    with open(js) as f:
        space = json.load(f)
    shutil.rmtree(os.path.join(base, "l0-space"), ignore_errors=True)
    return idx, space_text, space


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--strata", default="target/release/strata")
    ap.add_argument("--db-bench", default=None,
                    help="RocksDB's db_bench: adds RocksDB to (a) and (b)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--num", type=int, default=100_000, help="fillseq puts (the key space)")
    ap.add_argument("--reads", type=int, default=100_000)
    ap.add_argument("--key-size", type=int, default=16)
    ap.add_argument("--value-sizes", default="4096,8192,16384")
    ap.add_argument("--l0-limit", type=int, default=10, help="L0 tables at which writes stop")
    ap.add_argument("--write-buffer-bytes", type=int, default=64 << 20,
                    help="memtable size of both engines (an L0 table's size)")
    ap.add_argument("--gaussian-sigma", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=1000)
    ap.add_argument("--tier-root", default="/dev/shm", help="where tier directories are made")
    ap.add_argument("--dir", default=None, help="where the databases live (default: temp)")
    ap.add_argument("--index-max-keys", type=int, default=10_000_000)
    ap.add_argument("--index-lookups", type=int, default=1_000_000)
    ap.add_argument("--space-keys", type=int, default=10_000_000)
    ap.add_argument("--space-key-size", type=int, default=256)
    ap.add_argument("--value-cache-ab", action="store_true",
                    help="also run the tier with a 64 MiB verified-value cache "
                         "(vlog_value_cache_bytes=67108864; the default is off)")
    ap.add_argument("--json", default=None, help="write every run and the medians to FILE")
    ap.add_argument("--smoke", action="store_true",
                    help="tiny sizes, 1 round, no db_bench: checks the script in seconds")
    a = ap.parse_args()
    if a.smoke:
        a.rounds, a.num, a.reads, a.db_bench = 1, 2000, 2000, None
        a.value_sizes = "4096"
        a.index_max_keys, a.index_lookups = 10_000, 10_000
        a.space_keys = 3000
        a.write_buffer_bytes = 1 << 20  # so that 8 MB of fillseq flushes into the tier
    a.value_sizes = [int(v) for v in a.value_sizes.split(",")]
    if not os.path.exists(a.strata):
        sys.exit(f"no strata binary at {a.strata} (cargo build --release -p strata-cli, "
                 "or --strata PATH)")
    if not os.path.isdir(a.tier_root):
        sys.exit(f"--tier-root {a.tier_root} is not a directory")
    base = a.dir or tempfile.mkdtemp(prefix="strata-l0tier-bench-")
    os.makedirs(base, exist_ok=True)
    try:
        print(f"fillseq {a.num:,} x {a.value_sizes} B values then {a.reads:,} Gaussian reads "
              f"(sigma {a.gaussian_sigma} x num), L0 limit {a.l0_limit}, {a.rounds} round(s)"
              + ("" if a.db_bench else "; no --db-bench: RocksDB left out"), flush=True)
        runs, configs = latency(a, base)
        rows = medians(runs, configs, a.value_sizes)
        print()
        print("## (a) write and (b) read latency, medians")
        print()
        print(table(rows))
        if any(r["tier_used"] is False for r in runs):
            print("\nNote: the tier directory stayed empty in tier-on runs: this strata binary "
                  "does not use the L0 tier yet; those runs are left out of the medians.")
        if any(r["error"] for r in runs):
            print("\nNote: some runs failed (see stderr); they are left out of the medians.")
        idx, space_text, space = tools(a, base)
        print()
        print("## (c) index-bench")
        print()
        print("```")
        print(idx.rstrip())
        print("```")
        print()
        print("## (c) l0-space")
        print()
        print(space_text.rstrip())
        if a.json:
            doc = {"args": {k: v for k, v in vars(a).items()}, "runs": runs, "medians": rows,
                   "index_bench": idx, "l0_space": space}
            with open(a.json, "w") as f:
                json.dump(doc, f, indent=2)
                f.write("\n")
        failed = [r for r in runs if r["error"] and r["config"] != "tier-on"]
        return 1 if failed else 0
    finally:
        if not a.dir:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
