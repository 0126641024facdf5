#!/usr/bin/env bash
# The standard workloads of BENCHMARKS.md, Strata vs RocksDB vs fjall, with `strata bench`:
# the device's limits with fio first, then each workload with every engine in turn (rounds
# alternate the engines), each written to $OUT as NAME.md (command, machine header, median
# table), NAME.json (every figure), NAME.png (throughput over time) and logs/NAME.log; then
# a check of found ratios against RocksDB's db_bench. With the default OUT, the results
# section of docs/benchmarks.md (between its results markers) is rewritten from them.
#
#   scripts/bench-standard.sh              # full sizes of BENCHMARKS.md: a few hours
#   SMALL=1 scripts/bench-standard.sh      # reduced sizes: about ten minutes
#   ONLY="fio small-load-t1" scripts/bench-standard.sh   # a subset
#   REPORT_ONLY=1 scripts/bench-standard.sh  # only rewrite the .md files and
#                                            # docs/benchmarks.md from the logs of a run
#
# Needs: fio, and for rocksdb `apt-get install -y libclang-dev` (plus librocksdb-dev with
# ROCKSDB_BUILD=debian; the script builds strata with --features rocksdb). Run it on a quiet
# machine.
#
# Environment (defaults: full / SMALL=1):
#   OUT            where results go                          docs/bench
#   ENGINES        engines, first is the baseline of ratios  strata,rocksdb,fjall
#   ROCKSDB_BUILD  release: the RocksDB 7.9.2 librocksdb-sys  release
#                  bundles, compiled with NDEBUG (~20 min the
#                  first time, target/rocksdb-release); debian:
#                  Debian's librocksdb (assertions on)
#   DB_BENCH       db_bench of the reference check           db_bench
#   ROUNDS         rounds per workload                        3 / 1
#   DB_DIR         scratch directory on the device to test   a new directory in /tmp
#   SMALL_NUM      small-load keys (and ops)                 5000000 / 500000
#   LARGE_BYTES    large-load user bytes written             4294967296 / 268435456
#   POINT_READS    point-read and batched-read lookups       1000000 / 100000
#   SCAN_READS     scan seeks (each + 100 nexts)             100000 / 20000
#   YCSB_NUM       YCSB records loaded                       1000000 / 100000
#   YCSB_OPS       YCSB operations per workload              1000000 / 100000
#   YCSB_THREADS   YCSB client threads                       1
#   FIO_SIZE       fio file size                             2G / 512M
#   FIO_RUNTIME    seconds per fio random-read job           10 / 3
#   CHECK_NUM      keys of the db_bench found-ratio check    1000000 / 200000
#   ONLY           space-separated subset of: fio small-load-t1 small-load-t8 large-load-1k
#                  large-load-4k point-read-cached point-read-direct batched-read scan ycsb
#                  reference
set -euo pipefail

cd "$(dirname "$0")/.."

REPORT_ONLY="${REPORT_ONLY:-0}"
if [ "$REPORT_ONLY" = 1 ]; then
  # The settings of the run being reported.
  # shellcheck disable=SC1091
  . "${OUT:-docs/bench}/run.env"
fi
SMALL="${SMALL:-0}"
if [ "$SMALL" = 1 ]; then
  d_rounds=1 d_small=500000 d_large=$((256 << 20)) d_point=100000 d_scan=20000
  d_ycsb_num=100000 d_ycsb_ops=100000 d_fio_size=512M d_fio_rt=3 d_check=200000
else
  d_rounds=3 d_small=5000000 d_large=$((4 << 30)) d_point=1000000 d_scan=100000
  d_ycsb_num=1000000 d_ycsb_ops=1000000 d_fio_size=2G d_fio_rt=10 d_check=1000000
fi
OUT="${OUT:-docs/bench}"
ENGINES="${ENGINES:-strata,rocksdb,fjall}"
ROCKSDB_BUILD="${ROCKSDB_BUILD:-release}"
case "$ROCKSDB_BUILD" in
  release) rocksdb_build="release build of 7.9.2 (bundled by librocksdb-sys, NDEBUG)" ;;
  debian) rocksdb_build="Debian's librocksdb (assertions on, ~1.3x slower)" ;;
  *) echo "ROCKSDB_BUILD must be release or debian" >&2; exit 1 ;;
