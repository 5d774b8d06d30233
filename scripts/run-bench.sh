#!/usr/bin/env bash
# `make bench`: builds arbor and arbor_bench, starts arbor and Debian's mosquitto with the same
# configuration on free loopback ports, runs the built-in single-broker scenarios against each
# broker in alternation, and writes docs/benchmarks.md with its chart docs/benchmarks.png.
# Every broker it starts is stopped again (by pid) when it exits.
#
# Then a few of the scenarios again over TLS and over WebSockets: a throwaway CA and server
# certificate are made with the openssl CLI in the results directory at run time (nothing is
# committed), and each broker gets an extra TLS or websockets listener beside its TCP one. A
# broker that refuses that configuration (arbor before its TLS/WebSocket listeners land) is
# reported as such on the page and left out of those rows; the TCP rows do not depend on it.
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
#   BENCH_TRANSPORTS="tls ws"  transports measured besides TCP (empty: none)
#   BENCH_LOOPS=N          "arbor" runs with `loops 1` (the default); "arbor-loops" with
#                          `loops N` (default: the number of CPUs, as `loops auto`; 1: none)
#   BENCH_SCENARIOS="..."  the TCP scenarios (default: all six; e.g. "qos0-1to1 qos0-1to50
#                          qos1-pairs" with BENCH_DOCS elsewhere for a quick transport check)
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
transports=${BENCH_TRANSPORTS-tls ws}
loops=${BENCH_LOOPS:-$(nproc)}
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
    command -v openssl >/dev/null || missing+=(openssl)
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

# The one configuration both brokers get (mosquitto.conf syntax; arbor reads the same):
# write_config FILE PORT [TRANSPORT EXTRA_PORT] adds a TLS listener (tls) or a websockets
# listener (ws) on EXTRA_PORT, with the certificates in $certs_dir.
write_config() {
    local file=$1 port=$2 transport=${3:-} extra_port=${4:-}
    cat >"$file" <<EOF
listener $port 127.0.0.1
allow_anonymous true
log_dest none
connection_messages false
max_inflight_messages 20
max_queued_messages 100000
EOF
    case $transport in
    tls) printf 'listener %s 127.0.0.1\ncafile %s\ncertfile %s\nkeyfile %s\n' "$extra_port" \
        "$certs_dir/ca.crt" "$certs_dir/server.crt" "$certs_dir/server.key" >>"$file" ;;
    ws) printf 'listener %s 127.0.0.1\nprotocol websockets\n' "$extra_port" >>"$file" ;;
    esac
}

# A throwaway CA and a server certificate for 127.0.0.1 and localhost, made for this run only.
make_certs() {
    local dir=$1
    mkdir -p "$dir"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -sha256 -days 2 \
        -subj "/CN=arbor bench throwaway CA" -keyout "$dir/ca.key" -out "$dir/ca.crt" 2>/dev/null
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -sha256 \
        -subj "/CN=localhost" -keyout "$dir/server.key" -out "$dir/server.csr" 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n' \
        >"$dir/server.ext"
    openssl x509 -req -in "$dir/server.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" \
        -CAcreateserial -days 2 -sha256 -extfile "$dir/server.ext" -out "$dir/server.crt" \
        2>/dev/null
    # the CA signs nothing else; brokers started as root read the key after dropping
    # privileges (mosquitto becomes user mosquitto), so this throwaway key is world-readable
    rm -f "$dir/ca.key" "$dir/ca.srl" "$dir/server.csr" "$dir/server.ext"
    chmod 755 "$dir"
    chmod 644 "$dir/server.key"
}

# start_broker NAME BINARY [TRANSPORT] -> sets broker_pid, broker_port and (with a transport)
# extra_port, the port of its TLS or websockets listener
start_broker() {
    local name=$1 bin=$2 transport=${3:-}
    broker_port=$(free_port)
    extra_port=""
    if [ -n "$transport" ]; then
        extra_port=$(free_port)
        while [ "$extra_port" = "$broker_port" ]; do extra_port=$(free_port); done
    fi
    write_config "$out_dir/$name.conf" "$broker_port" "$transport" "$extra_port"
    # arbor with one loop (its default), and with one per CPU (BENCH_LOOPS)
    case $name in
    arbor) echo "loops 1" >>"$out_dir/$name.conf" ;;
    arbor-loops) echo "loops $loops" >>"$out_dir/$name.conf" ;;
    esac
    "$bin" -c "$out_dir/$name.conf" >"$out_dir/$name.last.log" 2>&1 &
    broker_pid=$!
    started_pids+=("$broker_pid")
    local ok=0
    for _ in $(seq 1 200); do
        if port_open "$broker_port" && { [ -z "$extra_port" ] || port_open "$extra_port"; }; then
            ok=1
            break
        fi
        if ! kill -0 "$broker_pid" 2>/dev/null; then break; fi
        sleep 0.05
    done
    if [ "$ok" = 1 ]; then return 0; fi
    stop_broker "$broker_pid"
    cat "$out_dir/$name.last.log" >>"$out_dir/$name.log"
    echo "run-bench: $name did not start on port $broker_port${extra_port:+ and $extra_port}; log:" >&2
    tail -20 "$out_dir/$name.last.log" >&2
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
# shellcheck disable=SC2206
scenarios=(${BENCH_SCENARIOS-ildm mqtt-st-benchmark qos0-1to1 qos0-1to50 qos1-pairs qos2-pairs})

