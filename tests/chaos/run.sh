#!/usr/bin/env bash
# Run the opledger chaos harness (see README.md).
#   tests/chaos/run.sh --seed 42 --ops 3000          # CI-sized
#   tests/chaos/run.sh --seed 42 --ops 50000         # soak
# All arguments are passed to chaos.js.  Needs: node >= 20, npm, PostgreSQL 15
# binaries (PG_BINDIR, default /usr/lib/postgresql/15/bin), the opledger
# extension installed (make install), and - when run as root - the `postgres`
# OS user (the harness runs its own throwaway cluster as that user).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"

# install the pinned npm dependencies once (npm ci: exactly package-lock.json)
stamp="node_modules/.opledger-lock-stamp"
if [ ! -f "$stamp" ] || ! cmp -s package-lock.json "$stamp"; then
  npm ci --no-audit --no-fund --loglevel=error >/dev/null
  cp package-lock.json "$stamp"
fi

child=""
for a in "$@"; do [ "$a" = --keep ] && CHAOS_KEEP=1; done
state="$(mktemp /tmp/opledger-chaos-state.XXXXXX)"
export CHAOS_STATE_FILE="$state"
bindir="${PG_BINDIR:-/usr/lib/postgresql/15/bin}"
cleanup() {
  # chaos.js kills its own children and stops its cluster on SIGTERM/exit;
  # this is the backstop: the whole process group of the harness.
  if [ -n "$child" ] && kill -0 "$child" 2>/dev/null; then
    kill -TERM -- "-$child" 2>/dev/null || kill -TERM "$child" 2>/dev/null || true
    sleep 2
    kill -KILL -- "-$child" 2>/dev/null || true
  fi
  # if chaos.js could not clean up (SIGKILL), stop its cluster and remove its files
  if [ -s "$state" ]; then
    local data base
    data="$(sed -n 1p "$state")"; base="$(sed -n 2p "$state")"
    if [ -f "$data/postmaster.pid" ]; then
      if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$bindir/pg_ctl" -D "$data" -m immediate -w -t 30 stop >/dev/null 2>&1 || true
      else "$bindir/pg_ctl" -D "$data" -m immediate -w -t 30 stop >/dev/null 2>&1 || true; fi
    fi
    case "$base" in /tmp/opledger-chaos-*) [ -d "$data" ] && [ -z "${CHAOS_KEEP:-}" ] && rm -rf "$base" ;; esac
  fi
  rm -f "$state"
}
trap cleanup EXIT INT TERM

# own process group so the trap can reap everything it started
set +e
setsid node "$here/chaos.js" "$@" &
child=$!
wait "$child"
rc=$?
set -e
child=""
exit "$rc"
