#!/usr/bin/env bash
# Builds the libFuzzer targets of test/fuzz (clang, build tree build-fuzz, -DARBOR_FUZZ=ON) and
# runs each of them: fuzz_packet (lib/ decoders), fuzz_stp (the spanning-tree core) and
# fuzz_peer (what a peer broker can send, through the whole broker). See test/fuzz/README.md.
#
#   scripts/run-fuzz.sh            every target for FUZZ_SECONDS (default 600) in turn (make fuzz),
#                                  growing build-fuzz/corpus/<target> from the checked-in seeds
#   scripts/run-fuzz.sh --smoke    what make test runs: every checked-in input replayed, then
#                                  FUZZ_SMOKE_SECONDS (default 15) of fuzzing, per target
#
# FUZZ_TARGETS="fuzz_peer fuzz_stp" picks targets; JOBS (default 2) is the build's parallelism.
# Fails when a target does not build or finds anything (crash, sanitizer report, leak, a hang
# past the timeout, a failed invariant); the input is left in build-fuzz/artifacts/.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
jobs=${JOBS:-2}
build=build-fuzz
mode=long
[ "${1:-}" = "--smoke" ] && mode=smoke
targets=${FUZZ_TARGETS:-"fuzz_packet fuzz_stp fuzz_peer"}

if ! command -v clang >/dev/null 2>&1; then
    echo "run-fuzz: clang is not installed (scripts/install-deps.sh installs clang and" \
         "libclang-rt-dev)" >&2
    exit 1
fi

echo "=== [fuzz] build ($build, clang)"
cmake -S . -B "$build" -DCMAKE_C_COMPILER=clang -DARBOR_FUZZ=ON >/dev/null
# shellcheck disable=SC2086
cmake --build "$build" -j "$jobs" --target $targets

seeds_of() {
    case "$1" in
    fuzz_packet) echo test/fuzz/corpus ;;
    fuzz_stp) echo test/fuzz/corpus_stp ;;
    fuzz_peer) echo test/fuzz/corpus_peer ;;
    esac
}

mkdir -p "$build/artifacts"
failed=()
for target in $targets; do
    seeds=$(seeds_of "$target")
    if [ "$mode" = smoke ]; then
        seconds=${FUZZ_SMOKE_SECONDS:-15}
        corpus=$(mktemp -d) # new inputs go here, never into the checked-in seeds
    else
        seconds=${FUZZ_SECONDS:-600}
        corpus="$build/corpus/$target"
        mkdir -p "$corpus"
    fi
    log="$build/$target.log"
    echo "=== [fuzz] $target: $seeds, then $seconds s of fuzzing (log: $log)"
    status=0
    "$root/$build/test/fuzz/$target" "$corpus" "$seeds" -max_len=4096 -timeout=25 \
        -max_total_time="$seconds" -print_final_stats=1 \
        -artifact_prefix="$root/$build/artifacts/$target-" >"$log" 2>&1 || status=$?
    [ "$mode" = smoke ] && rm -rf "$corpus"
    grep -E "^#[0-9]+[[:space:]]+(INITED|DONE)" "$log" | sed "s/^/    /" || true
    grep -E "^stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb)" "$log" |
        sed "s/^/    /" || true
    if [ "$status" -ne 0 ]; then
        echo "=== [fuzz] $target FAILED (exit $status):"
        grep -E "ERROR|SUMMARY|runtime error|Test unit written|artifact" "$log" | head -20 |
            sed "s/^/    /"
        failed+=("$target")
    fi
done

if [ ${#failed[@]} -gt 0 ]; then
    echo "=== [fuzz] failed: ${failed[*]} (inputs in $build/artifacts/; replay with" \
         "$build/test/fuzz/<target> <file>)"
    exit 1
fi
echo "=== [fuzz] all targets passed"
