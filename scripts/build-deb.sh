#!/usr/bin/env bash
# Builds the Debian package postgresql-15-opledger from this working tree, with
# debian/ and pg_buildext, the way Debian builds PostgreSQL extensions.
#   bash scripts/build-deb.sh               # the .deb files go to build/deb/
#   bash scripts/build-deb.sh --out DIR     # ... or to DIR
#   bash scripts/build-deb.sh --check       # also run pg_regress (sql/) against the packaged
#                                           # files in a pg_virtualenv cluster while building
#   bash scripts/build-deb.sh --keep        # keep the temporary build directory
# Then, as root: apt-get install ./build/deb/postgresql-15-opledger_*.deb
#
# The build runs in a temporary copy of the tree (the files git tracks plus new,
# not ignored ones), so nothing is left in the repository. Missing build tools
# (scripts/packages.d/deb.txt) are installed with apt-get when run as root.
# debian/changelog's upstream version must equal the Makefile's EXTVERSION.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

out=$root/build/deb
check=no
keep=no
while [ $# -gt 0 ]; do
    case $1 in
        --out) out=$(mkdir -p "$2" && cd "$2" && pwd); shift 2 ;;
        --check) check=yes; shift ;;
        --keep) keep=yes; shift ;;
        -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "build-deb: unknown argument $1 (try --help)" >&2; exit 2 ;;
    esac
done

# Build tools
wanted=$(sed 's/#.*//' scripts/packages.d/deb.txt | tr -s ' \t' '\n' | sed '/^$/d' | sort -u)
missing=()
for package in $wanted; do
    status=$(dpkg-query -W -f='${Status}' "$package" 2>/dev/null || true)
    [ "$status" = "install ok installed" ] || missing+=("$package")
done
if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" != 0 ]; then
        echo "build-deb: missing ${missing[*]}; install them (apt-get install ${missing[*]}) or run as root" >&2
        exit 1
    fi
    echo "build-deb: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/tmp/opledger-deb-apt.log 2>&1 \
        || { tail -50 /tmp/opledger-deb-apt.log >&2; exit 1; }
fi

# The package's version is the extension's version plus a Debian revision.
extversion=$(sed -nE 's/^EXTVERSION[[:space:]]*[:?]?=[[:space:]]*([^[:space:]#]+).*/\1/p' Makefile | head -1)
debversion=$(dpkg-parsechangelog -l debian/changelog -S Version)
upstream=${debversion#*:}
upstream=${upstream%-*}
if [ "$upstream" != "$extversion" ]; then
    echo "build-deb: debian/changelog is at $debversion but the Makefile's EXTVERSION is $extversion;" >&2
    echo "build-deb: add a changelog entry for $extversion-1 (dch -v $extversion-1, or by hand) first" >&2
    exit 1
fi

work=$(mktemp -d /tmp/opledger-deb.XXXXXX)
if [ $keep = yes ]; then
    echo "build-deb: building in $work (kept)"
else
    trap 'rm -rf "$work"' EXIT
fi
src=$work/opledger-$extversion
mkdir -p "$src"

# A clean copy of the tree: without objects, built scripts or earlier packages.
if git -c safe.directory="$root" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git -c safe.directory="$root" ls-files -z --cached --others --exclude-standard \
        | while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done \
        | tar --null -T - -cf - | tar -xf - -C "$src"
else
    tar --exclude-vcs --exclude=./build --exclude=./results --exclude=./output_iso \
        --exclude=./tmp_check --exclude='*.o' --exclude='*.so' --exclude='*.bc' \
        --exclude='./opledger--*.sql' --exclude=node_modules -cf - . | tar -xf - -C "$src"
fi

export DEB_BUILD_OPTIONS=${DEB_BUILD_OPTIONS:-}
[ $check = yes ] || DEB_BUILD_OPTIONS="nocheck $DEB_BUILD_OPTIONS"
echo "build-deb: building postgresql-15-opledger $debversion (PostgreSQL $(paste -sd' ' debian/pgversions)); log in $work/build.log"
started=$(date +%s)
if ! (cd "$src" && dpkg-buildpackage -b -us -uc) >"$work/build.log" 2>&1; then
    tail -60 "$work/build.log" >&2
    echo "build-deb: dpkg-buildpackage failed" >&2
    trap - EXIT
    echo "build-deb: the build directory is kept: $work" >&2
    exit 1
fi

mkdir -p "$out"
# Earlier builds in the default directory would make ./postgresql-15-opledger_*.deb ambiguous.
[ "$out" = "$root/build/deb" ] && rm -f "$out"/postgresql-*-opledger*_*.deb
cp "$work"/*.deb "$out"/
for deb in "$out"/postgresql-*-opledger_"${debversion#*:}"_*.deb; do
    echo "build-deb: $deb ($(( $(date +%s) - started ))s)"
    echo "build-deb:   Depends: $(dpkg-deb -f "$deb" Depends)"
done
