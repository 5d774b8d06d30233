#!/usr/bin/env bash
# `make bench-partition`: builds arbor, then measures the drain of a partition's backlog between
# two brokers on loopback, arbor peers (MQTT-ST resync) and Debian's mosquitto bridged with
# `cleansession false` side by side in one run: the link cut for BENCH_PARTITION_SECONDS while a
# publisher sends BENCH_PARTITION_RATE QoS 1 msg/s, then healed; heal to first and last message,
# drain rate, exactly once, live latency during the drain, memory and disk per million
# backlog messages. Writes the section "Partitions: MQTT-ST resync or a Mosquitto bridge" of
# docs/benchmarks.md. The measuring is done by test/bench/partition_bench.py; every process it
# starts is stopped by pid when it ends, and again here on EXIT from the pid list it keeps, in
# case it was killed. Not part of `make test`.
#
# Environment:
#   BUILD=build                   build directory
#   JOBS=2                        parallel build jobs
#   ARBOR_BIN=...                 arbor binary (default $BUILD/arbor)
#   MOSQUITTO_BIN=...             mosquitto binary (default /usr/sbin/mosquitto)
#   BENCH_PARTITION_SECONDS=300   how long the link is cut (each kind; about 2 x this in all)
#   BENCH_PARTITION_RATE=1000     QoS 1 msg/s published during the partition
#   BENCH_PARTITION_ROUNDS=1      rounds (each measures both kinds, taking turns)
#   BENCH_PARTITION_QUICK=1       a 3 s partition at 300 msg/s (a smoke test of the pipeline)
#   BENCH_PARTITION_OUT=...       where configs, logs and raw JSON go (default $BUILD/bench-partition)
#   BENCH_DOCS=docs               where benchmarks.md is (the section is replaced or appended)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/bench-common.sh
. scripts/bench-common.sh

args=()
[ -n "${BENCH_PARTITION_SECONDS:-}" ] && args+=(--partition-seconds "$BENCH_PARTITION_SECONDS")
[ -n "${BENCH_PARTITION_RATE:-}" ] && args+=(--rate "$BENCH_PARTITION_RATE")
bench_run partition "${args[@]}"