esac
ROUNDS="${ROUNDS:-$d_rounds}"
SMALL_NUM="${SMALL_NUM:-$d_small}"
LARGE_BYTES="${LARGE_BYTES:-$d_large}"
POINT_READS="${POINT_READS:-$d_point}"
SCAN_READS="${SCAN_READS:-$d_scan}"
YCSB_NUM="${YCSB_NUM:-$d_ycsb_num}"
YCSB_OPS="${YCSB_OPS:-$d_ycsb_ops}"
YCSB_THREADS="${YCSB_THREADS:-1}"
FIO_SIZE="${FIO_SIZE:-$d_fio_size}"
FIO_RUNTIME="${FIO_RUNTIME:-$d_fio_rt}"
CHECK_NUM="${CHECK_NUM:-$d_check}"
ONLY="${ONLY:-fio small-load-t1 small-load-t8 large-load-1k large-load-4k point-read-cached \
point-read-direct batched-read scan ycsb reference}"

if [ -z "${DB_DIR:-}" ]; then
  DB_DIR="$(mktemp -d /tmp/strata-bench-std.XXXXXX)"
  trap 'rm -rf "$DB_DIR"' EXIT
fi
mkdir -p "$OUT/logs"
if [ "$REPORT_ONLY" != 1 ]; then
  mkdir -p "$DB_DIR"
  for v in SMALL ENGINES ROUNDS DB_DIR SMALL_NUM LARGE_BYTES POINT_READS SCAN_READS YCSB_NUM \
    YCSB_OPS YCSB_THREADS FIO_SIZE FIO_RUNTIME CHECK_NUM; do
    printf '%s=%q\n' "$v" "${!v}"
  done > "$OUT/run.env"
fi

wants() { case " $ONLY " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
# When and on what a section was measured (the load average says how quiet the machine was).
measured() {
  echo "Measured $(date -u +%Y-%m-%d), commit $(git rev-parse --short HEAD 2>/dev/null ||
    echo unknown), load average $(cut -d' ' -f1-3 /proc/loadavg) at the start; RocksDB: $rocksdb_build."
}

# --- build -------------------------------------------------------------------------------
features=()
target="${CARGO_TARGET_DIR:-target}"
if [[ ",$ENGINES," == *",rocksdb,"* ]]; then
  features=(--features rocksdb)
  if [ "$ROCKSDB_BUILD" = release ]; then
    # Without ROCKSDB_LIB_DIR, librocksdb-sys compiles the RocksDB it bundles (7.9.2) with
    # NDEBUG: a release build, in its own target directory so that the default build keeps
    # its own (about 20 minutes the first time).
    target="${CARGO_TARGET_DIR:-target/rocksdb-release}"
    build_env=(env -u ROCKSDB_LIB_DIR CARGO_TARGET_DIR="$target")
  else
    lib="$(dpkg -L librocksdb-dev 2>/dev/null | grep '/librocksdb\.so$' | head -n 1 || true)"
    if [ -z "${ROCKSDB_LIB_DIR:-}" ] && [ -z "$lib" ] && [ "$REPORT_ONLY" != 1 ]; then
      echo "ROCKSDB_BUILD=debian but librocksdb-dev is not installed:" >&2
      echo "  apt-get install -y librocksdb-dev libclang-dev" >&2
      exit 1
    fi
    build_env=(env ROCKSDB_LIB_DIR="${ROCKSDB_LIB_DIR:-$(dirname "${lib:-/x/x}")}")
  fi
else
  build_env=(env)
fi
if [ "$REPORT_ONLY" != 1 ]; then
  "${build_env[@]}" cargo build --release -p strata-cli "${features[@]}"
fi
STRATA="$target/release/strata"

