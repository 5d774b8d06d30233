#!/usr/bin/env bash
# `make bench`: builds arbor and arbor_bench, starts arbor and Debian's mosquitto with the same
# configuration on free loopback ports, runs the built-in single-broker scenarios against each
# broker in alternation, and writes docs/benchmarks.md with its chart docs/benchmarks.png.
# Every broker it starts is stopped again (by pid) when it exits.
#
# Environment:
#   BUILD=build            build directory
#   JOBS=2                 parallel build jobs
#   ARBOR_BIN=...          arbor binary (default $BUILD/arbor)
#   MOSQUITTO_BIN=...      mosquitto binary (default /usr/sbin/mosquitto)
#   BENCH_REPEATS=2        repetitions of each non-search scenario per broker
#   BENCH_QUICK=1          short runs (a smoke test of the pipeline, figures not meaningful)
#   BENCH_OUT=...          where the raw JSON goes (default $BUILD/bench-results)
#   BENCH_DOCS=docs        where benchmarks.md and benchmarks.png go
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
build=${BUILD:-build}
jobs=${JOBS:-2}
repeats=${BENCH_REPEATS:-2}
quick=${BENCH_QUICK:-0}
out_dir=${BENCH_OUT:-$build/bench-results}
docs_dir=${BENCH_DOCS:-docs}
mosquitto_bin=${MOSQUITTO_BIN:-/usr/sbin/mosquitto}
started_pids=()

log() { echo "=== $*"; }

as_root() {
    if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else
        echo "run-bench: need root to install packages: $*" >&2; return 1; fi
}

ensure_packages() {
    local missing=()
    [ -x "$mosquitto_bin" ] || missing+=(mosquitto)
    command -v gnuplot >/dev/null || missing+=(gnuplot-nox)
    if [ ${#missing[@]} -gt 0 ]; then
        log "installing ${missing[*]}"
        as_root apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null ||
            { as_root apt-get update >/dev/null && as_root apt-get install -y \
                --no-install-recommends "${missing[@]}" >/dev/null; }
    fi
    # the Debian package starts a system mosquitto on port 1883; we never use that one
}

build_tools() {
    log "building arbor and arbor_bench ($build)"
    cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
    cmake --build "$build" -j "$jobs" --target arbor_bench
    if [ -z "${ARBOR_BIN:-}" ] && ! cmake --build "$build" -j "$jobs" --target arbor; then
        echo "run-bench: arbor does not build; fix that or set ARBOR_BIN" >&2
        exit 1
    fi
}

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

port_open() {
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# The one configuration both brokers get (mosquitto.conf syntax; arbor reads the same).
write_config() {
    local file=$1 port=$2
    cat >"$file" <<EOF
listener $port 127.0.0.1
allow_anonymous true
log_dest none
connection_messages false
max_inflight_messages 20
max_queued_messages 100000
EOF
}

# start_broker NAME BINARY -> sets broker_pid and broker_port
start_broker() {
    local name=$1 bin=$2
    broker_port=$(free_port)
    write_config "$out_dir/$name.conf" "$broker_port"
    "$bin" -c "$out_dir/$name.conf" >>"$out_dir/$name.log" 2>&1 &
    broker_pid=$!
    started_pids+=("$broker_pid")
    for _ in $(seq 1 200); do
        if port_open "$broker_port"; then return 0; fi
        if ! kill -0 "$broker_pid" 2>/dev/null; then break; fi
        sleep 0.05
    done
    echo "run-bench: $name did not start on port $broker_port; log:" >&2
    tail -20 "$out_dir/$name.log" >&2
    return 1
}

stop_broker() {
    local pid=$1
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.05
    done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
}

cleanup() {
    for pid in "${started_pids[@]}"; do
        kill -0 "$pid" 2>/dev/null && stop_broker "$pid"
    done
    return 0
}
trap cleanup EXIT

# The scenarios: name and arbor_bench arguments. Durations are chosen so that the whole run
# (about 25 limit-search steps per broker plus the micro-benchmarks) stays under 10 minutes.
scenario_args() {
    local long=5 trim=1 search="-d 4 --trim 1 --drain 1"
    if [ "$quick" = 1 ]; then long=2; trim=0.5; search="-d 1.5 --trim 0.25 --drain 0.5 --splits 4"; fi
    case $1 in
    ildm) echo "-s ildm $search" ;;
    mqtt-st-benchmark) echo "-s mqtt-st-benchmark -d $long --trim $trim --drain 1" ;;
    qos0-1to1) echo "-s qos0-1to1 -d $long --trim $trim --drain 1" ;;
    qos0-1to50) echo "-s qos0-1to50 -d $long --trim $trim --drain 1" ;;
    qos1-pairs) echo "-s qos1-pairs -d $long --trim $trim --drain 1" ;;
    qos2-pairs) echo "-s qos2-pairs -d $long --trim $trim --drain 1" ;;
    esac
}
scenarios=(ildm mqtt-st-benchmark qos0-1to1 qos0-1to50 qos1-pairs qos2-pairs)

