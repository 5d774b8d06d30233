#!/usr/bin/env bash
# `make bench-bridge`: builds arbor and arbor_bench, then measures an edge broker bridged to a
# central broker (Debian's mosquitto), the edge being arbor or Debian's mosquitto side by side in
# one run: QoS 1 `out` and `in` throughput, latency and the edge's CPU per bridged message, and
# the time to drain a backlog of 100 000 queued messages once the central is back. Writes the
# section "Bridges: arbor or Mosquitto at the edge" of docs/benchmarks.md. The measuring is done
# by test/bench/bridge_bench.py; every process it starts is stopped by pid when it ends, and
# again here on EXIT from the pid list it keeps, in case it was killed. Not part of `make test`.
#
# Environment:
#   BUILD=build              build directory
#   JOBS=2                   parallel build jobs
#   ARBOR_BIN=...            arbor binary (default $BUILD/arbor)
#   MOSQUITTO_BIN=...        mosquitto binary (default /usr/sbin/mosquitto)
#   BENCH_BRIDGE_ROUNDS=2    rounds (each measures both edges, taking turns)
#   BENCH_BRIDGE_BACKLOG=... messages of the backlog drain (default 100000, quick 5000)
#   BENCH_BRIDGE_QUICK=1     short runs (a smoke test of the pipeline, figures not meaningful)
#   BENCH_BRIDGE_OUT=...     where configs, logs and raw JSON go (default $BUILD/bench-bridge)
#   BENCH_DOCS=docs          where benchmarks.md is (the section is replaced or appended)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/bench-common.sh
. scripts/bench-common.sh
out_dir=${BENCH_BRIDGE_OUT:-$build/bench-bridge}

bench_setup
arbor_bin=${ARBOR_BIN:-$build/arbor}
args=(--arbor "$arbor_bin" --mosquitto "$mosquitto_bin" --bench "$build/test/bench/arbor_bench"
      --out "$out_dir" --markdown "$docs_dir/benchmarks.md" --rounds "${BENCH_BRIDGE_ROUNDS:-2}"
      --pidfile "$pidfile")
[ -n "${BENCH_BRIDGE_BACKLOG:-}" ] && args+=(--backlog "$BENCH_BRIDGE_BACKLOG")
[ "${BENCH_BRIDGE_QUICK:-0}" = 1 ] && args+=(--quick)
bench_measure test/bench/bridge_bench.py "${args[@]}"
