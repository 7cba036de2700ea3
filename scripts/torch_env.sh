#!/usr/bin/env bash
# Prints the folder of the Python environment that holds the pinned torch wheel (LibTorch) — one per pinned
# version, outside the clone, so every clone and CI reuse it. MPT_TORCH_ENV overrides the location.
set -euo pipefail
cd "$(dirname "$0")/.."
version=$(sed -n 's/^torch==//p' scripts/requirements-torch.txt)
echo "${MPT_TORCH_ENV:-${XDG_CACHE_HOME:-$HOME/.cache}/mpt/torch-$version}"
