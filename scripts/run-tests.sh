#!/usr/bin/env bash
# Builds arbor twice (normal and ASan+UBSan) and runs unit tests (ctest) and integration
# tests (pytest) against each build: the normal build with one event loop (the default), the
# ASan+UBSan build with `loops 2` (ARBOR_LOOPS, conftest.py). On a ThreadSanitizer build it runs the unit
# tests and the integration tests of several loops with `loops 4`. It also builds (only) a Release tree, so that warnings
# that only gcc -O3 finds fail here under -Werror, and builds the libFuzzer targets with clang
# (build-fuzz) and runs each briefly on its checked-in corpus (scripts/run-fuzz.sh --smoke,
# about a minute; ARBOR_SKIP_FUZZ=1 skips it). Used by `make test` and by CI.
#
# The integration tests run in TEST_WORKERS pytest-xdist processes (default 2; 0 runs them
# in this process, one after another). Most of their time is deliberate waiting (timers,
# "nothing else arrives" windows), so two workers on a 2-core machine halve the wall time;
# each test starts its own brokers on free ports, whole files go to one worker
# (--dist loadfile, so a file's module-scoped clusters and certificates are made once),
# and the few tests on well-known ports take a machine-wide lock (conftest.fixed_ports).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
jobs=${JOBS:-2}
workers=${TEST_WORKERS:-2}
xdist=()
if [ "$workers" -gt 0 ]; then
    xdist=(-n "$workers" --dist loadfile)
fi

# The files of the integration suite run on the ThreadSanitizer build with `loops 4`: the
# one about several loops, the core client behaviour their hand-overs touch, snapshot
# persistence (its saves read every loop's sessions with the other loops parked), and MQTT-ST
# peering (every loop stamps and hands messages to loop 0's links; loop 0 reads the
# subscription tree every loop writes for its interest announcements, and delivers shared
# groups' messages to sessions of every loop).
tsan_integration=(test/integration/test_loops.py test/integration/test_connect.py
                  test/integration/test_publish_qos.py test/integration/test_sessions.py
                  test/integration/test_publisher_pressure.py test/integration/test_tls.py
                  test/integration/test_stress_sessions.py test/integration/test_persistence.py
                  test/integration/test_peer_loops.py test/integration/test_peer_interest.py
                  test/integration/test_peer_shares.py)

# The unit tests on a ThreadSanitizer build: what several threads share is tested from
# several threads in them (test_log_threads.c, ...); then the broker itself with 4 loops.
run_tsan() {
    echo "=== [tsan] build (build-tsan)"
    cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=Debug -DARBOR_TSAN=ON >/dev/null
    cmake --build build-tsan -j "$jobs"
    echo "=== [tsan] unit tests"
    (cd build-tsan && TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
        ctest --output-on-failure -j "$jobs")
    echo "=== [tsan] integration tests, loops 4"
    # a TSan broker with 4 loops starts and stops several times slower than a plain one
    ARBOR_LOOPS=4 TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
        ARBOR_START_TIMEOUT=60 ARBOR_STOP_TIMEOUT=60 \
        ARBOR_BIN="$root/build-tsan/arbor" ARBOR_BUILD_DIR="$root/build-tsan" \
        "$root/.venv/bin/python" -m pytest -q -x --timeout=300 -p no:cacheprovider \
        ${xdist[@]+"${xdist[@]}"} "${tsan_integration[@]}"
    echo "=== [tsan] done at ${SECONDS}s"
}

# The whole integration suite on the normal build with 2, then 4 loops (make test-loops).
run_loops() {
    cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
    cmake --build build -j "$jobs"
    for loops in 2 4; do
        echo "=== [loops $loops] integration tests"
        ARBOR_LOOPS=$loops ARBOR_BIN="$root/build/arbor" ARBOR_BUILD_DIR="$root/build" \
            "$root/.venv/bin/python" -m pytest -q -x --timeout=120 -p no:cacheprovider \
            ${xdist[@]+"${xdist[@]}"} test/integration
        echo "=== [loops $loops] done at ${SECONDS}s"
    done
}

scripts/setup-venv.sh

if [ "${1:-}" = --tsan-only ]; then
    run_tsan
    exit 0
fi
if [ "${1:-}" = --loops-only ]; then
    run_loops
    exit 0
fi

echo "=== include-cycle check (src/ depends on itself one way)"
python3 scripts/check-include-cycles.py

# run_suite DIR LABEL [LOOPS [PYTEST ARGS...]]
run_suite() {
    local dir=$1 label=$2 loops=${3:-}
    shift $(($# < 3 ? $# : 3))
    echo "=== [$label] build ($dir)"
    cmake --build "$dir" -j "$jobs"
    echo "=== [$label] unit tests"
    (cd "$dir" && ctest --output-on-failure -j "$jobs")
    echo "=== [$label] integration tests${loops:+, loops $loops}"
    ARBOR_LOOPS="$loops" ARBOR_BIN="$root/$dir/arbor" ARBOR_BUILD_DIR="$root/$dir" \
        "$root/.venv/bin/python" -m pytest -q -x --timeout=120 -p no:cacheprovider \
        ${xdist[@]+"${xdist[@]}"} --durations=15 "$@" test/integration
    echo "=== [$label] done at ${SECONDS}s"
}

# What the ASan+UBSan pass leaves to the plain one, to keep `make test` near 30 minutes:
# the smoke tests of the benchmark scripts (they check the scripts' pipelines and pages, about
# 5 minutes of the pass; the broker's own behaviour under load is in test_bench_tool.py and
# test_bench_transports.py, which stay), and the partitions of test_peer_partition*.py last
# 30 s instead of 120 (the same code paths, a shorter backlog; the plain pass keeps 120).
sanitize_skips=(--ignore=test/integration/test_bench_bridge.py
                --ignore=test/integration/test_bench_connections.py
                --ignore=test/integration/test_bench_interest.py
                --ignore=test/integration/test_bench_overload.py
                --ignore=test/integration/test_bench_partition.py
                --ignore=test/integration/test_bench_tls.py)

echo "=== [release] build only (build-release)"
cmake -S . -B build-release -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build-release -j "$jobs"

# The fuzz targets must keep building and find nothing in their corpus and a few seconds
# of fuzzing each (make fuzz runs them for longer).
if [ "${ARBOR_SKIP_FUZZ:-0}" != 1 ]; then
    JOBS="$jobs" scripts/run-fuzz.sh --smoke
fi

cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
run_suite build plain

if [ "${ARBOR_SKIP_SANITIZE:-0}" != 1 ]; then
    run_tsan
fi

if [ "${ARBOR_SKIP_SANITIZE:-0}" != 1 ]; then
    cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DARBOR_SANITIZE=ON >/dev/null
    export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
    export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
    ARBOR_PARTITION_SECONDS=30 run_suite build-asan sanitize 2 "${sanitize_skips[@]}"
fi
