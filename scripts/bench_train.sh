#!/usr/bin/env bash
# Benchmark (not a test): FP32 vs mixed precision training steps of the same spec pair, measured side by side
# and interleaved so machine noise hits both alike. Prints each run and the median ratio.
# Usage: scripts/bench_train.sh [FP32_SPEC] [MIXED_SPEC] [STEPS] [REPEATS]
set -euo pipefail
cd "$(dirname "$0")/.."
# The best FP32 baseline: OpenBLAS picks its own kernels (an inherited OPENBLAS_CORETYPE=Haswell halves FP32 GEMM
# on an AVX-512 CPU; mpt doctor warns about it).
unset OPENBLAS_CORETYPE
fp32=${1:-configs/mlp_fmnist_fp32.yaml}
mixed=${2:-configs/mlp_fmnist_mixed.yaml}
steps=${3:-2000}
repeats=${4:-3}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

field() { sed -n "s/^  \"$2\": \\([0-9.e+-]*\\),\\{0,1\\}$/\\1/p" "$1/summary.json"; }
median_step() { sed -n '/"step_time_ms"/,/}/s/.*"median": \([0-9.e+-]*\).*/\1/p' "$1/summary.json"; }

printf '%-6s %-6s %12s %16s\n' run mode samples/s median_step_ms
for ((i = 1; i <= repeats; i++)); do
  for mode in fp32 mixed; do
    spec=$fp32; [[ $mode == mixed ]] && spec=$mixed
    ./build/mpt train "$spec" "train.max_steps=$steps" checkpoint.every_steps=0 train.progress=plain \
      --run-dir "$out/$mode-$i" >"$out/$mode-$i.log" 2>&1
    printf '%-6s %-6s %12.0f %16.3f\n' "$i" "$mode" "$(field "$out/$mode-$i" samples_per_sec)" "$(median_step "$out/$mode-$i")"
  done
done
for mode in fp32 mixed; do
  for ((i = 1; i <= repeats; i++)); do median_step "$out/$mode-$i"; done | sort -g | awk -v m=$mode \
    '{v[NR]=$1} END {print m, v[int((NR+1)/2)]}'
done | awk '{t[$1]=$2} END {printf "median step time: fp32 %.3f ms, mixed %.3f ms -> mixed is %.2fx faster per step\n", t["fp32"], t["mixed"], t["fp32"]/t["mixed"]}'
