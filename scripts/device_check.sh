#!/usr/bin/env bash
# The GPU check: build mpt against the LibTorch 2.x inside a machine's Python torch, benchmark MLP, ResNet-50 and
# BERT-base in FP32/TF32/FP16/BF16 next to the same models in PyTorch eager (scripts/pytorch_reference.py), then
# build and run the test suite with CUDA visible, in under ~9.5 minutes. A benchmark and a smoke test, not CI.
#
# The device machine (NVIDIA GPU, Python torch with CUDA, CMake and ninja; no internet, no Debian dev packages)
# gets the libraries mpt builds against as Debian 12 .debs, and Fashion-MNIST for the tests, fetched here first:
#
#   scripts/device_check.sh --prepare     # here: apt-get download into .devdeps/, the dataset into .fmnist/
#                                         # (both git-excluded), ~55 MB
#   device run: bash scripts/device_check.sh   carry: [".devdeps", ".fmnist", "data"]   timeout_s: 590
#
# Order of work, so that a short lease still yields the most: the mpt binary alone first (if it does not build,
# every compile error is printed and the script stops, leaving device time for a rerun, unless DEVICE_CHECK_EAGER=1
# asks for the PyTorch side of the table anyway), the benchmark table, a check that a step syncs the host once,
# then the test binary and `ctest -L fast` in whatever time is left (DEVICE_CHECK_SECONDS, default 560).
# Results (build log, doctor, bench table as text and JSON lines, ctest log) go to $OUT when set, else
# ./device-results. Gloo and NCCL are built as here; one GPU cannot host two NCCL ranks, so NCCL is compiled, not run.
set -uo pipefail
cd "$(dirname "$0")/.."

deps=(libyaml-cpp-dev libyaml-cpp0.7 libspdlog-dev libspdlog1.10 libfmt-dev libfmt9 libcli11-dev nlohmann-json3-dev
      catch2 libicu-dev libicu72 libturbojpeg0-dev libturbojpeg0 libpng-dev libpng16-16 zlib1g-dev zlib1g libgloo-dev)
fmnist=/usr/share/datasets/fashion-mnist