# --- one workload --------------------------------------------------------------------------
# run NAME "WHAT" ARGS...: runs `strata bench ARGS` on every engine, writes NAME.{md,json,png}.
run() {
  local name="$1" what="$2"
  shift 2
  local args=(bench --engine "$ENGINES" --rounds "$ROUNDS" "$@"
    --json "$OUT/$name.json" --plot "$OUT/$name.png")
  if [ "$REPORT_ONLY" != 1 ]; then
    echo "=== $name: $what"
    echo "strata ${args[*]}"
    {
      echo "# $(measured)"
      "$STRATA" "${args[@]}"
    } | tee "$OUT/logs/$name.log"
  fi
  if [ ! -f "$OUT/logs/$name.log" ]; then
    return 0
  fi
  {
    echo "### $name"
    echo
    echo "$what"
    echo
    sed -n '1s/^# //p' "$OUT/logs/$name.log"
    echo
    echo '```sh'
    echo "strata ${args[*]}" | sed "s|$DB_DIR|\$DB_DIR|g"
    echo '```'
    echo
    echo '```text'
    # The environment header: up to its closing line of dashes.
    sed -n '2,/^-----/p' "$OUT/logs/$name.log" | sed "s|$DB_DIR|\$DB_DIR|g"
    echo '```'
    echo
    # The median table: the lines of the summary that are table rows.
    sed -n '/^\*\* Summary/,$p' "$OUT/logs/$name.log" | grep '^|'
    echo
    echo "![throughput of $name]($name.png)"
  } > "$OUT/$name.md"
  # The header goes in a collapsed block: it is long and mostly the same everywhere.
  sed -i 's|^```text$|<details><summary>environment header</summary>\n\n```text|' "$OUT/$name.md"
  awk 'BEGIN{n=0} /^```$/{n++; print; if (n==2) print "\n</details>"; next} {print}' \
    "$OUT/$name.md" > "$OUT/$name.md.tmp" && mv "$OUT/$name.md.tmp" "$OUT/$name.md"
}

# --- the device's limits -------------------------------------------------------------------
if wants fio && [ "$REPORT_ONLY" != 1 ]; then
  f="$DB_DIR/fio.dat"
  fio_one() { # NAME ARGS...: prints fio's terse (v3) line
    fio --minimal --name="$1" --filename="$f" --size="$FIO_SIZE" --direct=1 "${@:2}" | tail -n 1
  }
  seqw="$(fio_one seqw --bs=1M --rw=write --ioengine=libaio --iodepth=16)"
  rr32="$(fio_one rr --bs=4k --rw=randread --ioengine=io_uring --iodepth=32 \
    --runtime="$FIO_RUNTIME" --time_based 2>/dev/null ||
    fio_one rr --bs=4k --rw=randread --ioengine=libaio --iodepth=32 \
      --runtime="$FIO_RUNTIME" --time_based)"
  rr1="$(fio_one rr1 --bs=4k --rw=randread --ioengine=psync --iodepth=1 \
    --runtime="$FIO_RUNTIME" --time_based)"
  rm -f "$f"
  # Terse v3: field 7 read KiB/s, 8 read IOPS, 48 write KiB/s, 49 write IOPS.
  seqw_mbs="$(echo "$seqw" | awk -F';' '{printf "%.0f", $48 / 1024}')"
  rr32_iops="$(echo "$rr32" | awk -F';' '{print $8}')"
  rr1_iops="$(echo "$rr1" | awk -F';' '{print $8}')"
  {
    echo "### fio: the device's limits"
    echo
    measured
    echo
    echo '```sh'
    echo "fio --name=seqw --filename=F --size=$FIO_SIZE --bs=1M --rw=write --direct=1 --ioengine=libaio --iodepth=16"
    echo "fio --name=rr --filename=F --size=$FIO_SIZE --bs=4k --rw=randread --direct=1 --ioengine=io_uring --iodepth=32 --runtime=$FIO_RUNTIME --time_based"
    echo "fio --name=rr1 --filename=F --size=$FIO_SIZE --bs=4k --rw=randread --direct=1 --ioengine=psync --iodepth=1 --runtime=$FIO_RUNTIME --time_based"
    echo '```'
    echo
    echo "| test | result |"
    echo "|---|--:|"
    echo "| sequential write, 1 MiB blocks, depth 16 | $seqw_mbs MiB/s |"
    echo "| 4 KiB random read, depth 32 | $rr32_iops IOPS |"
    echo "| 4 KiB random read, depth 1 | $rr1_iops IOPS |"
  } > "$OUT/fio.md"
  cat "$OUT/fio.md"
