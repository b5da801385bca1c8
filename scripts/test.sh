#!/usr/bin/env bash
# Install everything the test suite needs on a fresh machine (Debian + Python), then run it.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" = 0 ] && ! { command -v kcat && command -v javac; } >/dev/null 2>&1; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq kcat default-jdk-headless >/dev/null
fi
python3 -m pip install -q --disable-pip-version-check -e ".[test,spark]"
exec python3 -m pytest -q "$@"
