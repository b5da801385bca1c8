#!/usr/bin/env bash
# Install everything the test suite needs on a fresh machine (Debian + Python), then run it.
# Python packages go into a virtualenv, never into whatever `python3` comes first: the active one
# (VIRTUAL_ENV, or a venv's python3 first on PATH), else `.venv` in the checkout, made on the
# first run and reused by the next.
set -euo pipefail
cd "$(dirname "$0")/.."
# Debian: kcat (a test client), a JDK (the Java clients, Spark, Apache Kafka 3.9 as the
# differential oracle), ZooKeeper (the real server the oracle and cluster tests run on) and Maven
# (resolves Kafka, Spark's Kafka connector and kafka-clients from Maven Central into a cache
# outside the repository, once), iproute2 and iptables (network partitions between brokers in
# network namespaces, tests/support/netfaults.py: `ip netns`, veth pairs, DROP rules).
# python3-venv: Debian's python3 makes a virtualenv (ensurepip) only with it.
if [ "$(id -u)" = 0 ] && ! { command -v kcat && command -v javac && command -v mvn && command -v iptables \
        && command -v ip && [ -f /usr/share/java/zookeeper.jar ] && python3 -c 'import ensurepip'; } >/dev/null 2>&1; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq kcat default-jdk-headless zookeeper \
        maven iproute2 iptables python3-venv >/dev/null
fi
# Go (the franz-go client tests, tests/go): Debian's golang is too old for go.mod, so the toolchain
# comes from the Go module proxy into /usr/local/go, where tests/support/gocheck.py finds it.
if [ "$(id -u)" = 0 ] && ! command -v go >/dev/null 2>&1 && [ ! -x /usr/local/go/bin/go ]; then
    python3 scripts/install_go.py
fi
# The virtualenv: sys.prefix differs from sys.base_prefix inside one, activated or merely first on PATH.
if [ -n "${VIRTUAL_ENV:-}" ] && [ -x "$VIRTUAL_ENV/bin/python" ]; then
    PYTHON="$VIRTUAL_ENV/bin/python"
elif python3 -c 'import sys; sys.exit(sys.prefix == sys.base_prefix)'; then
    PYTHON="$(python3 -c 'import sys; print(sys.executable)')"
else
    # a .venv left without pip (ensurepip was missing) is made again
    .venv/bin/python -m pip --version >/dev/null 2>&1 || python3 -m venv --clear .venv
    PYTHON="$PWD/.venv/bin/python"
fi
# its bin first on PATH, as `activate` does, for the console scripts (`kafkalite`) and tools it installs
export VIRTUAL_ENV="$("$PYTHON" -c 'import sys; print(sys.prefix)')"
export PATH="$VIRTUAL_ENV/bin:$PATH"
"$PYTHON" -m pip install -q --disable-pip-version-check -e ".[test,spark]"
# Two phases (the `--phase` option of tests/conftest.py), both given the caller's arguments, both
# counted: the tests not marked `serial` on pytest-xdist workers (a test mostly waits on broker
# processes, ZooKeeper and JVMs, so two workers overlap that), then the `serial` ones alone (they
# bound a latency or load both cores). Exit 5 (nothing selected) of one phase is no failure when
# the other ran tests, so `bash scripts/test.sh tests/unit/test_x.py -k foo` works as before.
for arg in "$@"; do
    case "$arg" in --phase|--phase=*) echo "scripts/test.sh runs both phases itself: run pytest directly for --phase" >&2; exit 4;; esac
done
"$PYTHON" -m pytest -q -n "${KAFKALITE_TEST_WORKERS:-2}" --dist loadgroup --phase parallel "$@" && parallel=0 || parallel=$?
[ "$parallel" = 2 ] && exit 2   # interrupted (Ctrl-C): no second phase
"$PYTHON" -m pytest -q --phase serial "$@" -n 0 && serial=0 || serial=$?
if [ "$parallel" = 5 ] && [ "$serial" = 5 ]; then exit 5; fi
for rc in "$parallel" "$serial"; do [ "$rc" = 0 ] || [ "$rc" = 5 ] || exit "$rc"; done
