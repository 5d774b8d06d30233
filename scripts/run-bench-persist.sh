#!/usr/bin/env bash
# `make bench-persist`: arbor with persistence (snapshot and durable modes) against Debian's
# mosquitto with persistence, same run: QoS 1 throughput and latency with persistent
# subscribers, and start-up time with 100 000 retained messages and 10 000 persistent sessions
# on disk. Writes the section "Persistence" of docs/benchmarks.md (test/bench/persist_bench.py
# does the measuring; every broker it starts is stopped again). About 5 minutes.
#
# Environment: BUILD=build, JOBS=2, MOSQUITTO_BIN=/usr/sbin/mosquitto, BENCH_REPEATS=2,
# BENCH_OUT=$BUILD/bench-persist, BENCH_DOCS=docs, BENCH_PERSIST_RETAINED=100000,
# BENCH_PERSIST_SESSIONS=10000
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD:-build}
jobs=${JOBS:-2}
out_dir=${BENCH_OUT:-$build/bench-persist}
scripts/install-deps.sh
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j "$jobs" --target arbor arbor_bench
rm -rf "$out_dir"
python3 test/bench/persist_bench.py --arbor "$build/arbor" --bench "$build/test/bench/arbor_bench" \
    --mosquitto "${MOSQUITTO_BIN:-/usr/sbin/mosquitto}" --out "$out_dir" \
    --markdown "${BENCH_DOCS:-docs}/benchmarks.md" --repeats "${BENCH_REPEATS:-2}" \
    --retained "${BENCH_PERSIST_RETAINED:-100000}" --sessions "${BENCH_PERSIST_SESSIONS:-10000}"
