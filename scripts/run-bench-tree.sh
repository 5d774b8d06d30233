#!/usr/bin/env bash
# `make bench-tree`: builds arbor and arbor_bench, then compares arbor MQTT-ST trees with Debian's
# mosquitto brokers joined by ordinary bridges into the same static trees (one broker, a line of
# 3, a tree of 5), all on free loopback ports, and writes the section "MQTT-ST trees against
# bridged Mosquitto" of docs/benchmarks.md. The measuring is done by test/bench/tree_bench.py;
# every process it starts is stopped by pid when it ends, and again here on EXIT from the pid
# list it keeps, in case it was killed. Not part of `make test`.
#
# Environment:
#   BUILD=build              build directory
#   JOBS=2                   parallel build jobs
#   ARBOR_BIN=...            arbor binary (default $BUILD/arbor)
#   MOSQUITTO_BIN=...        mosquitto binary (default /usr/sbin/mosquitto)
#   BENCH_TREE_ROUNDS=2      rounds (each measures every network once, the brokers taking turns)
#   BENCH_TREE_QUICK=1       short runs (a smoke test of the pipeline, figures not meaningful)
#   BENCH_TREE_LOOPS=N       run the arbor brokers with `loops N` (the section says so)
#   BENCH_TREE_OUT=...       where configs, logs and raw JSON go (default $BUILD/bench-tree)
#   BENCH_DOCS=docs          where benchmarks.md is (the section is replaced or appended)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/bench-common.sh
. scripts/bench-common.sh
out_dir=${BENCH_TREE_OUT:-$build/bench-tree}

bench_setup
arbor_bin=${ARBOR_BIN:-$build/arbor}
args=(--arbor "$arbor_bin" --mosquitto "$mosquitto_bin" --bench "$build/test/bench/arbor_bench"
      --out "$out_dir" --markdown "$docs_dir/benchmarks.md" --rounds "${BENCH_TREE_ROUNDS:-2}"
      --pidfile "$pidfile")
[ "${BENCH_TREE_QUICK:-0}" = 1 ] && args+=(--quick)
[ -n "${BENCH_TREE_LOOPS:-}" ] && args+=(--arbor-loops "$BENCH_TREE_LOOPS")
bench_measure test/bench/tree_bench.py "${args[@]}"
