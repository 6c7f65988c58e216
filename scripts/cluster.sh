#!/usr/bin/env bash
# A throwaway PostgreSQL 15 cluster for demos and tests: never the system service.
# Source it, then call:
#   cluster_start DIR [PORT]   initdb + start as a non-root OS user; exports PGHOST PGPORT PGUSER PGDATABASE
#   cluster_stop DIR           stop it (fast) and remove DIR
# The server runs as the OS user `postgres` when we are root (PostgreSQL refuses root).

PG_BINDIR=${PG_BINDIR:-$(pg_config --bindir 2>/dev/null || echo /usr/lib/postgresql/15/bin)}

_cluster_as_owner() {
    if [ "$(id -u)" = 0 ]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

# A free TCP port on loopback (the server also listens on a unix socket in DIR).
cluster_free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

cluster_start() {
    local dir=$1 port=${2:-$(cluster_free_port)}
    mkdir -p "$dir"
    [ "$(id -u)" = 0 ] && chown postgres:postgres "$dir"
    _cluster_as_owner "$PG_BINDIR/initdb" -D "$dir/data" -A trust -U postgres -E UTF8 --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 \
        || { cat "$dir/initdb.log" >&2; return 1; }
    cat >>"$dir/data/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$dir'
max_connections = 120
shared_buffers = 256MB
fsync = on
max_prepared_transactions = 10
log_min_messages = warning
CONF
    _cluster_as_owner "$PG_BINDIR/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 start >/dev/null \
        || { cat "$dir/server.log" >&2; return 1; }
    export PGHOST=$dir PGPORT=$port PGUSER=postgres PGDATABASE=postgres
}

cluster_stop() {
    local dir=$1
    [ -d "$dir/data" ] && _cluster_as_owner "$PG_BINDIR/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1
    rm -rf "$dir"
}
