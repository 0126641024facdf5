#!/usr/bin/env bash
# The sharded front's benchmarks (p2KVS: load, reads, async puts, YCSB, sensitivity to
# shards and batching, latency against offered load), with `strata bench`, in one run on one
# machine: each part alternates its engines over $ROUNDS rounds and prints a median table.
#
#   scripts/bench-shards.sh                 # full sizes: about 40 minutes on 2 cores
#   NUM=1000000 ROUNDS=1 scripts/bench-shards.sh   # a quick look
#   ONLY="load async" scripts/bench-shards.sh      # a subset
#
# Parts (16-byte keys, 128-byte values, WAL on without sync, 8 MiB block cache):
#   load      fillrandom, $NUM writes over 8 threads, then readrandom (8 threads) on that
#             data: sharded (Strata's engine under the front), rocksdb, sharded-rocksdb (the
#             same front over RocksDB), strata (one engine, no front)
#   worker-reads  load's workload on sharded with --direct-reads false (every read through
#             the worker, batched, as in p2KVS) against the default direct reads
#   async     fillrandom, $NUM writes from 1 thread: sharded with --async vs rocksdb
#   ycsb      ycsb-load then ycsb-a, 8 threads, $YCSB_NUM records: sharded vs rocksdb
#   sens      p2KVS Fig. 17: shards 1/2/4 x batching on (32) / off (1), for fillrandom,
#             ycsb-a and ycsb-c (8 threads, $SENS_NUM keys, $SENS_ROUNDS round(s) each)
#   latency   p2KVS Fig. 13: fillrandom at offered loads $RATES ops/s, 8 threads, p50/p99
#             against offered load for sharded and rocksdb, drawn into latency.png
#
# Output: $OUT/shards-PART.{log,json,png}. Needs a build with --features rocksdb (the script
# builds it; apt-get install -y librocksdb-dev libclang-dev).
set -euo pipefail
cd "$(dirname "$0")/.."

OUT="${OUT:-docs/bench}"
ROUNDS="${ROUNDS:-3}"
NUM="${NUM:-5000000}"
YCSB_NUM="${YCSB_NUM:-1000000}"
SENS_NUM="${SENS_NUM:-1000000}"
SENS_ROUNDS="${SENS_ROUNDS:-1}"
RATES="${RATES:-25000,50000,100000,150000,200000,300000}"
ONLY="${ONLY:-load worker-reads async ycsb sens latency}"
wants() { case " $ONLY " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }

if [ -z "${ROCKSDB_LIB_DIR:-}" ]; then
  lib="$(dpkg -L librocksdb-dev 2>/dev/null | grep '/librocksdb\.so$' | head -n 1 || true)"
  [ -n "$lib" ] || { echo "needs: apt-get install -y librocksdb-dev libclang-dev" >&2; exit 1; }
  export ROCKSDB_LIB_DIR="$(dirname "$lib")"
fi
cargo build --release -p strata-cli --features rocksdb
STRATA="${CARGO_TARGET_DIR:-target}/release/strata"
mkdir -p "$OUT"

# run PART ARGS...: one `strata bench` invocation, logged with when and at which commit.
run() {
  local part="$1"
  shift
  local args=(bench --rounds "$ROUNDS" --key-size 16 --value-size 128 "$@")
  echo "=== $part: strata ${args[*]}"
  {
    echo "# Measured $(date -u +%Y-%m-%dT%H:%MZ), commit $(git rev-parse --short HEAD)," \
      "load average $(cut -d' ' -f1-3 /proc/loadavg) at the start."
    echo "# strata ${args[*]}"
    "$STRATA" "${args[@]}"
  } 2>&1 | tee "$OUT/shards-$part.log"
}

per_thread=$((NUM / 8))
if wants load; then
  run load --engine sharded,rocksdb,sharded-rocksdb,strata --threads 8 --num "$NUM" \
    --writes "$per_thread" --reads 100000 --benchmarks fillrandom,readrandom \
    --json "$OUT/shards-load.json" --plot "$OUT/shards-load.png"
fi
if wants worker-reads; then
  # The same as load, sharded only, with every read sent through the shard's worker (p2KVS's
  # read path, batched) instead of the front's default direct reads.
  run worker-reads --engine sharded --direct-reads false --threads 8 --num "$NUM" \
    --writes "$per_thread" --reads 100000 --benchmarks fillrandom,readrandom \
    --json "$OUT/shards-worker-reads.json"
fi
if wants async; then
  run async --engine sharded,rocksdb --threads 1 --num "$NUM" --async \
    --benchmarks fillrandom --json "$OUT/shards-async.json" --plot "$OUT/shards-async.png"
fi
if wants ycsb; then
  run ycsb --engine sharded,rocksdb --threads 8 --num "$YCSB_NUM" --reads $((YCSB_NUM / 8)) \
    --benchmarks ycsb-load,ycsb-a --json "$OUT/shards-ycsb.json" --plot "$OUT/shards-ycsb.png"
fi
if wants sens; then
  for shards in 1 2 4; do
    for batch in 32 1; do
      ROUNDS="$SENS_ROUNDS" run "sens-s$shards-b$batch" --engine sharded --shards "$shards" --max-batch "$batch" \
        --threads 8 --num "$SENS_NUM" --writes $((SENS_NUM / 8)) --reads $((SENS_NUM / 16)) \
        --benchmarks fillrandom,ycsb-load,ycsb-a,ycsb-c \
        --json "$OUT/shards-sens-s$shards-b$batch.json"
    done
  done
fi
if wants latency; then
  run latency --engine sharded,rocksdb --threads 8 --num "$NUM" --duration 5 --rate "$RATES" \
    --benchmarks fillrandom --latency-plot "$OUT/shards-latency.png" \
    --json "$OUT/shards-latency.json"
fi
echo "Results in $OUT/shards-*"