fi

# --- the workloads -------------------------------------------------------------------------
large_num() { echo $((LARGE_BYTES / ($1 + 16))); }
L1K="$(large_num 1024)"
L4K="$(large_num 4096)"

if wants small-load-t1; then
  run small-load-t1 "fillrandom, 16-byte keys, 128-byte values, $SMALL_NUM writes, 1 thread." \
    --benchmarks fillrandom --num "$SMALL_NUM" --value-size 128 --threads 1
fi
if wants small-load-t8; then
  run small-load-t8 "fillrandom, 128-byte values, 8 threads writing $((SMALL_NUM / 8)) keys each \
($SMALL_NUM in all) into a key space of $SMALL_NUM." \
    --benchmarks fillrandom --num "$SMALL_NUM" --writes $((SMALL_NUM / 8)) --value-size 128 \
    --threads 8
fi
if wants large-load-1k; then
  [ "$REPORT_ONLY" = 1 ] || rm -rf "$DB_DIR/l1k"
  run large-load-1k "fillrandom, 1 KiB values, $L1K writes ($LARGE_BYTES bytes of keys and values)." \
    --benchmarks fillrandom --num "$L1K" --value-size 1024 --db "$DB_DIR/l1k"
fi
if wants large-load-4k; then
  [ "$REPORT_ONLY" = 1 ] || rm -rf "$DB_DIR/l4k"
  run large-load-4k "fillrandom, 4 KiB values, $L4K writes ($LARGE_BYTES bytes of keys and values)." \
    --benchmarks fillrandom --num "$L4K" --value-size 4096 --db "$DB_DIR/l4k"
fi
# The reads below use the 1 KiB set loaded by large-load-1k (about 63% of the key space is
# present after fillrandom, as with db_bench), settled by waitforcompaction first.
if wants point-read-cached; then
  run point-read-cached "readrandom, $POINT_READS lookups on the large-load-1k set, buffered I/O." \
    --benchmarks waitforcompaction,readrandom --num "$L1K" --value-size 1024 \
    --reads "$POINT_READS" --db "$DB_DIR/l1k" --use-existing-db
fi
if wants point-read-direct; then
  run point-read-direct "readrandom, $POINT_READS lookups on the large-load-1k set, direct I/O." \
    --benchmarks waitforcompaction,readrandom --num "$L1K" --value-size 1024 \
    --reads "$POINT_READS" --direct-io --db "$DB_DIR/l1k" --use-existing-db
fi
if wants batched-read; then
  run batched-read "multireadrandom, batches of 32, $POINT_READS lookups, direct I/O." \
    --benchmarks waitforcompaction,multireadrandom --batch-size 32 --num "$L1K" \
    --value-size 1024 --reads "$POINT_READS" --direct-io --db "$DB_DIR/l1k" --use-existing-db
fi
if wants scan; then
  run scan "seekrandom + 100 nexts, $SCAN_READS seeks on the large-load-1k set." \
    --benchmarks waitforcompaction,seekrandom --seek-nexts 100 --num "$L1K" --value-size 1024 \
    --reads "$SCAN_READS" --db "$DB_DIR/l1k" --use-existing-db
fi
if wants ycsb; then
  run ycsb "YCSB: load $YCSB_NUM records of 1 KiB, then A, B, C, F, D, E ($YCSB_OPS operations \
each, $YCSB_THREADS thread(s)), in YCSB's recommended order (D and E insert)." \
    --benchmarks ycsb-load,ycsb-a,ycsb-b,ycsb-c,ycsb-f,ycsb-d,ycsb-e --num "$YCSB_NUM" \
    --reads "$YCSB_OPS" --value-size 1024 --threads "$YCSB_THREADS"
