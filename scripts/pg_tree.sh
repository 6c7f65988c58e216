#!/usr/bin/env bash
# A private copy of the PostgreSQL 15 installation, to run another build of opledger
# beside the installed one (an older release for the upgrade test, a baseline for a
# benchmark) without touching the system's files. PostgreSQL and pg_config find
# their libraries and extension scripts relative to their own binaries, so a server
# started from the copy loads the copy's opledger.so and scripts.
# Source it, then call:
#   pg_tree_create DIR         copy the installation into DIR (about 60 MB)
#   pg_tree_bindir DIR         print the copy's bin directory
#   pg_tree_build REV DIR      build opledger at git revision REV into the copy
#   pg_tree_install SRC DIR    build the opledger source tree SRC into the copy

pg_tree_create() {
    local dir=$1 libroot shareroot
    libroot=$(dirname "$("${PG_CONFIG:-pg_config}" --bindir)")    # /usr/lib/postgresql/15
    shareroot=$("${PG_CONFIG:-pg_config}" --sharedir)             # /usr/share/postgresql/15
    mkdir -p "$dir$(dirname "$libroot")" "$dir$(dirname "$shareroot")" "$dir/usr"
    cp -a "$libroot" "$dir$(dirname "$libroot")/"
    cp -a "$shareroot" "$dir$(dirname "$shareroot")/"
    # Headers are only read: the copy's pg_config points below DIR, so link them in
    # (where the installation copied has them: /usr/include/postgresql, or below a
    # private copy made by this script).
    local includedir
    includedir=$("${PG_CONFIG:-pg_config}" --includedir)
    mkdir -p "$dir$(dirname "$includedir")"
    ln -sfn "$(readlink -f "$includedir")" "$dir$includedir"
}

pg_tree_bindir() {
    echo "$1$("${PG_CONFIG:-pg_config}" --bindir)"
}

pg_tree_install() {
    local src=$1 dir=$2 pgc
    pgc="$(pg_tree_bindir "$dir")/pg_config"
    make -C "$src" -s -j"$(nproc)" PG_CONFIG="$pgc" >"$src/build.log" 2>&1 \
        && make -C "$src" -s install PG_CONFIG="$pgc" >>"$src/build.log" 2>&1 \
        || { tail -30 "$src/build.log" >&2; return 1; }
}

pg_tree_build() {
    local rev=$1 dir=$2 src
    git -C "${OPLEDGER_ROOT:-.}" cat-file -e "$rev^{commit}" 2>/dev/null \
        || { echo "pg_tree_build: commit $rev is not in this clone (a shallow clone? fetch the full history)" >&2; return 1; }
    src=$(mktemp -d /tmp/opledger-src.XXXXXX)
    git -C "${OPLEDGER_ROOT:-.}" archive "$rev" | tar -x -C "$src"
    pg_tree_install "$src" "$dir" || return 1
    rm -rf "$src"
}
