#!/usr/bin/env bash
# mpt against the PyTorch eager loop a user would otherwise write (scripts/pytorch_reference.py on the torch
# environment's torch 2.x, the very LibTorch mpt links), same model, batch, optimizer (Adam), precision and
# synthetic batches, interleaved (mpt, PyTorch, mpt, PyTorch, ...) so that machine noise hits both alike.
# A benchmark, not a test.
#
#   scripts/bench_vs_pytorch.sh [ROUNDS] [CASE ...]   # default 3 rounds of every case; cases: mlp resnet50 bert vit llama (llama-tiny, llama-135m alone)
#
# Both use 2 threads, the wheel's MKL and oneDNN and the same allocator, tcmalloc (mpt links it; PyTorch gets it
# through LD_PRELOAD; under glibc malloc PyTorch's steps were 3-5x slower from page faults) with the release rate
# mpt sets for itself (0: freed spans are kept, not faulted back in next step), so the ratio compares the
# training loops. Each run is bounded by MPT_BENCH_TIMEOUT seconds (default 600): on a CPU without a fast BF16
# GEMM eager BF16 runs ATen's scalar BF16 loops, and a case past the bound prints "timeout".
# The BERT-base reference is scripts/pytorch_reference.py's own BertMlm (Debian has no transformers package):
# the same 109,514,298 parameters, logits only at masked positions and dropout 0.1 where Hugging Face's BERT has it
# (mpt's configs/bert_base_mlm.yaml); the last case turns dropout off on both sides.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh  # median, rate; OPENBLAS_CORETYPE unset for the measurement
rounds=3
if [[ $# -gt 0 && $1 =~ ^[0-9]+$ ]]; then rounds=$1; shift; fi
cases=("$@")
[[ ${#cases[@]} -gt 0 ]] || cases=(mlp resnet50 bert vit llama)
mpt=./build/mpt
python="$(scripts/torch_env.sh)/bin/python"
limit=${MPT_BENCH_TIMEOUT:-600}
tcmalloc=/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4


run_case() {  # name steps mpt-spec "mpt overrides" "python args"
  local name=$1 steps=$2 spec=$3 overrides=$4 pyargs=$5 m=() p=() warmup=10
  ((steps >= 10)) || warmup=2  # the big models: a couple of steps warm the allocator and oneDNN's caches
  for ((r = 0; r < rounds; r++)); do
    # shellcheck disable=SC2086
    m+=("$(timeout "$limit" $mpt bench "$spec" $overrides device.threads=2 --steps "$steps" --warmup "$warmup" \
           --no-peak --json | rate || true)")
    # shellcheck disable=SC2086
    p+=("$(OMP_NUM_THREADS=2 LD_PRELOAD=$tcmalloc TCMALLOC_RELEASE_RATE=0 timeout "$limit" \
           "$python" scripts/pytorch_reference.py $pyargs --threads 2 --steps "$steps" --warmup "$warmup" | rate || true)")
  done
  local mm pm spread
  mm=$(printf '%s\n' "${m[@]}" | median)
  pm=$(printf '%s\n' "${p[@]}" | median)
  if [[ $pm == 0 || $mm == 0 ]]; then
    printf '%-30s mpt %10.1f samples/s   pytorch %10.1f samples/s   (0: failed or over %ss)\n' "$name" "$mm" "$pm" "$limit"
    return
  fi
  # Each round's own ratio, so that a round in one of the VM's slow phases shows as such.
  spread=$(for ((r = 0; r < rounds; r++)); do python3 -c "print(${m[r]} / max(${p[r]}, 1e-9))"; done | sort -g |
           awk 'NR == 1 {lo = $1} {hi = $1} END {printf "%.2f-%.2fx", lo, hi}')
  printf '%-30s mpt %10.1f samples/s   pytorch %10.1f samples/s   mpt/pytorch %.2fx (rounds %s)\n' "$name" "$mm" \
    "$pm" "$(python3 -c "print($mm / $pm)")" "$spread"
}

echo "mpt vs PyTorch eager, $rounds interleaved rounds, medians ($(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores)"
want() { [[ " ${cases[*]} " == *" $1 "* ]]; }
if want mlp; then
run_case "mlp fp32 b128" 500 configs/mlp_fmnist_fp32.yaml "" "--model mlp --precision fp32 --batch 128"
run_case "mlp bf16 b128" 500 configs/mlp_fmnist_mixed.yaml "" "--model mlp --precision bf16 --batch 128"
fi
if want resnet50; then
run_case "resnet50 fp32 b16 64px" 6 configs/mlp_fmnist_fp32.yaml \
  "model.name=resnet50 data.channels=3 data.image_size=64 data.batch_size=16" \
  "--model resnet50 --precision fp32 --batch 16 --channels 3 --size 64"
run_case "resnet50 bf16 b16 64px" 6 configs/mlp_fmnist_mixed.yaml \
  "model.name=resnet50 data.channels=3 data.image_size=64 data.batch_size=16" \
  "--model resnet50 --precision bf16 --batch 16 --channels 3 --size 64"
# Channels-last on both sides: the layout mpt's ResNet configs train in (oneDNN's own; mpt's fused BF16 batch norm
# needs it), and the one a PyTorch user tunes a CPU ResNet to.
run_case "resnet50 fp32 b16 64px nhwc" 6 configs/mlp_fmnist_fp32.yaml \
  "model.name=resnet50 model.channels_last=true data.channels=3 data.image_size=64 data.batch_size=16" \
  "--model resnet50 --precision fp32 --batch 16 --channels 3 --size 64 --channels-last"
run_case "resnet50 bf16 b16 64px nhwc" 6 configs/mlp_fmnist_mixed.yaml \
  "model.name=resnet50 model.channels_last=true data.channels=3 data.image_size=64 data.batch_size=16" \
  "--model resnet50 --precision bf16 --batch 16 --channels 3 --size 64 --channels-last"
fi
if want bert; then
run_case "bert-base fp32 b8 seq128" 3 configs/bert_base_mlm_fp32.yaml \
  "data.batch_size=8 data.vocab=data/bert-base-uncased/vocab.txt" "--model bert-base --precision fp32 --batch 8"
# The spec's precision.strategy is auto (master weights on the CPU); the reference autocasts, and so does mpt here.
run_case "bert-base bf16 b8 seq128" 3 configs/bert_base_mlm.yaml \
  "data.batch_size=8 data.vocab=data/bert-base-uncased/vocab.txt precision.strategy=autocast" \
  "--model bert-base --precision bf16 --batch 8"
run_case "bert-base bf16 b8, no dropout" 3 configs/bert_base_mlm.yaml \
  "data.batch_size=8 data.vocab=data/bert-base-uncased/vocab.txt precision.strategy=autocast model.dropout=0" \
  "--model bert-base --precision bf16 --batch 8 --dropout 0"
fi
# ViT-Tiny on 28 px images in 7 px patches (configs/vit_fmnist_*.yaml); the reference is torchvision's
# VisionTransformer with a 1-channel stem and its head in FP32, as mpt keeps it.
if want vit; then
run_case "vit-tiny fp32 b128 patch7" 20 configs/vit_fmnist_fp32.yaml "optimizer.name=adam optimizer.weight_decay=0" \
  "--model vit-tiny --patch 7 --precision fp32 --batch 128"
run_case "vit-tiny bf16 b128 patch7" 20 configs/vit_fmnist_mixed.yaml \
  "optimizer.name=adam optimizer.weight_decay=0 precision.strategy=autocast" \
  "--model vit-tiny --patch 7 --precision bf16 --batch 128"
fi

# Llama-style decoders at seq 256 on the fortunes BPE's 8,192 tokens (configs/llama_tiny_corpus*.yaml, no loss
# scaling); the reference is transformers' LlamaForCausalLM with SDPA attention, eager and under torch.compile
# (inductor), Adam on both sides. mpt keeps the norms, the tied head and the loss in FP32 (the family's islands);
# transformers computes its head in BF16 under autocast.
if want llama || want llama-tiny || want llama-135m; then
llama_case() {  # size batch steps
  local size=$1 batch=$2 steps=$3 mpt_args="model.name=llama-$1 optimizer.name=adam optimizer.weight_decay=0 data.batch_size=$2"
  local py="--model llama-$size --vocab 8192 --seq-len 256 --batch $batch --loss-scale 0" bf16_head
  bf16_head='precision.fp32_modules=["*layernorm","model.norm"]'  # the head in BF16, as transformers runs it
  run_case "llama-$size fp32 b$batch seq256" "$steps" configs/llama_tiny_corpus_fp32.yaml "$mpt_args" "$py --precision fp32"
  run_case "llama-$size bf16 b$batch seq256" "$steps" configs/llama_tiny_corpus.yaml "$mpt_args" "$py --precision bf16"
  run_case "llama-$size bf16, BF16 head" "$steps" configs/llama_tiny_corpus.yaml "$mpt_args $bf16_head" "$py --precision bf16"
  [[ $size == tiny || ${MPT_BENCH_COMPILE_135M:-0} == 1 ]] || return 0  # compiling 135m takes minutes a run
  run_case "llama-$size fp32 vs compile" "$steps" configs/llama_tiny_corpus_fp32.yaml "$mpt_args" "$py --precision fp32 --compile"
  run_case "llama-$size bf16 vs compile" "$steps" configs/llama_tiny_corpus.yaml "$mpt_args $bf16_head" "$py --precision bf16 --compile"
}
if want llama || want llama-tiny; then llama_case tiny 8 20; fi
if want llama || want llama-135m; then llama_case 135m 4 3; fi
fi
