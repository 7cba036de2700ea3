#!/usr/bin/env bash
# Runs the whole test suite through ctest, after making sure the packages are there and the build is current.
# .ci/run calls exactly this. Extra arguments go to ctest (e.g. `-L fast` for the quick set). Tests that need a
# GPU carry the `gpu` label and report *skipped* on a machine without one. Under CI=true (or with
# MPT_FUZZ_SECONDS set) every fuzz harness then runs for a short while (scripts/fuzz.sh; 10 s each in CI).
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/setup.sh
# The real libraries the tests check mpt against, pinned, in the same environment as the torch wheel.
torch_env=$(scripts/torch_env.sh)
if ! cmp -s scripts/requirements-oracles.txt "$torch_env/.mpt-oracles"; then
  echo "test: installing $(sed -e '/^#/d' -e 's/ *#.*//' scripts/requirements-oracles.txt | paste -sd ' ') into $torch_env"
  "$torch_env/bin/python" -m pip install -q --disable-pip-version-check -r scripts/requirements-oracles.txt \
    -c scripts/requirements-torch.txt
  cp scripts/requirements-oracles.txt "$torch_env/.mpt-oracles"
fi
cmake --build build -j "$(nproc)"
ctest --test-dir build --output-on-failure --timeout 900 "$@"
fuzz_seconds=${MPT_FUZZ_SECONDS:-}
[[ -z $fuzz_seconds && ${CI:-} == true ]] && fuzz_seconds=10
if [[ -n $fuzz_seconds && $fuzz_seconds != 0 ]]; then ./scripts/fuzz.sh "$fuzz_seconds"; fi
