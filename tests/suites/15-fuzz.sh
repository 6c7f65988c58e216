#!/usr/bin/env bash
# libFuzzer with ASan + UBSan over the JSON parser and RFC 8785 writer, for a
# bounded time (OPLEDGER_FUZZ_SECONDS, default 60), from the seed corpus.
# Any crash, sanitizer report or broken property (canonical(canonical(x)) == canonical(x)) fails.
set -uo pipefail
cd "${OPLEDGER_ROOT:-$(dirname "$0")/../..}"
seconds=${OPLEDGER_FUZZ_SECONDS:-60}
build=build/fuzz
CC=clang-14 CXX=clang++-14 cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DOPLEDGER_FUZZ=ON >/tmp/opledger-fuzz-build.log 2>&1 \
    && cmake --build "$build" -j"$(nproc)" --target fuzz_jcs >>/tmp/opledger-fuzz-build.log 2>&1 \
    || { cat /tmp/opledger-fuzz-build.log; echo "0 passed, 1 failed"; exit 1; }
fuzzer=$(find "$build" -type f -name fuzz_jcs -perm -u+x | head -1)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r fuzz/corpus "$work/corpus"
"$fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 -print_final_stats=1 \
    -artifact_prefix="$work/" "$work/corpus" >"$work/log" 2>&1
status=$?
grep -E '^(#[0-9]+.*DONE|stat::number_of_executed_units|==[0-9]+==ERROR|SUMMARY)' "$work/log" | tail -5
if [ "$status" != 0 ]; then
    tail -60 "$work/log"
    for crash in "$work"/crash-* "$work"/leak-* "$work"/timeout-*; do
        [ -f "$crash" ] && { echo "reproducer $crash:"; head -c 600 "$crash" | od -c | head -20; }
    done
    echo "0 passed, 1 failed"
    exit 1
fi
echo "1 passed, 0 failed"
