#!/usr/bin/env bash
# `make bench-connections`: builds arbor, then opens many MQTT connections to one broker on
# loopback, arbor and Debian's mosquitto side by side in one run, each broker fresh for every
# measurement: memory per idle connection, per connection with two subscriptions, connections/s,
# and the fan-out of one QoS 0 message to every connection (first / p50 / p99 / last delivery,
# loss, broker CPU). The connections come from 127.0.0.2, 127.0.0.3, ...; the bench raises its
# open files soft limit to the hard one (the brokers inherit it), and N must stay below it.
# Writes the section "Many connections: memory and fan-out" of docs/benchmarks.md. The
# measuring is done by test/bench/connections_bench.py; every broker it starts is stopped by
# pid when its measurement ends, and again here on EXIT from the pid list it keeps, in case it
# was killed. Not part of `make test`.
#
# Environment:
#   BUILD=build                    build directory
#   JOBS=2                         parallel build jobs
#   ARBOR_BIN=...                  arbor binary (default $BUILD/arbor)
#   MOSQUITTO_BIN=...              mosquitto binary (default /usr/sbin/mosquitto)
#   BENCH_CONNECTIONS="1000 5000 10000 18000"   the numbers of connections
#   BENCH_CONNECTIONS_ROUNDS=1     rounds (each measures both kinds, taking turns)
#   BENCH_CONNECTIONS_QUICK=1      200 and 500 connections, shorter waits (a smoke test)
#   BENCH_CONNECTIONS_LOOPS=N      run arbor with `loops N` (the section says so)
#   BENCH_CONNECTIONS_OUT=...      where configs, logs and raw JSON go (default $BUILD/bench-connections)
#   BENCH_DOCS=docs                where benchmarks.md is (the section is replaced or appended)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/bench-common.sh
. scripts/bench-common.sh

args=()
if [ -n "${BENCH_CONNECTIONS:-}" ]; then args+=(--connections "$BENCH_CONNECTIONS"); fi
if [ -n "${BENCH_CONNECTIONS_LOOPS:-}" ]; then args+=(--arbor-loops "$BENCH_CONNECTIONS_LOOPS"); fi
bench_run connections "${args[@]}"
