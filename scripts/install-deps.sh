#!/usr/bin/env bash
# Installs the Debian packages arbor needs to build, test and benchmark, if any are missing.
# Safe to run repeatedly: it does nothing when everything is present.
set -euo pipefail
# libsystemd-dev: sd_notify (Type=notify); systemd: systemd-analyze, which checks the unit;
# tshark: the MQTT-ST dissector's capture test; graphviz: arbor_stp tree --png/--svg;
# openssl: the TLS tests make their certificates with it (mosquitto-clients: --cafile, --psk)
packages=(build-essential cmake pkg-config libssl-dev libcjson-dev uthash-dev libwebsockets-dev
          libcmocka-dev libsystemd-dev systemd python3 python3-venv mosquitto mosquitto-clients
          gnuplot-nox iproute2 tshark graphviz openssl)
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
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
