#!/usr/bin/env bash
# Creates .venv with the pinned Python packages the integration tests use.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
fi
if ! .venv/bin/python -c "import paho.mqtt, pytest, pytest_timeout, xdist" 2>/dev/null; then
    .venv/bin/pip install -q -r test/integration/requirements.txt
fi
