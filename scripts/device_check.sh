#!/usr/bin/env bash
# The GPU check: build mpt against the LibTorch 2.x inside a machine's Python torch, run the test suite with CUDA,
# and benchmark MLP, ResNet-50 and BERT-base in FP32/TF32/FP16/BF16 next to the same models in PyTorch eager
# (scripts/pytorch_reference.py), in about 8 minutes. A benchmark and a smoke test, not part of CI.
#
# The device machine (NVIDIA GPU, Python torch with CUDA, CMake and ninja; no internet, no Debian dev packages)
# gets the libraries mpt builds against as Debian 12 .debs, downloaded here first:
#
#   scripts/device_check.sh --prepare     # here: apt-get download into .devdeps/ (git-excluded), ~25 MB
#   device run: bash scripts/device_check.sh   carry: [".devdeps", "data/bert-base-uncased"]   timeout_s: 590
#
# Results (build log, ctest log, bench table as text and JSON lines) go to $OUT when set, else ./device-results.
# NCCL is not built: one GPU cannot host two NCCL ranks, so the data-parallel path there is untestable.
set -uo pipefail
cd "$(dirname "$0")/.."

deps=(libyaml-cpp-dev libyaml-cpp0.7 libspdlog-dev libspdlog1.10 libfmt-dev libfmt9 libcli11-dev nlohmann-json3-dev
      catch2 libicu-dev libicu72 libturbojpeg0-dev libturbojpeg0 libpng-dev libpng16-16 libgloo-dev)

if [[ ${1:-} == --prepare ]]; then
  set -e
  grep -qx '/.devdeps/' .git/info/exclude 2>/dev/null || echo '/.devdeps/' >> .git/info/exclude
  mkdir -p .devdeps && (cd .devdeps && apt-get download "${deps[@]}")
  du -sh .devdeps
  exit 0
fi

out=${OUT:-$PWD/device-results}
mkdir -p "$out"
started=$SECONDS
log() { echo "[device_check $((SECONDS - started))s] $*" | tee -a "$out/summary.txt"; }

# 1. The libraries: unpacked under /tmp/devdeps, never over / (that can break the machine's own tools).
prefix=/tmp/devdeps
mkdir -p "$prefix"
for deb in .devdeps/*.deb; do dpkg -x "$deb" "$prefix" || { log "cannot unpack $deb"; exit 1; }; done
export LD_LIBRARY_PATH="$prefix/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
python=$(command -v python3)
torch_cmake=$("$python" -c 'import torch; print(torch.utils.cmake_prefix_path)')
log "$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -n 1)"
log "torch $("$python" -c 'import torch; print(torch.__version__, "cuda", torch.version.cuda)')"

# 2. Build against torch's LibTorch (CUDA), with the unpacked libraries first on every search path. The wheel
# bundles its own renamed libgomp, so mpt's loops stay serial (MPT_OPENMP=OFF) rather than load a second OpenMP
# runtime; on the GPU they do not run in the step.
cmake -S . -B build-device -G Ninja -DCMAKE_BUILD_TYPE=Release -DMPT_NCCL=OFF -DMPT_USE_PCH=ON -DMPT_OPENMP=OFF \
  -DCMAKE_PREFIX_PATH="$torch_cmake;$prefix/usr;$prefix/usr/lib/x86_64-linux-gnu/cmake" \
  -DICU_ROOT="$prefix/usr" -DCMAKE_INCLUDE_PATH="$prefix/usr/include" \
  -DCMAKE_LIBRARY_PATH="$prefix/usr/lib/x86_64-linux-gnu" >"$out/build.log" 2>&1 &&
  cmake --build build-device -j "$(nproc)" >>"$out/build.log" 2>&1
if [[ ! -x build-device/mpt ]]; then
  log "build FAILED; last lines of build.log:"
  tail -n 30 "$out/build.log" | tee -a "$out/summary.txt"
  exit 1
fi
log "built mpt ($(./build-device/mpt --version 2>&1 | head -n 1))"
./build-device/mpt doctor >"$out/doctor.txt" 2>&1
log "doctor: $(grep -E 'GPUs|precision.mode: mixed' "$out/doctor.txt" | tr -s ' ' | paste -sd ';' -)"

# 3. The test suite with CUDA visible (specs resolve device.type auto -> cuda, mixed -> bf16 or fp16). Tests that
#    need Debian's datasets (Fashion-MNIST, fortunes) fail here for want of the data; the log says which.
timeout 180 ctest --test-dir build-device -L fast --timeout 120 -j 4 >"$out/ctest.log" 2>&1
log "ctest -L fast: $(grep -E 'tests passed|tests failed' "$out/ctest.log" | tail -n 1)"

# 4. Benchmarks, mpt next to PyTorch eager, synthetic batches, the same model/batch/optimizer/precision.
vocab=data/bert-base-uncased/vocab.txt
mpt_bench() {  # spec precision overrides...
  local spec=$1 precision=$2; shift 2
  local mode=$precision extra=()
  case $precision in
    fp32) mode=fp32; extra=(precision.tf32=false) ;;
    tf32) mode=fp32; extra=(precision.tf32=true) ;;
    fp16) mode=mixed_fp16 ;;
    bf16) mode=mixed_bf16 ;;
  esac
  timeout 120 ./build-device/mpt bench "$spec" device.type=cuda precision.mode=$mode "${extra[@]}" "$@" --json 2>>"$out/bench.err"
}
py_bench() { timeout 120 "$python" scripts/pytorch_reference.py --device cuda "$@" 2>>"$out/bench.err"; }
printf '%-34s %14s %14s %8s %8s\n' case mpt_samples/s eager_samples/s ratio mpt_mfu | tee "$out/bench.txt"
run_case() {  # name precision "mpt args" "python args"
  local name=$1 precision=$2 margs=$3 pargs=$4 m p
  # shellcheck disable=SC2086
  m=$(mpt_bench $margs "$precision" | tee -a "$out/bench.jsonl")
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
fmt = lambda v: "%.1f" % v if isinstance(v, (int, float)) else "failed"
ratio = "%.2fx" % (ms / ps) if ms and ps else "-"
print("%-34s %14s %14s %8s %8s" % (name, fmt(ms), fmt(ps), ratio, "%.2f" % mfu if mfu else "-"))
PY
}
for precision in fp32 tf32 fp16 bf16; do
  run_case "mlp b512" $precision "configs/mlp_fmnist_mixed.yaml data.batch_size=512 --steps 300 --warmup 30" \
    "--model mlp --batch 512 --steps 300 --warmup 30"
  run_case "resnet50 b128 112px ch-last" $precision \
    "configs/resnet50_fmnist_mixed.yaml data.batch_size=128 data.image_size=112 --steps 30 --warmup 10" \
    "--model resnet50 --batch 128 --channels 3 --size 112 --channels-last --steps 30 --warmup 10"
  run_case "bert-base mlm b32 seq128" $precision \
    "configs/bert_base_mlm.yaml data.batch_size=32 data.vocab=$vocab --steps 20 --warmup 5" \
    "--model bert-base --batch 32 --steps 20 --warmup 5"
  if ((SECONDS - started > 500)); then log "stopping the benchmarks at the time budget"; break; fi
done
log "done in $((SECONDS - started)) s; table in bench.txt"
