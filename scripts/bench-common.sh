# Sourced by scripts/run-bench-*.sh (bash): the process
# handling of a benchmark whose Python script starts brokers and lists the pid of each in
# $pidfile. On EXIT every broker of that list still running is stopped by pid (TERM, then KILL
# after a second), in case the script was killed; INT and TERM are passed on to the script
# first. bench_setup checks $mosquitto_bin, builds arbor_bench (and arbor unless ARBOR_BIN is
# set) in $build, empties $out_dir and starts $pidfile there; bench_measure runs
# `python3 SCRIPT ARGS...` and waits for it. The caller sets out_dir before bench_setup;
# build, jobs, docs_dir and mosquitto_bin come from BUILD, JOBS, BENCH_DOCS and MOSQUITTO_BIN.
build=${BUILD:-build}
jobs=${JOBS:-2}
docs_dir=${BENCH_DOCS:-docs}
mosquitto_bin=${MOSQUITTO_BIN:-/usr/sbin/mosquitto}
pidfile=""
py_pid=""

# still one of the brokers started here? (a pid may have been reused since)
bench_ours() {
    kill -0 "$1" 2>/dev/null && grep -qaE 'arbor|mosquitto' "/proc/$1/cmdline" 2>/dev/null
}

bench_cleanup() {
    [ -n "$pidfile" ] && [ -f "$pidfile" ] || return 0
    local pid left=0
    while read -r pid; do
        if bench_ours "$pid"; then kill -TERM "$pid" 2>/dev/null || true; left=1; fi
    done <"$pidfile"
    [ "$left" = 1 ] || return 0
    sleep 1
    while read -r pid; do
        if bench_ours "$pid"; then kill -KILL "$pid" 2>/dev/null || true; fi
    done <"$pidfile"
    return 0
}

bench_on_signal() {
    if [ -n "$py_pid" ]; then
        kill -TERM "$py_pid" 2>/dev/null || true
        wait "$py_pid" 2>/dev/null || true
    fi
    exit 143
}

trap bench_cleanup EXIT
trap bench_on_signal INT TERM

bench_setup() {
    if [ ! -x "$mosquitto_bin" ]; then
        echo "$(basename "$0"): no mosquitto at $mosquitto_bin" \
            "(scripts/install-deps.sh installs it)" >&2
        exit 1
    fi
    echo "=== building arbor and arbor_bench ($build)"
    cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
    cmake --build "$build" -j "$jobs" --target arbor_bench
    [ -n "${ARBOR_BIN:-}" ] || cmake --build "$build" -j "$jobs" --target arbor
    rm -rf "$out_dir"
    mkdir -p "$out_dir" "$docs_dir"
    pidfile=$out_dir/pids
    : >"$pidfile"
}

# in the background, so that a signal reaches bench_on_signal while it runs
bench_measure() {
    python3 "$@" &
    py_pid=$!
    wait "$py_pid"
}

# bench_run NAME ARGS...: the whole of a comparison that needs no arbor_bench options:
# test/bench/NAME_bench.py with --arbor (ARBOR_BIN or $build/arbor), --mosquitto, --out
# (BENCH_<NAME>_OUT or $build/bench-NAME), --markdown, --rounds (BENCH_<NAME>_ROUNDS, default 1),
# --pidfile, --quick when BENCH_<NAME>_QUICK=1, then ARGS. A caller that defines the function
# bench_prepare has it run once $out_dir is laid out, before the measuring (e.g. to build a
# client into it).
bench_run() {
    local name=$1 upper
    shift
    upper=$(printf '%s' "$name" | tr '[:lower:]' '[:upper:]')
    local out_var=BENCH_${upper}_OUT rounds_var=BENCH_${upper}_ROUNDS
    local quick_var=BENCH_${upper}_QUICK
    out_dir=${!out_var:-$build/bench-$name}
    bench_setup
    if [ "$(type -t bench_prepare)" = function ]; then bench_prepare; fi
    local args=(--arbor "${ARBOR_BIN:-$build/arbor}" --mosquitto "$mosquitto_bin"
                --out "$out_dir" --markdown "$docs_dir/benchmarks.md"
                --rounds "${!rounds_var:-1}" --pidfile "$pidfile")
    if [ "${!quick_var:-0}" = 1 ]; then args+=(--quick); fi
    bench_measure "test/bench/${name}_bench.py" "${args[@]}" "$@"
}
