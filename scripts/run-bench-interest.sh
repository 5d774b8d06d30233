#!/usr/bin/env bash
# `make bench-interest`: builds arbor and arbor_bench, then measures interest routing (issue 20)
# side by side in one run: three arbor brokers fully meshed with full replication
# (`peer_routing all`) and by interest, and three Debian mosquitto brokers in a static tree
# whose bridges have per-topic `topic` lines, under the MQTT-ST paper's local scenario (clients
# spread, 100 % locality) and a Detti-style random attach with many topics; then what interest
# itself costs (10,000 subscriptions, changes, churn). Writes the section "Interest routing" of
# docs/benchmarks.md. The measuring is done by test/bench/interest_bench.py; every process it
# starts is stopped by pid when it ends, and again here on EXIT from the pid list it keeps.
# Not part of `make test`.
#
# Environment:
#   BUILD=build                  build directory
#   JOBS=2                       parallel build jobs
#   ARBOR_BIN=...                arbor binary (default $BUILD/arbor)
#   MOSQUITTO_BIN=...            mosquitto binary (default /usr/sbin/mosquitto)
#   BENCH_INTEREST_ROUNDS=2      rounds (each runs every load on every network)
#   BENCH_INTEREST_QUICK=1       short runs (a smoke test of the pipeline, figures not meaningful)
#   BENCH_INTEREST_LOOPS=N       run the arbor brokers with `loops N` (the section says so)
#   BENCH_INTEREST_OUT=...       where configs, logs and raw JSON go (default $BUILD/bench-interest)
#   BENCH_DOCS=docs              where benchmarks.md is (the section is replaced or appended)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/bench-common.sh
. scripts/bench-common.sh
out_dir=${BENCH_INTEREST_OUT:-$build/bench-interest}

bench_setup
arbor_bin=${ARBOR_BIN:-$build/arbor}
args=(--arbor "$arbor_bin" --mosquitto "$mosquitto_bin" --bench "$build/test/bench/arbor_bench"
      --out "$out_dir" --markdown "$docs_dir/benchmarks.md"
      --rounds "${BENCH_INTEREST_ROUNDS:-2}" --pidfile "$pidfile")
[ "${BENCH_INTEREST_QUICK:-0}" = 1 ] && args+=(--quick)
[ -n "${BENCH_INTEREST_LOOPS:-}" ] && args+=(--arbor-loops "$BENCH_INTEREST_LOOPS")
bench_measure test/bench/interest_bench.py "${args[@]}"
