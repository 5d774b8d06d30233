#!/usr/bin/env bash
# Builds arbor twice (normal and ASan+UBSan) and runs unit tests (ctest) and integration
# tests (pytest) against each build, and the unit tests once more on a ThreadSanitizer build; also builds (only) a Release tree, so that warnings
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

# The unit tests on a ThreadSanitizer build: what several threads share is tested from
# several threads in them (test_log_threads.c, ...).
run_tsan_units() {
    echo "=== [tsan] build (build-tsan)"
    cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=Debug -DARBOR_TSAN=ON >/dev/null
    cmake --build build-tsan -j "$jobs"
    echo "=== [tsan] unit tests"
    (cd build-tsan && TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
        ctest --output-on-failure -j "$jobs")
    echo "=== [tsan] done at ${SECONDS}s"
}
if [ "${1:-}" = --tsan-only ]; then
    run_tsan_units
    exit 0
fi

scripts/setup-venv.sh

echo "=== include-cycle check (src/ depends on itself one way)"
python3 scripts/check-include-cycles.py

run_suite() {
    local dir=$1 label=$2
    echo "=== [$label] build ($dir)"
    cmake --build "$dir" -j "$jobs"
    echo "=== [$label] unit tests"
    (cd "$dir" && ctest --output-on-failure -j "$jobs")
    echo "=== [$label] integration tests"
    ARBOR_BIN="$root/$dir/arbor" ARBOR_BUILD_DIR="$root/$dir" \
        "$root/.venv/bin/python" -m pytest -q -x --timeout=120 -p no:cacheprovider \
        ${xdist[@]+"${xdist[@]}"} --durations=15 test/integration
    echo "=== [$label] done at ${SECONDS}s"
}

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
    run_tsan_units
fi

if [ "${ARBOR_SKIP_SANITIZE:-0}" != 1 ]; then
    cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DARBOR_SANITIZE=ON >/dev/null
    export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
    export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
    run_suite build-asan sanitize
fi