fi
# --- found ratios and key counts against RocksDB's db_bench ---------------------------------
if wants reference && [ "$REPORT_ONLY" != 1 ]; then
  DB_BENCH="${DB_BENCH:-db_bench}"
  if command -v "$DB_BENCH" > /dev/null; then
    ref="$DB_DIR/ref"
    # ops/s and "(N of M found)" of one benchmark's line in a tool's output.
    rate() { grep "^$1 " | sed 's/.* micros\/op \([0-9]*\) ops\/sec.*/\1/'; }
    found() { grep "^$1 " | sed 's/.*(//; s/ found).*//'; }
    version="$("$DB_BENCH" --version 2>/dev/null | head -n 1 | grep -o '[0-9][0-9.]*[0-9]' | tail -n 1)"
    {
      echo "### reference: the same command line given to db_bench and strata bench"
      echo
      echo "$(measured)"
      echo
      echo "fillrandom then readrandom over $CHECK_NUM keys (16-byte keys, 128-byte values, 8 MiB"
      echo "cache, 10 bloom bits, no compression), with 1 and 4 threads. The found share must"
      echo "match (about 1 - e^-threads of the key space exists after fillrandom; db_bench"
      echo "counts one thread's lookups, strata bench all threads'). With rocksdb in ENGINES,"
      echo "\`strata bench --engine rocksdb\` runs too: the same library through this harness,"
      echo "to be read against db_bench's own rates (one run each, not alternated)."
      echo
      echo "| threads | tool | fillrandom ops/s | readrandom ops/s | readrandom found |"
      echo "|--:|---|--:|--:|--:|"
      for t in 1 4; do
        rm -rf "$ref"
        out="$("$DB_BENCH" --benchmarks=fillrandom,readrandom --num="$CHECK_NUM" --key_size=16 \
          --value_size=128 --threads="$t" --compression_type=none --bloom_bits=10 \
          --cache_size=8388608 --db="$ref" 2>&1)"
        rm -rf "$ref"
        echo "| $t | db_bench (RocksDB $version) | $(echo "$out" | rate fillrandom) |" \
          "$(echo "$out" | rate readrandom) | $(echo "$out" | found readrandom) (one thread) |"
        for e in strata rocksdb; do
          [[ ",$ENGINES," == *",$e,"* ]] || continue
          out="$("$STRATA" bench --engine "$e" --benchmarks=fillrandom,readrandom \
            --num="$CHECK_NUM" --key-size=16 --value-size=128 --threads="$t" \
            --compression=none --bloom-bits=10 --cache-bytes=8388608)"
          echo "| $t | strata bench --engine $e | $(echo "$out" | rate fillrandom) |" \
            "$(echo "$out" | rate readrandom) | $(echo "$out" | found readrandom) |"
        done
      done
    } > "$OUT/reference.md"
    cat "$OUT/reference.md"
  else
    echo "skipping reference: db_bench not found (apt-get install -y rocksdb-tools)" >&2
  fi
fi

# --- docs/benchmarks.md --------------------------------------------------------------------
doc=docs/benchmarks.md
if [ "$OUT" = docs/bench ] && grep -q '<!-- results:begin -->' "$doc"; then
  {
    sed -n '1,/<!-- results:begin -->/p' "$doc"
    echo
    echo "Generated by \`scripts/bench-standard.sh\` (SMALL=$SMALL, ROUNDS=$ROUNDS); each section"
    echo "says when and at which commit it was measured, and the machine's load average (1, 5,"
    echo "15 minutes) when it started: on this 2-core machine, a load above 1 means other work"
    echo "competed with the benchmark."
    if [ "$SMALL" = 1 ]; then
      echo
      echo "**Reduced sizes (SMALL=1)**: a quick check of the whole set, not the standard"
      echo "workloads' sizes; read these figures as indicative only."
    fi
    echo
    for n in fio small-load-t1 small-load-t8 large-load-1k large-load-4k point-read-cached \
      point-read-direct batched-read scan ycsb reference; do
      if [ -f "$OUT/$n.md" ]; then
        sed "s|](\($n\.png\))|](bench/\1)|" "$OUT/$n.md"
        echo
      fi
    done
    sed -n '/<!-- results:end -->/,$p' "$doc"
  } > "$doc.new"
  mv "$doc.new" "$doc"
  echo "Rewrote the results section of $doc"
fi
echo "Results in $OUT/"