# run_one BROKER SCENARIO REPETITION
run_one() {
    local name=$1 scenario=$2 rep=$3 bin
    bin=$([ "$name" = arbor ] && echo "$arbor_bin" || echo "$mosquitto_bin")
    start_broker "$name" "$bin"
    local json="$out_dir/${name}__${scenario}__${rep}.json"
    # shellcheck disable=SC2046
    if ! "$bench" $(scenario_args "$scenario") -b "127.0.0.1:$broker_port" -P "$broker_pid" \
        --label "$name" --json "$json" --no-per-second >"$out_dir/${name}__${scenario}__${rep}.txt"; then
        echo "run-bench: arbor_bench failed for $name/$scenario; output:" >&2
        tail -20 "$out_dir/${name}__${scenario}__${rep}.txt" >&2
        stop_broker "$broker_pid"
        return 1
    fi
    stop_broker "$broker_pid"
    python3 - "$json" "$name" "$scenario" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1])).get("result") or {}
lat = r.get("latency_ms") or {}
cpu = r.get("broker_cpu_us_per_msg")
print("    %-9s %-18s ingress %10.0f  egress %10.0f msg/s  latency %8.3f ms  loss %6.2f %%  cpu %s us/msg" % (
    sys.argv[2], sys.argv[3], r.get("ingress") or 0, r.get("egress") or 0, lat.get("mean") or 0,
    100 * (r.get("loss_rate") or 0), "%.2f" % cpu if cpu is not None else "n/a"))
EOF
}

write_env() {
    python3 - "$out_dir/env.json" <<EOF
import json, os, platform, subprocess, sys, time
def first_line(cmd):
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=10)
        return (out.stdout + out.stderr).strip().splitlines()[0]
    except Exception:
        return "?"
cpu = "?"
for line in open("/proc/cpuinfo"):
    if line.startswith("model name"):
        cpu = line.split(":", 1)[1].strip(); break
env = {
    "cpu": cpu, "nproc": os.cpu_count(), "kernel": platform.release(),
    "arbor_version": first_line(["$arbor_bin", "-h"]) if "$have_arbor" == "1" else "not measured",
    "mosquitto_version": first_line(["$mosquitto_bin", "-h"]),
    "date": time.strftime("%Y-%m-%d %H:%M %Z"),
    "loadavg": open("/proc/loadavg").read().split()[0:3],
    "command": "make bench" + ("   # BENCH_QUICK=1" if "$quick" == "1" else ""),
    "config": open("$out_dir/config.example").read(),
    "scenario_commands": [l for l in """$(for s in "${scenarios[@]}"; do echo "arbor_bench $(scenario_args "$s")"; done)""".splitlines()],
    "missing_reason": "$missing_reason",
}
env["loadavg"] = " ".join(env["loadavg"])
json.dump(env, open(sys.argv[1], "w"), indent=1)
EOF
}

main() {
    ensure_packages
    build_tools
    bench="$root/$build/test/bench/arbor_bench"
    arbor_bin=${ARBOR_BIN:-$root/$build/arbor}
    have_arbor=1
    missing_reason=""
    brokers=(arbor mosquitto)
    if [ ! -x "$arbor_bin" ]; then
        echo "run-bench: $arbor_bin not found or not executable: measuring mosquitto only" >&2
        have_arbor=0
        missing_reason="no arbor binary at $arbor_bin"
        brokers=(mosquitto)
    fi
    rm -rf "$out_dir"
    mkdir -p "$out_dir" "$docs_dir"
    write_config "$out_dir/config.example" PORT
    write_env
    local start=$SECONDS i=0
    for scenario in "${scenarios[@]}"; do
        local reps=$repeats
        [ "$scenario" = ildm ] && reps=1
        log "$scenario"
        for rep in $(seq 1 "$reps"); do
            # alternate which broker goes first: A B, then B A, ...
            local order=("${brokers[@]}")
            if [ $(((i + rep) % 2)) = 0 ] && [ ${#brokers[@]} = 2 ]; then
                order=("${brokers[1]}" "${brokers[0]}")
            fi
            for name in "${order[@]}"; do
                run_one "$name" "$scenario" "$rep"
            done
        done
        i=$((i + 1))
    done
    log "benchmarks took $((SECONDS - start)) s; writing $docs_dir/benchmarks.md"
    python3 test/bench/bench_report.py --results "$out_dir" \
        --markdown "$docs_dir/benchmarks.md" --chart "$docs_dir/benchmarks.png"
}

main "$@"
