#!/usr/bin/env bash
# `make bench-tls`: builds arbor and arbor_bench, then measures TLS handshakes per second on one
# broker over loopback, arbor and Debian's mosquitto side by side in one run, each broker fresh
# for every measurement with one TLS listener: C clients (arbor_bench --connect-loop) each
# connecting over and over (TCP connect, TLS handshake, CONNECT, CONNACK, DISCONNECT, the
# broker's close) for 10 s; connects/s, p50/p99 connect time, broker and client CPU per connect,
# errors; ECDSA P-256 and RSA 2048 certificates (a throwaway CA made per run with the openssl
# CLI), TLS 1.3 and 1.2, then set_tcp_nodelay true, resumed sessions and plain TCP at the
# largest C. Writes the section "TLS handshakes" of docs/benchmarks.md. The measuring is done by
# test/bench/tls_bench.py; every broker it starts is stopped by pid when its measurement ends,
# and again here on EXIT from the pid list it keeps, in case it was killed. Not part of
# `make test`.
#
# Environment:
#   BUILD=build                    build directory
#   JOBS=2                         parallel build jobs
#   ARBOR_BIN=...                  arbor binary (default $BUILD/arbor)
#   MOSQUITTO_BIN=...              mosquitto binary (default /usr/sbin/mosquitto)
#   BENCH_TLS_CLIENTS="1 8 32"     the numbers of concurrent clients
#   BENCH_TLS_ROUNDS=1             rounds (each measures both brokers, taking turns)
#   BENCH_TLS_ARBOR_CONF="a 1;b 2" lines added to arbor's configuration only, separated by ';'
#                                  (e.g. a number of event loops, once arbor has it)
#   BENCH_TLS_CLIENT_THREADS=1     arbor_bench threads sharing the clients (more where the
#                                  machine has cores to spare beside the broker's)
#   BENCH_TLS_QUICK=1              1 and 8 clients, 1 s runs, fewer cases (a smoke test)
#   BENCH_TLS_OUT=...              where certificates, configs, logs and raw JSON go (default
#                                  $BUILD/bench-tls)
#   BENCH_DOCS=docs                where benchmarks.md is (the section is replaced or appended)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/bench-common.sh
. scripts/bench-common.sh

command -v openssl >/dev/null || { echo "$(basename "$0"): no openssl CLI" >&2; exit 1; }
args=(--bench "$build/test/bench/arbor_bench")
if [ -n "${BENCH_TLS_CLIENTS:-}" ]; then args+=(--clients "$BENCH_TLS_CLIENTS"); fi
if [ -n "${BENCH_TLS_CLIENT_THREADS:-}" ]; then
    args+=(--client-threads "$BENCH_TLS_CLIENT_THREADS")
fi
IFS=';' read -r -a extra <<<"${BENCH_TLS_ARBOR_CONF:-}"
for line in "${extra[@]}"; do
    line=$(printf '%s' "$line" | sed 's/^ *//; s/ *$//')
    if [ -n "$line" ]; then args+=(--arbor-extra-conf "$line"); fi
done
bench_run tls "${args[@]}"
