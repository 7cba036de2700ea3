#!/usr/bin/env bash
# Runs the whole test suite through ctest, after making sure the packages are there and the build is current.
# .ci/run calls exactly this. Extra arguments go to ctest (e.g. `-L fast` for the quick set).
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/setup.sh
cmake --build build -j "$(nproc)"
ctest --test-dir build --output-on-failure --timeout 900 "$@"
