#!/usr/bin/env bash
# Creates .venv with the pinned Python packages the integration tests use.
set -euo pipefail
cd "$(dirname "$0")/.."
# A .venv symbolic link that leads nowhere (one was committed by mistake once, pointing at
# another checkout's .venv) is removed, not followed: python3 -m venv fails on it.
if [ -L .venv ] && [ ! -x .venv/bin/python ]; then
    rm .venv
fi
if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
fi
if ! .venv/bin/python -c "import paho.mqtt, pytest, pytest_timeout, xdist" 2>/dev/null; then
    .venv/bin/pip install -q -r test/integration/requirements.txt
fi
