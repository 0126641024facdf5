#!/usr/bin/env bash
# Every `#[ignore]`d test of the workspace, run in a reduced form (its size knobs turned
# down), so that each one at least starts, reaches its subject and passes on every landing
# instead of rotting unseen. `.ci/run` calls this after `cargo test --workspace`, so the debug
# test binaries are already built. The README's "Long runs" table gives each test's full
# command; this script is the same list with small knobs.
#
# Usage: scripts/ignored-reduced.sh   (from anywhere; prints each command and its time)
set -euo pipefail

cd "$(dirname "$0")/.."

run() {
  local start=$SECONDS
  echo "+ $*"
  env "$@"
  echo "  ($((SECONDS - start)) s)"
}

EXACT=(-- --ignored --exact)

# strata-engine
run STRATA_CRASH_POINTS=300 STRATA_CRASH_OPS=250 \
  cargo test -q -p strata-engine --test crash crash_points_long "${EXACT[@]}"
run STRATA_CRASH_POINTS=300 STRATA_CRASH_OPS=250 \
  cargo test -q -p strata-engine --test crash crash_points_separated_long "${EXACT[@]}"
run STRATA_CRASH_POINTS=200 STRATA_CRASH_OPS=250 \
  cargo test -q -p strata-engine --test crash crash_points_l0_tier_long "${EXACT[@]}"
# The scattered-writeback mode of the long runs (every crash scatters unsynced writes).
run STRATA_CRASH_MODE=scattered STRATA_CRASH_POINTS=300 STRATA_CRASH_OPS=250 \
  cargo test -q -p strata-engine --test crash crash_points_separated_long "${EXACT[@]}"
run STRATA_CONC_CRASH_POINTS=60 \
  cargo test -q -p strata-engine --test crash_concurrent concurrent_crash_points_long "${EXACT[@]}"
run STRATA_CORRUPTION_SAMPLES=12 \
  cargo test -q -p strata-engine --test corruption corruption_flips_and_truncations_long "${EXACT[@]}"
run STRATA_MODEL_CASES=1 \
  cargo test -q -p strata-engine --test model -- --ignored _long
run STRATA_VLOG_SEEDS=2 STRATA_VLOG_OPS=400 \
  cargo test -q -p strata-engine --test vlog_model model_long "${EXACT[@]}"
run STRATA_VLOG_CONC_SEEDS=10 STRATA_VLOG_CONC_ROUNDS=2 \
  cargo test -q -p strata-engine --test vlog_concurrent_crash concurrent_crash_points_long "${EXACT[@]}"
run STRATA_VLOG_CRASH_SEEDS=1 \
  cargo test -q -p strata-engine --test vlog_crash crash_points_through_gc_long "${EXACT[@]}"

# strata (the sharded front)
run STRATA_SHARD_MODEL_SEEDS=1 STRATA_SHARD_MODEL_OPS=300 \
  cargo test -q -p strata --test model model_and_metamorphic_long "${EXACT[@]}"
run STRATA_SHARD_CRASH_SEEDS=1 STRATA_SHARD_CRASH_OPS=40 \
  cargo test -q -p strata --test crash cross_shard_batches_survive_every_crash_point_long "${EXACT[@]}"
run STRATA_CRASH_MODE=scattered STRATA_SHARD_CRASH_SEEDS=1 STRATA_SHARD_CRASH_OPS=40 \
  cargo test -q -p strata --test crash cross_shard_batches_survive_every_crash_point_long "${EXACT[@]}"
FIXTURES_OUT="$(mktemp -d)"
run STRATA_FIXTURES_OUT="$FIXTURES_OUT" \
  cargo test -q -p strata --test fixtures generate_fixtures "${EXACT[@]}"
rm -rf "$FIXTURES_OUT"

# strata-cli and strata-server
run STRATA_KILL_LOOP_KILLS=10 \
  cargo test -q -p strata-cli --test kill_loop kill_loop_long "${EXACT[@]}"
run STRATA_SERVER_CRASH_KILLS=10 \
  cargo test -q -p strata-server --test crash acknowledged_writes_survive_kill_9_long "${EXACT[@]}"
run STRATA_SERVER_CRASH_KILLS=5 \
  cargo test -q -p strata-server --test crash_types acknowledged_type_writes_survive_kill_9_long "${EXACT[@]}"
run STRATA_SCRIPT_CRASH_KILLS=5 \
  cargo test -q -p strata-server --test script_crash scripts_survive_kill_9_whole_or_not_at_all_long "${EXACT[@]}"
run STRATA_SERVER_CRASH_KILLS=5 \
  cargo test -q -p strata-server --test crash_streams acknowledged_stream_writes_survive_kill_9_long "${EXACT[@]}"
run STRATA_BUS_FUZZ_ITERS=20000 \
  cargo test -q -p strata-server --lib cluster::bus::fuzz_tests::fuzz_decode_long "${EXACT[@]}"
# Longer sequences (100 messages) than the fast test's, over as many sequences.
run STRATA_CLUSTER_FUZZ_SEQUENCES=300 \
  cargo test -q -p strata-server --lib \
  cluster::fuzz_tests::mutated_messages_never_break_the_state_machine_long "${EXACT[@]}"
# No size knob yet (the server crate's own test): run as it is, in the debug build.
run cargo test -q -p strata-server --lib filter::tests::reclaims_a_deleted_collection_of_1m_members \
  "${EXACT[@]}"

echo "every ignored test passed in its reduced form ($SECONDS s)"
