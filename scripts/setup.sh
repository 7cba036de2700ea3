#!/usr/bin/env bash
# Installs everything mpt needs from Debian 12's apt (only what is missing), then configures and builds
# the Release `mpt` binary into build/. Idempotent: a second run installs nothing and rebuilds nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  build-essential cmake ninja-build git
  libtorch-dev libgloo-dev              # LibTorch 1.13 (CPU) and the c10d Gloo backend it is built with
  libopenblas0-openmp                   # FP32 GEMM; the OpenMP build shares LibTorch's thread pool
  libcli11-dev libyaml-cpp-dev libspdlog-dev libfmt-dev nlohmann-json3-dev catch2 zlib1g-dev
  dataset-fashion-mnist                 # the real data: /usr/share/datasets/fashion-mnist
)

missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if ((${#missing[@]})); then
  sudo=""
  [[ $(id -u) -eq 0 ]] || sudo="sudo"
  echo "setup: installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

if [[ ! -f build/build.ninja ]]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
fi
cmake --build build --target mpt -j "$(nproc)"
