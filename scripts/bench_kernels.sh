#!/usr/bin/env bash
# Benchmark (not a test): mpt's hand-written CPU kernels against LibTorch's own ops, the same `mpt bench` step
# with and without MPT_PORTABLE_KERNELS=1, interleaved (alternating which goes first) so machine noise hits both
# alike. A kernel stays only where its step is at least 5% faster than LibTorch's.
#
#   scripts/bench_kernels.sh [ROUNDS] [CASE ...]     # default 3 rounds of every case
#   MPT_BASELINE=/path/to/older/mpt scripts/bench_kernels.sh ...
#       the same cases, this build against another mpt binary (a change's before and after), hand kernels on in both
#
# Cases: mlp-fp32 mlp-bf16 (the split linear backward, fused Adam, the one-pass gradient norm), bert-tiny-fp32,
# bert-tiny-bf16 (on AVX-512 machines also attention, GELU, LayerNorm-and-cast), resnet18-bf16 (on AVX-512
# machines the fused batch norm; everywhere the fused master-weights step).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh  # median, rate; OPENBLAS_CORETYPE unset for the measurement
mpt=./build/mpt
baseline=${MPT_BASELINE:-}
rounds=3
if [[ $# -gt 0 && $1 =~ ^[0-9]+$ ]]; then rounds=$1; shift; fi
cases=("$@")
[[ ${#cases[@]} -gt 0 ]] || cases=(mlp-fp32 mlp-bf16 bert-tiny-fp32 bert-tiny-bf16 resnet18-bf16)
corpus=$(mktemp -d)
trap 'rm -rf "$corpus"' EXIT
for _ in $(seq 3000); do echo "the quick brown fox jumps over the lazy dog ."; done >"$corpus/fox.txt"

args_of() {  # case -> spec and overrides
  case $1 in
    mlp-fp32) echo "configs/mlp_fmnist_fp32.yaml --steps 300 --warmup 30" ;;
    mlp-bf16) echo "configs/mlp_fmnist_mixed.yaml --steps 300 --warmup 30" ;;
    bert-tiny-fp32) echo "configs/bert_tiny_mlm.yaml precision.mode=fp32 data.root=$corpus --steps 30 --warmup 5" ;;
    bert-tiny-bf16) echo "configs/bert_tiny_mlm.yaml data.root=$corpus --steps 30 --warmup 5" ;;
    resnet18-bf16) echo "configs/resnet18_fmnist_mixed.yaml precision.strategy=master_weights --steps 10 --warmup 3" ;;
    *) echo "bench_kernels.sh: unknown case $1 (mlp-fp32 mlp-bf16 bert-tiny-fp32 bert-tiny-bf16 resnet18-bf16)" >&2
       exit 2 ;;
  esac
}

if [[ -n $baseline ]]; then a_name=this; b_name=baseline; title="$mpt vs $baseline"
else a_name=hand; b_name=LibTorch; title="hand kernels vs LibTorch's ops"; fi
echo "$title, $rounds interleaved rounds ($(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores)"
for name in "${cases[@]}"; do
  read -r -a args <<<"$(args_of "$name")"
  ratios=()
  for ((r = 0; r < rounds; r++)); do
    for order in $((r % 2)) $(((r + 1) % 2)); do
      if ((order == 0)); then hand=$("$mpt" bench "${args[@]}" --no-peak --json | rate)
      elif [[ -n $baseline ]]; then portable=$("$baseline" bench "${args[@]}" --no-peak --json | rate)
      else portable=$(MPT_PORTABLE_KERNELS=1 "$mpt" bench "${args[@]}" --no-peak --json | rate); fi
    done
    ratios+=("$(python3 -c "print($hand / $portable)")")
    printf '  %-16s round %d: %s %10.1f samples/s, %s %10.1f samples/s\n' "$name" "$r" "$a_name" "$hand" "$b_name" \
      "$portable"
  done
  printf '%-16s %s / %s: median %.3fx (rounds %s)\n' "$name" "$a_name" "$b_name" "$(printf '%s\n' "${ratios[@]}" | median)" \
    "$(printf '%s ' "${ratios[@]}")"
done
