# shellcheck shell=bash
# Throwaway PostgreSQL cluster for the demo (sourced by demo/refund-story.sh).
#
#   cluster_start   initdb into a fresh mktemp dir, start it on a free port with its
#                   unix socket in that dir and no TCP listener; exports PGHOST,
#                   PGPORT, PGUSER, PGDATABASE
#   cluster_stop    stop it and remove the dir
#
# As root, the server runs as the `postgres` OS user (PostgreSQL refuses to run as
# root); as anyone else, as that user.

PG_BINDIR="${PG_BINDIR:-$(pg_config --bindir 2>/dev/null || echo /usr/lib/postgresql/15/bin)}"
CLUSTER_DIR=""

_as_owner() {
    # Run from the cluster dir: the postgres user may not be able to read the cwd.
    if [ "$(id -u)" = 0 ]; then
        (cd "$CLUSTER_DIR" && runuser -u postgres -- "$@")
    else
        (cd "$CLUSTER_DIR" && "$@")
    fi
}

_free_port() {
    # A port nobody listens on (TCP is off anyway: the port only names the socket file).
    local p
    for _ in $(seq 1 50); do
        p=$(( 20000 + RANDOM % 40000 ))
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
            echo "$p"
            return 0
        fi
    done
    echo 54329
}

cluster_start() {
    CLUSTER_DIR=$(mktemp -d /tmp/opledger-demo.XXXXXX)
    local superuser
    if [ "$(id -u)" = 0 ]; then
        chown postgres: "$CLUSTER_DIR"
        superuser=postgres
    else
        superuser=$(id -un)
    fi
    chmod 700 "$CLUSTER_DIR"
    local port
    port=$(_free_port)
    _as_owner "$PG_BINDIR/initdb" -D "$CLUSTER_DIR/data" -A trust -U "$superuser" \
        --no-sync >"$CLUSTER_DIR/initdb.log" 2>&1 \
        || { cat "$CLUSTER_DIR/initdb.log" >&2; return 1; }
    _as_owner "$PG_BINDIR/pg_ctl" -D "$CLUSTER_DIR/data" -w -t 60 -l "$CLUSTER_DIR/server.log" \
        -o "-p $port -k $CLUSTER_DIR -c listen_addresses='' -c fsync=off" start >/dev/null \
        || { cat "$CLUSTER_DIR/server.log" >&2; return 1; }
    export PGHOST="$CLUSTER_DIR" PGPORT="$port" PGUSER="$superuser" PGDATABASE=postgres
    unset PGSERVICE PGPASSWORD
}

cluster_stop() {
    [ -n "$CLUSTER_DIR" ] || return 0
    if [ -f "$CLUSTER_DIR/data/postmaster.pid" ]; then
        _as_owner "$PG_BINDIR/pg_ctl" -D "$CLUSTER_DIR/data" -m fast -w stop >/dev/null 2>&1 || true
    fi
    rm -rf "$CLUSTER_DIR"
    CLUSTER_DIR=""
}
