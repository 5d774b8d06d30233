#!/usr/bin/env bash
# Installs the Debian packages arbor needs to build, test and benchmark, if any are missing.
# Safe to run repeatedly: it does nothing when everything is present.
set -euo pipefail
# libsystemd-dev: sd_notify (Type=notify); systemd: systemd-analyze, which checks the unit;
# tshark: the MQTT-ST dissector's capture test; graphviz: arbor_stp tree --png/--svg;
# openssl: the TLS tests make their certificates with it (mosquitto-clients: --cafile, --psk);
# libwebsockets-dev: MQTT over WebSockets; libsqlite3-dev: persistence (sqlite3, the command
# line shell, lets the tests and an operator look into the file); chromium: the browser test of it (with MQTT.js
# from npm, below); clang and libclang-rt-dev: the libFuzzer targets (test/fuzz, make fuzz);
# logrotate: the test of the installed logrotate snippet; gdb: a broker that hangs on SIGTERM in a
# test has its threads' stacks printed in the failure report (conftest.py) before it is killed
# Not here: Go, for `make bench-overload` only (its client, test/bench/overload, needs Go 1.24 or
# later for paho.mqtt.golang v1.5.1; Debian 12's golang-go is 1.19, too old to build it, so
# installing it would not help): scripts/run-bench-overload.sh says so when no Go is found, and
# test/integration/test_bench_overload.py skips.
packages=(build-essential cmake pkg-config libssl-dev libcjson-dev uthash-dev libwebsockets-dev
          libsqlite3-dev sqlite3 clang libclang-rt-dev
          libcmocka-dev libsystemd-dev systemd python3 python3-venv mosquitto mosquitto-clients
          gnuplot-nox iproute2 tshark graphviz openssl chromium logrotate gdb)
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# npm for MQTT.js; a Node.js that ships its own npm (NodeSource's nodejs) is fine too
command -v npm >/dev/null 2>&1 || missing+=(npm)

# MQTT.js's browser bundle for the browser test, as pinned by test/browser/package-lock.json
install_mqtt_js() {
    local dir
    dir="$(dirname "$0")/../test/browser"
    if [ ! -f "$dir/node_modules/mqtt/dist/mqtt.min.js" ]; then
        echo "installing MQTT.js into test/browser (npm ci)"
        (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
    fi
}

if [ ${#missing[@]} -eq 0 ]; then
    install_mqtt_js
    exit 0
fi
echo "installing: ${missing[*]}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
# tshark asks whether non-root users may capture: keep Debian's default (no) without asking
echo "wireshark-common wireshark-common/install-setuid boolean false" |
    $SUDO debconf-set-selections 2>/dev/null || true
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
# Debian starts a mosquitto service on install; arbor's tests and benchmarks start their own.
if command -v systemctl >/dev/null 2>&1; then
    $SUDO systemctl disable --now mosquitto >/dev/null 2>&1 || true
fi
install_mqtt_js
