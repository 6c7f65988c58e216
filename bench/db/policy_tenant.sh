#!/usr/bin/env bash
# The cost per row of the tenant policy (tenant_scope on opledger.operations), in one
# throwaway cluster: a tenant-scoped role counts its rows of a 100,000-row ledger
# (half its tenant, half another) under three forms of the policy, alternated for
# ROUNDS rounds; each figure is the median execution time (EXPLAIN ANALYZE) of REPS
# runs, and the ratios are against the scalar-subquery form measured in the same run.
#   subquery   tenant = (SELECT current_tenant()) OR (SELECT current_tenant()) = '*'
#              (0.4.0's; Citus refuses it on a distributed table)
#   per-row    tenant = current_tenant() OR current_tenant() = '*' (a STABLE call per row)
#   sees       opledger._sees_tenant(tenant) (0.5.0's: current_tenant() once per query)
#   bench/db/policy_tenant.sh         ROUNDS=4 REPS=5 ROWS=100000
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/cluster.sh
ROUNDS=${ROUNDS:-4} REPS=${REPS:-5} ROWS=${ROWS:-100000}
dir=$(mktemp -d /tmp/opledger-policy-bench.XXXXXX)
trap 'cluster_stop "$dir"' EXIT
cluster_start "$dir" >/dev/null
q() { psql -X -q -A -t -v ON_ERROR_STOP=1 "$@"; }
q -c 'CREATE EXTENSION opledger' -c "
INSERT INTO opledger.operations (operation_id, tool, args, args_hash, fingerprint_alg, status, attempt, tenant,
                                 created_at, updated_at)
SELECT 'p-' || i, 't', '{}', opledger.jcs_hash('{}'::jsonb), 'jcs-sha256/1', 'pending', 1,
       CASE WHEN i % 2 = 0 THEN 'a' ELSE 'b' END, now(), now()
  FROM generate_series(1, $ROWS) AS i;" -c 'VACUUM ANALYZE opledger.operations' -c "
CREATE ROLE bench_a;
GRANT USAGE ON SCHEMA opledger TO bench_a;
GRANT SELECT ON opledger.operations TO bench_a;
SELECT opledger.set_role_tenant('bench_a', 'a');"
declare -A form=(
  [subquery]="tenant OPERATOR(pg_catalog.=) (SELECT opledger.current_tenant()) OR (SELECT opledger.current_tenant()) OPERATOR(pg_catalog.=) '*'"
  [per-row]="tenant OPERATOR(pg_catalog.=) opledger.current_tenant() OR opledger.current_tenant() OPERATOR(pg_catalog.=) '*'"
  [sees]="opledger._sees_tenant(tenant)")
order=(subquery per-row sees)
declare -A all
measure() {  # measure <form>: median ms of REPS counts as bench_a
    q -c "ALTER POLICY tenant_scope ON opledger.operations USING (${form[$1]})"
    local seen times=()
    seen=$(q -c 'SET ROLE bench_a' -c 'SELECT count(*) FROM opledger.operations')
    [ "$seen" = $((ROWS / 2)) ] || { echo "form $1: bench_a saw $seen rows, not $((ROWS / 2))" >&2; exit 1; }
    for _ in $(seq "$REPS"); do
        times+=("$(q -c 'SET ROLE bench_a' -c 'EXPLAIN (ANALYZE, FORMAT JSON) SELECT count(*) FROM opledger.operations' |
                   python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["Execution Time"])')")
    done
    printf '%s\n' "${times[@]}" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'
}
echo "# tenant policy cost: $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, $ROWS rows (half the caller's tenant), $ROUNDS rounds x $REPS runs"
for r in $(seq "$ROUNDS"); do
    [ $((r % 2)) = 0 ] && order=(sees per-row subquery) || order=(subquery per-row sees)
    for f in "${order[@]}"; do all[$f]+="$(measure "$f") "; done
done
med() { tr ' ' '\n' <<<"$1" | grep . | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
base=$(med "${all[subquery]}")
for f in subquery per-row sees; do
    m=$(med "${all[$f]}")
    printf '%-9s median %8.2f ms  (%.2fx the subquery form; ns/row %.0f)  rounds: %s\n' "$f" "$m" \
        "$(awk -v a="$m" -v b="$base" 'BEGIN {print a / b}')" "$(awk -v a="$m" -v n="$ROWS" 'BEGIN {print a * 1e6 / n}')" "${all[$f]}"
done