if [[ ${1:-} == --prepare ]]; then
  set -e
  for ignored in /.devdeps/ /.fmnist/; do
    grep -qx "$ignored" .git/info/exclude 2>/dev/null || echo "$ignored" >> .git/info/exclude
  done
  mkdir -p .devdeps .fmnist && (cd .devdeps && apt-get download "${deps[@]}")
  cp "$fmnist"/*-ubyte.gz .fmnist/
  du -sh .devdeps .fmnist
  exit 0
fi

budget=${DEVICE_CHECK_SECONDS:-560}
out=${OUT:-$PWD/device-results}
mkdir -p "$out"
started=$SECONDS
log() { echo "[device_check $((SECONDS - started))s] $*" | tee -a "$out/summary.txt"; }

# 1. The libraries: unpacked under /tmp/devdeps, never over / (that can break the machine's own tools).
prefix=/tmp/devdeps
mkdir -p "$prefix"
for deb in .devdeps/*.deb; do dpkg -x "$deb" "$prefix" || { log "cannot unpack $deb"; exit 1; }; done
export LD_LIBRARY_PATH="$prefix/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
if [[ ! -d $fmnist && -d .fmnist ]]; then mkdir -p "$fmnist" && cp .fmnist/*.gz "$fmnist"/; fi
python=$(command -v python3)
torch_cmake=$("$python" -c 'import torch; print(torch.utils.cmake_prefix_path)')
log "$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -n 1)"
log "torch $("$python" -c 'import torch; print(torch.__version__, "cuda", torch.version.cuda)')"
# 2. Build mpt against the machine's torch (CUDA), as scripts/setup.sh does here, with the unpacked libraries first
# on every search path. A wheel whose libgomp is renamed (older ones) leaves mpt's loops serial (MPT_OPENMP=OFF);
# on the GPU they do not run in the step. The test binary waits until after the benchmarks.
openmp=ON
[[ -e $("$python" -c 'import torch, os; print(os.path.join(os.path.dirname(torch.__file__), "lib", "libgomp.so.1"))') ]] ||
  openmp=OFF
cmake -S . -B build-device -G Ninja -DCMAKE_BUILD_TYPE=Release -DMPT_USE_PCH=ON -DMPT_OPENMP="$openmp" \
  -DCMAKE_PREFIX_PATH="$torch_cmake;$prefix/usr;$prefix/usr/lib/x86_64-linux-gnu/cmake" \
  -DICU_ROOT="$prefix/usr" -DCMAKE_INCLUDE_PATH="$prefix/usr/include" \
  -DCMAKE_LIBRARY_PATH="$prefix/usr/lib/x86_64-linux-gnu" >"$out/build.log" 2>&1 &&
  timeout 330 cmake --build build-device --target mpt -j "$(nproc)" -- -k 0 >>"$out/build.log" 2>&1
built=0
if [[ -x build-device/mpt ]]; then
  built=1
  log "built mpt ($(./build-device/mpt --version 2>&1 | head -n 1)) "
  ./build-device/mpt doctor >"$out/doctor.txt" 2>&1
  log "doctor: $(grep -E 'GPUs|precision.mode: mixed' "$out/doctor.txt" | tr -s ' ' | paste -sd ';' -)"
else
  log "mpt did not build; the errors of build.log (ninja kept going to find them all):"
  { grep -E 'error|Error|CMake Warning' "$out/build.log" | head -n 60; tail -n 5 "$out/build.log"; } | tee -a "$out/summary.txt"
  # With DEVICE_CHECK_EAGER=1 the PyTorch side is still measured (a lease's last run); by default the script
  # stops, leaving the device time for a rerun after the fix.
  [[ ${DEVICE_CHECK_EAGER:-0} == 1 ]] || exit 1
  log "measuring the PyTorch side alone"
fi

# 3. Benchmarks, mpt next to PyTorch eager, synthetic batches, the same model/batch/optimizer/precision.
vocab=data/bert-base-uncased/vocab.txt
# The BERT spec names a corpus folder (data/corpus/fortunes links into Debian's fortunes, absent there); the
# benchmark feeds synthetic batches, so a folder with one text file satisfies the spec.
corpus=$(mktemp -d) && echo "mpt measures BERT-base on synthetic batches here." >"$corpus/stub.txt"

mpt_bench() {  # precision spec overrides...
  local precision=$1 spec=$2; shift 2
  local mode=$precision extra=()
  case $precision in
    fp32) mode=fp32; extra=(precision.tf32=false) ;;
    tf32) mode=fp32; extra=(precision.tf32=true) ;;
    fp16) mode=mixed_fp16 ;;
    bf16) mode=mixed_bf16 ;;
    fp8) mode=fp8 ;;  # mpt only: the eager reference has no FP8 (its column reads "failed")
  esac
  ((built)) || return 0
  timeout 90 ./build-device/mpt bench "$spec" device.type=cuda precision.mode="$mode" "${extra[@]}" "$@" --json 2>>"$out/bench.err"
}
py_bench() { timeout 90 "$python" scripts/pytorch_reference.py --device cuda "$@" 2>>"$out/bench.err"; }
printf '%-34s %14s %14s %8s %8s  %s\n' case mpt_samples/s eager_samples/s ratio mpt_mfu \
  "mpt ms/step: data fwd bwd scaler opt" | tee "$out/bench.txt"
run_case() {  # name precision "mpt args" "python args"
  local name=$1 precision=$2 margs=$3 pargs=$4 m p
  # shellcheck disable=SC2086
  m=$(mpt_bench "$precision" $margs | tee -a "$out/bench.jsonl")
  # shellcheck disable=SC2086
  p=$(py_bench $pargs --precision "$precision" | tee -a "$out/bench.jsonl")
  "$python" - "$name $precision" "$m" "$p" <<'PY' | tee -a "$out/bench.txt"
import json, sys
name, m, p = sys.argv[1], sys.argv[2], sys.argv[3]
def field(text, key):
    try:
        return json.loads(text)[key]
    except Exception:
        return None
ms, ps, mfu = field(m, "samples_per_sec"), field(p, "samples_per_sec"), field(m, "mfu")
phases = field(m, "breakdown_ms") or {}
fmt = lambda v: "%.1f" % v if isinstance(v, (int, float)) else "failed"
ratio = "%.2fx" % (ms / ps) if ms and ps else "-"
breakdown = " ".join("%.2f" % phases[k] for k in ("data", "forward", "backward", "scaler", "optimizer") if k in phases)
print("%-34s %14s %14s %8s %8s  %s" % (name, fmt(ms), fmt(ps), ratio, "%.2f" % mfu if mfu else "-", breakdown))
PY
}
# The MLP runs on its spec's optimizer (Adam), ResNet-50 on DeepLearningExamples' recipe (224 px, batch 256,
# channels-last, SGD with momentum), both sides alike; one model's four precisions side by side, so that a short
# lease loses whole models rather than whole precisions.
for precision in fp32 tf32 fp16 bf16; do
  run_case "mlp b512" $precision "configs/mlp_fmnist_mixed.yaml data.batch_size=512 --steps 300 --warmup 30" \
    "--model mlp --batch 512 --steps 300 --warmup 30"
done
for precision in fp32 tf32 fp16 bf16; do
  ((SECONDS - started > budget - 200)) && { log "skipping resnet50 $precision: time budget"; continue; }
  run_case "resnet50 b256 224px ch-last sgd" $precision \
    "configs/mlp_fmnist_mixed.yaml model.name=resnet50 model.channels_last=true data.channels=3 data.image_size=224 data.batch_size=256 optimizer.name=sgd optimizer.lr=0.1 --steps 30 --warmup 10" \
    "--model resnet50 --batch 256 --channels 3 --size 224 --channels-last --optimizer sgd --steps 30 --warmup 10"
done
for precision in fp32 tf32 fp16 bf16 fp8; do
  ((SECONDS - started > budget - 170)) && { log "skipping bert-base $precision: time budget"; continue; }
  run_case "bert-base mlm b32 seq128" $precision \
    "configs/bert_base_mlm.yaml data.batch_size=32 data.vocab=$vocab data.root=$corpus --steps 20 --warmup 5" \
    "--model bert-base --batch 32 --steps 20 --warmup 5"
done
log "benchmarks done at $((SECONDS - started)) s; table in bench.txt"
# The loader alone on real Fashion-MNIST, delivered to the GPU (uint8 pixels in pinned memory, finished there),
# against what the models above consume.
if ((built)) && ((SECONDS - started < budget - 150)); then
  for loader_case in "configs/mlp_fmnist_mixed.yaml data.batch_size=512" \
                     "configs/resnet50_fmnist_mixed.yaml data.image_size=112 data.batch_size=128"; do
    # shellcheck disable=SC2086
    log "loader: $loader_case: $(timeout 60 ./build-device/mpt bench $loader_case device.type=cuda --loader-only \
                                   --real-data --steps 200 2>>"$out/bench.err")"
  done
fi

# 3b. Host syncs: a few training steps of each model with debug.forbid_host_syncs, under which LibTorch refuses
# any host sync in a step but the overflow check, with clipping, an epoch end and a skipped step on the way
# (tests/cli/test_host_syncs_cli.cpp runs the same in ctest, which may not get time here).
if ((built)) && ((SECONDS - started < budget - 120)); then
  fox=$(mktemp -d) && for _ in $(seq 2000); do echo "the quick brown fox jumps over the lazy dog ."; done >"$fox/fox.txt"
  sync_check() {  # name spec overrides...
    local name=$1 result
    shift
    if timeout 60 ./build-device/mpt train "$@" device.type=cuda debug.forbid_host_syncs=true train.max_steps=12 \
         train.log_every_steps=4 train.grad_clip_norm=1.0 'debug.inject_nonfinite_grad_at=[5]' data.train_limit=256 \
         data.test_limit=256 --run-dir "$(mktemp -d)" >"$out/syncs-$name.log" 2>&1; then
      result="one per step (the overflow check)"
    else
      result="FAILED: $(grep -m 1 -E 'forbid_host_syncs|rror' "$out/syncs-$name.log")"
    fi
    log "host syncs, $name: $result"
  }
  sync_check mlp-fp32 configs/mlp_fmnist_fp32.yaml data.batch_size=64
  sync_check mlp-fp16 configs/mlp_fmnist_mixed.yaml precision.mode=mixed_fp16 data.batch_size=64
  sync_check resnet50-bf16-augmented configs/resnet50_fmnist_mixed.yaml data.batch_size=32 data.augment=true
  sync_check bert-tiny-mlm-bf16 configs/bert_tiny_mlm.yaml "data.root=$fox" "data.vocab=$vocab" data.seq_len=32 \
    data.batch_size=32
fi

# 3c. Activation checkpointing on the GPU (docs/memory.md measures it on the CPU): BERT-base BF16 b32, the training
# peak (the CUDA allocator's) and the step time with each mode, side by side.
if ((built)) && ((SECONDS - started < budget - 150)); then
  for recompute in none selective full; do
    m=$(mpt_bench bf16 configs/bert_base_mlm.yaml data.batch_size=32 "data.vocab=$vocab" "data.root=$corpus" \
          memory.activation_checkpointing=$recompute --steps 10 --warmup 3 | tee -a "$out/bench.jsonl")
    log "activation checkpointing, bert-base bf16 b32, $recompute: $("$python" -c '
import json, sys
try:
    r = json.loads(sys.argv[1])
    print("peak %.1f MiB, step %.1f ms" % (r["peak_memory_bytes"] / 2**20, r["step_time_ms"]["median"]))
except Exception:
    print("failed")' "$m")"
  done
fi

# 4. The gpu-labelled tests, then the fast suite, with CUDA visible (specs resolve device.type auto -> cuda, mixed
# -> bf16 or fp16), in the time left.
left=$((budget - (SECONDS - started)))
if ((built)) && ((left > 90)); then
  timeout $((left - 60)) cmake --build build-device -j "$(nproc)" >>"$out/build.log" 2>&1
  left=$((budget - (SECONDS - started)))
  if [[ -x build-device/tests/mpt_tests ]] && ((left > 20)); then
    timeout $((left - 10)) ctest --test-dir build-device -L gpu --timeout 240 >"$out/ctest-gpu.log" 2>&1
    log "ctest -L gpu: $(grep -E 'tests passed|tests failed' "$out/ctest-gpu.log" | tail -n 1)"
    grep -E '^\s+[0-9]+ - ' "$out/ctest-gpu.log" | tee -a "$out/summary.txt"
    left=$((budget - (SECONDS - started)))
    ((left > 20)) && timeout $((left - 10)) ctest --test-dir build-device -L fast --timeout 120 -j 8 >"$out/ctest.log" 2>&1
    log "ctest -L fast: $(grep -E 'tests passed|tests failed' "$out/ctest.log" | tail -n 1)"
    grep -E '^\s+[0-9]+ - ' "$out/ctest.log" | head -n 30 | tee -a "$out/summary.txt"
  else
    log "test binary not built or no time left ($left s)"
  fi
else
  log "tests skipped (mpt built: $built, $left s left)"
fi
log "done in $((SECONDS - started)) s"
[[ -s $out/bench.err ]] && { echo "--- bench.err (first lines)"; head -n 15 "$out/bench.err"; }
cat "$out/bench.txt"
