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
#   BENCH_TREE_OUT=...       where configs, logs and raw JSON go (default $BUILD/bench-tree)
#   BENCH_DOCS=docs          where benchmarks.md is (the section is replaced or appended)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD:-build}
jobs=${JOBS:-2}
out_dir=${BENCH_TREE_OUT:-$build/bench-tree}
docs_dir=${BENCH_DOCS:-docs}
mosquitto_bin=${MOSQUITTO_BIN:-/usr/sbin/mosquitto}
pidfile=""

# still one of the brokers started here? (a pid may have been reused since)
ours() {
    kill -0 "$1" 2>/dev/null && grep -qaE 'arbor|mosquitto' "/proc/$1/cmdline" 2>/dev/null
}

cleanup() {
    [ -n "$pidfile" ] && [ -f "$pidfile" ] || return 0
    local pid left=0
    while read -r pid; do
        if ours "$pid"; then kill -TERM "$pid" 2>/dev/null || true; left=1; fi
    done <"$pidfile"
    [ "$left" = 1 ] || return 0
    sleep 1
    while read -r pid; do
        if ours "$pid"; then kill -KILL "$pid" 2>/dev/null || true; fi
    done <"$pidfile"
    return 0
}
trap cleanup EXIT
py_pid=""
on_signal() {
    if [ -n "$py_pid" ]; then
        kill -TERM "$py_pid" 2>/dev/null || true
        wait "$py_pid" 2>/dev/null || true
    fi
    exit 143
}
trap on_signal INT TERM

if [ ! -x "$mosquitto_bin" ]; then
    echo "run-bench-tree: no mosquitto at $mosquitto_bin (scripts/install-deps.sh installs it)" >&2
    exit 1
fi
echo "=== building arbor and arbor_bench ($build)"
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j "$jobs" --target arbor_bench
[ -n "${ARBOR_BIN:-}" ] || cmake --build "$build" -j "$jobs" --target arbor
arbor_bin=${ARBOR_BIN:-$build/arbor}

rm -rf "$out_dir"
mkdir -p "$out_dir" "$docs_dir"
pidfile=$out_dir/pids
: >"$pidfile"
args=(--arbor "$arbor_bin" --mosquitto "$mosquitto_bin" --bench "$build/test/bench/arbor_bench"
      --out "$out_dir" --markdown "$docs_dir/benchmarks.md" --rounds "${BENCH_TREE_ROUNDS:-2}"
      --pidfile "$pidfile")
[ "${BENCH_TREE_QUICK:-0}" = 1 ] && args+=(--quick)
# in the background, so that a signal reaches on_signal while it runs
python3 test/bench/tree_bench.py "${args[@]}" &
py_pid=$!
wait "$py_pid"
