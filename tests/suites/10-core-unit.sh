#!/usr/bin/env bash
# The C++ core on its own: GoogleTest unit tests through CMake/CTest.
set -uo pipefail
cd "${OPLEDGER_ROOT:-$(dirname "$0")/../..}"
build=build/core
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/tmp/opledger-cmake.log 2>&1 \
    && cmake --build "$build" -j"$(nproc)" >>/tmp/opledger-cmake.log 2>&1 \
    || { cat /tmp/opledger-cmake.log; echo "0 passed, 1 failed"; exit 1; }
output=$(ctest --test-dir "$build" --output-on-failure 2>&1)
status=$?
echo "$output" | tail -40
# ctest: "100% tests passed, 0 tests failed out of 123"
summary=$(echo "$output" | grep -E 'tests passed, [0-9]+ tests failed out of [0-9]+' | tail -1)
total=$(echo "$summary" | sed -E 's/.* out of ([0-9]+).*/\1/')
failed=$(echo "$summary" | sed -E 's/.*passed, ([0-9]+) tests failed.*/\1/')
if [ -z "$summary" ]; then echo "0 passed, 1 failed"; exit 1; fi
echo "$((total - failed)) passed, $failed failed"
[ "$status" = 0 ]
