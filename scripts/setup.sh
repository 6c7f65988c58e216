#!/usr/bin/env bash
# Installs what building and testing opledger needs on Debian 12, with apt-get,
# skipping packages that are already installed. Package lists live in
# scripts/packages.d/*.txt (one package per line, # comments), one file per part.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" != 0 ]; then
    echo "setup.sh: run as root (it installs packages with apt-get)" >&2
    exit 1
fi

wanted=$(cat scripts/packages.d/*.txt | sed 's/#.*//' | tr -s ' \t' '\n' | sed '/^$/d' | sort -u)
# Node.js and npm: any installed node >= 18 will do (Debian 12 ships 18).
if ! command -v node >/dev/null 2>&1; then
    wanted=$(printf '%s\nnodejs\nnpm\n' "$wanted")
fi

missing=()
for package in $wanted; do
    status=$(dpkg-query -W -f='${Status}' "$package" 2>/dev/null || true)
    [ "$status" = "install ok installed" ] || missing+=("$package")
done

if [ ${#missing[@]} -eq 0 ]; then
    echo "setup: all packages already installed"
    exit 0
fi

echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/tmp/opledger-apt.log 2>&1 \
    || { tail -50 /tmp/opledger-apt.log >&2; exit 1; }
# Debian starts a "main" cluster with the server package; opledger never uses it.
echo "setup: done"
