#!/usr/bin/env bash
# The metrics views at 10 million operations (metrics_10m.sql), on a throwaway
# cluster of the build in PG_BINDIR (scripts/cluster.sh). Prints each view's
# EXPLAIN ANALYZE "Execution Time"; the target is under 50 ms each.
#   bash bench/pgbench/metrics_10m.sh        (about 10 minutes; ~4 GB of disk)
set -euo pipefail
cd "$(dirname "$0")"
source ../../scripts/cluster.sh
dir=$(mktemp -d /tmp/opledger-metrics10m.XXXXXX)
trap 'cluster_stop "$dir"' EXIT
cluster_start "$dir" >/dev/null
"$PG_BINDIR/psql" -X -q -c "CREATE EXTENSION opledger" >/dev/null
"$PG_BINDIR/psql" -X -q -f metrics_10m.sql
