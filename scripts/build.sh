#!/usr/bin/env bash
# Builds and installs the extension (PGXS) into the PostgreSQL found by pg_config.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
make -s -j"$jobs" >/tmp/opledger-build.log 2>&1 || { cat /tmp/opledger-build.log >&2; exit 1; }
make -s install >>/tmp/opledger-build.log 2>&1 || { cat /tmp/opledger-build.log >&2; exit 1; }
echo "build: opledger $(sed -n "s/^default_version = '\(.*\)'/\1/p" control/opledger.control) installed into $(pg_config --pkglibdir)"