# The scenarios run again over TLS and WebSockets: QoS 0 to one subscriber and fanned out to
# 50 (bytes through the transport at full speed), QoS 1 pairs (a round trip per message).
transport_scenarios=(qos0-1to1 qos0-1to50 qos1-pairs)

# arbor_bench's transport options for a broker's extra listener
transport_args() {
    case $1 in
    tls) echo "--cafile $certs_dir/ca.crt" ;;
    ws) echo "--websockets" ;;
    esac
}

transport_title() {
    case $1 in tls) echo TLS ;; ws) echo WebSockets ;; esac
}

# run_one BROKER SCENARIO REPETITION [TRANSPORT]; results go to
# BROKER__SCENARIO[.TRANSPORT]__REPETITION.json
run_one() {
    local name=$1 scenario=$2 rep=$3 transport=${4:-} bin
    bin=$([ "$name" != mosquitto ] && echo "$arbor_bin" || echo "$mosquitto_bin")
    start_broker "$name" "$bin" "$transport" || return 1
    cat "$out_dir/$name.last.log" >>"$out_dir/$name.log"
    local key=$scenario${transport:+.$transport}
    local json="$out_dir/${name}__${key}__${rep}.json" port=${extra_port:-$broker_port}
    # shellcheck disable=SC2046
    if ! "$bench" $(scenario_args "$scenario") $(transport_args "$transport") \
        -b "127.0.0.1:$port" -P "$broker_pid" --label "$name" --json "$json" \
        --no-per-second >"$out_dir/${name}__${key}__${rep}.txt" 2>&1; then
        echo "run-bench: arbor_bench failed for $name/$key; output:" >&2
        tail -20 "$out_dir/${name}__${key}__${rep}.txt" >&2
        rm -f "$json"
        stop_broker "$broker_pid"
        return 1
    fi
    stop_broker "$broker_pid"
    python3 - "$json" "$name" "$key" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1])).get("result") or {}
lat = r.get("latency_ms") or {}
cpu = r.get("broker_cpu_us_per_msg")
print("    %-9s %-21s ingress %10.0f  egress %10.0f msg/s  latency %8.3f ms  loss %6.2f %%  cpu %s us/msg" % (
    sys.argv[2], sys.argv[3], r.get("ingress") or 0, r.get("egress") or 0, lat.get("mean") or 0,
    100 * (r.get("loss_rate") or 0), "%.2f" % cpu if cpu is not None else "n/a"))
EOF
}

# rotated K NAME...: the names, starting from the (K mod count)-th (brokers take turns to go
# first from one repetition to the next)
rotated() {
    local k=$1
    shift
    local names=("$@") n=$# out=() j
    for ((j = 0; j < n; j++)); do out+=("${names[$(((k + j) % n))]}"); done
    echo "${out[*]}"
}

# Record why a broker has no figures over a transport (shown on the page).
note_missing() {
    local broker=$1 transport=$2 reason=$3
    echo "run-bench: $broker not measured over $(transport_title "$transport"): $reason" >&2
    python3 - "$out_dir/missing.json" "$broker" "$transport" "$reason" <<'EOF'
import json, os, sys
path, broker, transport, reason = sys.argv[1:]
doc = json.load(open(path)) if os.path.exists(path) else {}
doc.setdefault(transport, {})[broker] = reason
json.dump(doc, open(path, "w"), indent=1)
EOF
}

