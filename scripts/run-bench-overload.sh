#!/usr/bin/env bash
# `make bench-overload`: builds arbor and the Go client of test/bench/overload (the library
# github.com/eclipse/paho.mqtt.golang), then runs the MQTT-ST paper's single-broker "local"
# scenario, in which the subscribers are slower than the publishers: 10 publishers at QoS 2,
# each waiting for PUBCOMP before its next publish, 1000 messages of 100 bytes each, 10 and
# then 50 subscribers on bench/# at QoS 2; arbor (loops 1, and one loop per CPU) and Debian's
# mosquitto side by side, a fresh broker for every run, the kinds taking turns to go first
# from one round to the next. Figures:
# publication throughput per publisher, end-to-end latency (mean, p99, max), loss, duplicates,
# order, broker CPU. Writes the section "Overload: slow subscribers (the MQTT-ST paper's local
# scenario)" of docs/benchmarks.md. The measuring is done by test/bench/overload_bench.py;
# every broker it starts is stopped by pid when its run ends, and again here on EXIT from the
# pid list it keeps, in case it was killed. Not part of `make test`.
#
# Needs Go 1.24 or later (paho.mqtt.golang v1.5.1 asks for it; Debian 12's golang-go is 1.19,
# too old): `go` on PATH, /usr/local/go/bin/go, or GO=/path/to/go. The modules come from the
# Go module proxy (go.sum pins them) unless they are in the module cache already.
#
# Environment:
#   BUILD=build                    build directory
#   JOBS=2                         parallel build jobs
#   ARBOR_BIN=...                  arbor binary (default $BUILD/arbor)
#   MOSQUITTO_BIN=...              mosquitto binary (default /usr/sbin/mosquitto)
#   GO=...                         the go command (default: go on PATH, else /usr/local/go/bin/go)
#   BENCH_OVERLOAD_SUBSCRIBERS="10 50"   the numbers of subscribers
#   BENCH_LOOPS=N                  loops of the "arbor-loops" broker (default: the CPUs; "arbor"
#                                  runs loops 1)
#   BENCH_OVERLOAD_ROUNDS=3        rounds (each runs both kinds, taking turns to go first)
#   BENCH_OVERLOAD_QUICK=1         100 messages per publisher, one round (a smoke test)
#   BENCH_OVERLOAD_OUT=...         where configs, logs, the client and raw JSON go (default
#                                  $BUILD/bench-overload)
#   BENCH_DOCS=docs                where benchmarks.md is (the section is replaced or appended)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/bench-common.sh
. scripts/bench-common.sh

GO=${GO:-$(command -v go || true)}
if [ -z "$GO" ] && [ -x /usr/local/go/bin/go ]; then GO=/usr/local/go/bin/go; fi
if [ -z "$GO" ] || ! "$GO" version >/dev/null 2>&1; then
    echo "$(basename "$0"): no Go toolchain: the client of test/bench/overload needs Go 1.24" \
        "or later (Debian 12's golang-go is 1.19, too old); put go on PATH or set GO=" >&2
    exit 1
fi
export GO

if [ "${BENCH_OVERLOAD_QUICK:-0}" = 1 ]; then
    BENCH_OVERLOAD_ROUNDS=${BENCH_OVERLOAD_ROUNDS:-1}
else
    BENCH_OVERLOAD_ROUNDS=${BENCH_OVERLOAD_ROUNDS:-3}
fi

BENCH_OVERLOAD_OUT=${BENCH_OVERLOAD_OUT:-$build/bench-overload}
case $BENCH_OVERLOAD_OUT in /*) ;; *) BENCH_OVERLOAD_OUT=$PWD/$BENCH_OVERLOAD_OUT ;; esac
client=$BENCH_OVERLOAD_OUT/overload

# after bench_setup has emptied the output directory
bench_prepare() {
    echo "=== building the Go client ($("$GO" version))"
    (cd test/bench/overload && "$GO" build -buildvcs=false -o "$client" .)
}

args=(--bench "$client")
if [ -n "${BENCH_OVERLOAD_SUBSCRIBERS:-}" ]; then
    args+=(--subscribers "$BENCH_OVERLOAD_SUBSCRIBERS")
fi
bench_run overload "${args[@]}"