# Does the broker start with the transport's configuration? Sets probe_reason when not, from
# the broker's own words; records the negotiated TLS version and cipher in tls-BROKER.txt.
probe_transport() {
    local name=$1 transport=$2 bin
    bin=$([ "$name" != mosquitto ] && echo "$arbor_bin" || echo "$mosquitto_bin")
    probe_reason=""
    if ! start_broker "$name" "$bin" "$transport" 2>/dev/null; then
        # its error lines (else its last words), without timestamps and directories
        local said
        said=$(grep -i 'error' "$out_dir/$name.last.log" || grep -v '^[[:space:]]*$' \
            "$out_dir/$name.last.log" | tail -3 || true)
        probe_reason=$(echo "$said" | head -5 | sed -E 's/^[0-9]+: //; s|/[^ :]*/||g' |
            paste -sd ';' | sed 's/;/; /g')
        probe_reason="it did not start with the $(transport_title "$transport") listener${probe_reason:+: $probe_reason}"
        return 1
    fi
    cat "$out_dir/$name.last.log" >>"$out_dir/$name.log"
    if [ "$transport" = tls ]; then
        timeout 10 openssl s_client -connect "127.0.0.1:$extra_port" -CAfile "$certs_dir/ca.crt" \
            -verify_return_error </dev/null 2>/dev/null |
            grep -E '^New, ' | sed 's/^New, //' >"$out_dir/tls-$name.txt" || true
    fi
    stop_broker "$broker_pid"
}

# The transport scenarios against every broker that starts with the transport's listener.
run_transport() {
    local transport=$1 title i=0
    local ok=()
    title=$(transport_title "$transport")
    log "$title"
    for name in "${brokers[@]}"; do
        if probe_transport "$name" "$transport"; then
            ok+=("$name")
        else
            note_missing "$name" "$transport" "$probe_reason"
        fi
    done
    for scenario in "${transport_scenarios[@]}"; do
        [ ${#ok[@]} -gt 0 ] || break
        log "$scenario over $title"
        for rep in $(seq 1 "$repeats"); do
            local order
            read -r -a order <<<"$(rotated $((i + rep)) "${ok[@]}")"
            for name in "${order[@]}"; do
                [[ " ${ok[*]} " = *" $name "* ]] || continue
                run_one "$name" "$scenario" "$rep" "$transport" && continue
                # started, but cannot carry the load over this transport: leave it out
                note_missing "$name" "$transport" "arbor_bench failed against it ($scenario): \
$(grep -h 'arbor_bench:' "$out_dir/${name}__$scenario.${transport}__$rep.txt" 2>/dev/null | head -1)"
                local kept=()
                for b in "${ok[@]}"; do [ "$b" = "$name" ] || kept+=("$b"); done
                ok=("${kept[@]}")
                rm -f "$out_dir/${name}__"*".${transport}__"*.json
            done
        done
        i=$((i + 1))
    done
}

transport_commands() {
    for s in "${transport_scenarios[@]}"; do
        for t in $transports; do
            echo "arbor_bench $(scenario_args "$s") $(transport_args "$t" | sed "s|$certs_dir|CERTS|")"
        done
    done
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
    "loops": "$loops",
    "transports": "$transports".split(),
    "transport_configs": {t: open("$out_dir/config-%s.example" % t).read()
                          for t in "$transports".split()},
    "transport_commands": [l for l in """$(transport_commands)""".splitlines()],
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
    if [ "$loops" -gt 1 ]; then brokers=(arbor arbor-loops mosquitto); fi
    if [ ! -x "$arbor_bin" ]; then
        echo "run-bench: $arbor_bin not found or not executable: measuring mosquitto only" >&2
        have_arbor=0
        missing_reason="no arbor binary at $arbor_bin"
        brokers=(mosquitto)
    fi
    rm -rf "$out_dir"
    mkdir -p "$out_dir" "$docs_dir"
    write_config "$out_dir/config.example" PORT
    certs_dir=$(cd "$out_dir" && pwd)/tls
    if [ -n "$transports" ]; then
        log "making a throwaway CA and server certificate in $certs_dir"
        make_certs "$certs_dir"
        local real_certs=$certs_dir
        certs_dir=CERTS # the page shows the configuration with this placeholder
        for t in $transports; do
            write_config "$out_dir/config-$t.example" PORT "$t" "$(echo "$t" | tr a-z A-Z)_PORT"
        done
        certs_dir=$real_certs
    fi
    write_env
    local start=$SECONDS i=0
    for scenario in "${scenarios[@]}"; do
        local reps=$repeats
        [ "$scenario" = ildm ] && reps=1
        log "$scenario"
        for rep in $(seq 1 "$reps"); do
            # take turns to go first: A B C, then B C A, ...
            local order
            read -r -a order <<<"$(rotated $((i + rep)) "${brokers[@]}")"
            for name in "${order[@]}"; do
                run_one "$name" "$scenario" "$rep"
            done
        done
        i=$((i + 1))
    done
    for t in $transports; do
        run_transport "$t"
    done
    log "benchmarks took $((SECONDS - start)) s; writing $docs_dir/benchmarks.md"
    python3 test/bench/bench_report.py --results "$out_dir" \
        --markdown "$docs_dir/benchmarks.md" --chart "$docs_dir/benchmarks.png"
}

main "$@"
