#!/usr/bin/env bash
# Fuzzing (not a test): builds the libFuzzer harnesses of fuzz/ with clang, AddressSanitizer and
# UndefinedBehaviorSanitizer into build-fuzz/, makes seed corpora from real files (the shipped specs and suite,
# Fashion-MNIST, CIFAR-10 records, the vocabulary, the fortune corpus and topics, files torch.save and
# safetensors write, an mpt checkpoint, a PNG and a JPEG), and runs each harness on its corpus (docs/hardening.md).
#
#   scripts/fuzz.sh [SECONDS] [HARNESS ...]       # default: 30 s for each of spec suite jsonl idx cifar
#                                                 # wordpiece tsv corpus pickle weights image hf_config
#                                                 # tokenize override fp8_state mlflow_answer spool
#                                                 # checkpoint
#   scripts/fuzz.sh --runs N [HARNESS ...]        # N executions each: the long run is --runs 1000000
#
# Stops at the first crash, hang (an input running over 10 s), memory blow-up (over 2 GiB) or sanitizer report,
# leaving the input under build-fuzz/findings/ and a non-zero exit. Needs clang (scripts/setup.sh installs it)
# and the torch environment (scripts/torch_env.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
limit=(-max_total_time=30)
if [[ ${1:-} == --runs ]]; then limit=(-runs="$2"); shift 2
elif [[ ${1:-} =~ ^[0-9]+$ ]]; then limit=(-max_total_time="$1"); shift; fi
harnesses=("$@")
all=(spec suite jsonl idx cifar wordpiece tsv corpus pickle weights image hf_config tokenize override fp8_state
  mlflow_answer spool checkpoint tokenizer_json)
[[ ${#harnesses[@]} -gt 0 ]] || harnesses=("${all[@]}")

env_dir=$(scripts/torch_env.sh)
python=$env_dir/bin/python
torch_cmake=$("$python" -c 'import torch; print(torch.utils.cmake_prefix_path)')
if [[ ! -f build-fuzz/build.ninja ]]; then
  cmake -S fuzz -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
    -DCMAKE_PREFIX_PATH="$torch_cmake" >/dev/null
fi
cmake --build build-fuzz -j "$(nproc)" --target "${harnesses[@]/#/fuzz_}"

# Seeds, made once (again when a harness has none).
seeds=build-fuzz/seeds
if [[ ! -f $seeds/.made || ! -d $seeds/tokenizer_json ]]; then
  rm -rf "$seeds" && mkdir -p "${all[@]/#/$seeds/}"
  cp configs/*.yaml "$seeds/spec/"
  cp scripts/nightly_example.yaml "$seeds/suite/"
  printf '{"kind": "train", "step": 50, "loss": 0.5}\n{"kind": "eval", "step": 100, "eval": {"loss": 0.4}}\n' \
    >"$seeds/jsonl/metrics.jsonl"
  printf '{"jobs": [{"status": "ok", "job": {"name": "a"}}], "status": "done"}\n' >"$seeds/jsonl/night.json"
  fmnist=/usr/share/datasets/fashion-mnist
  for name in t10k-labels-idx1-ubyte t10k-images-idx3-ubyte; do
    if [[ -f $fmnist/$name.gz ]]; then gzip -dc "$fmnist/$name.gz" | head -c 4000 >"$seeds/idx/$name" || true
    elif [[ -f $fmnist/$name ]]; then head -c 4000 "$fmnist/$name" >"$seeds/idx/$name"; fi
  done
  [[ -f data/bert-base-uncased/vocab.txt ]] && head -n 400 data/bert-base-uncased/vocab.txt >"$seeds/wordpiece/vocab.txt"
  echo "the quick brown fox jumps over the lazy dog. Élan, naïve café — 中文 text!" >"$seeds/wordpiece/text.txt"
  cp "$seeds/wordpiece/text.txt" "$seeds/corpus/"
  [[ -f data/corpus/fortunes/art.txt ]] && head -c 3000 data/corpus/fortunes/art.txt >"$seeds/corpus/art.txt"
  printf 'pos\tthe a\nneg\tthe s\n' >"$seeds/tsv/small.tsv"
  cp "$seeds/wordpiece/text.txt" "$seeds/tokenize/"
  printf '\x01\x00{"run": {"info": {"run_id": "r1", "artifact_uri": "mlflow-artifacts:/1/r1/artifacts"}}}' \
    >"$seeds/mlflow_answer/run.bin"
  printf '\x08\x00{"error_code": "RESOURCE_DOES_NOT_EXIST", "message": "no such run"}' >"$seeds/mlflow_answer/refusal.bin"
  printf '\x01\x00<html><body>Sign in</body></html>' >"$seeds/mlflow_answer/html.bin"
  printf '{"kind": "run", "dir": "/nonexistent/run", "uri": "http://user:pw@127.0.0.1:5000", "experiment": "x",\n' \
    >"$seeds/spool/entry.json"
  printf ' "run_name": "", "tags": [["team", "vision"]], "source": "mpt train a.yaml", "spooled_at_ms": 1796600000000}\n' \
    >>"$seeds/spool/entry.json"
  printf 'optimizer.lr=3e-4\n+train.epochs=2\n++model.hidden_sizes=[64, 32]\n~optimizer.lr=0.01\n' >"$seeds/override/mix"
  [[ -f data/all-MiniLM-L6-v2/config.json ]] && cp data/all-MiniLM-L6-v2/config.json "$seeds/hf_config/"
  if [[ -f data/corpus/fortunes/art.txt ]]; then  # a byte-level BPE of 300 tokens, small enough to mutate
    "$python" -c 'import sys; from tokenizers import Tokenizer, models, pre_tokenizers, trainers
t = Tokenizer(models.BPE()); t.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
t.train([sys.argv[1]], trainers.BpeTrainer(vocab_size=300, special_tokens=["<|endoftext|>"], show_progress=False))
t.save(sys.argv[2])' data/corpus/fortunes/art.txt "$seeds/tokenizer_json/bpe.json" || true
  fi
  printf '{"model_type": "bert", "vocab_size": 30522, "hidden_size": 128, "num_hidden_layers": 2, ' >"$seeds/hf_config/tiny.json"
  printf '"num_attention_heads": 2, "intermediate_size": 512}\n' >>"$seeds/hf_config/tiny.json"
  if [[ -f data/fortune_topics/train.tsv ]]; then  # train.tsv, a form feed, test.tsv: the harness splits there
    { head -c 800 data/fortune_topics/train.tsv; printf '\f'; head -c 600 data/fortune_topics/test.tsv; } >"$seeds/tsv/split.tsv"
  fi
  "$python" - "$seeds" <<'PY'
import io, random, sys, zipfile
import torch
seeds = sys.argv[1]
rng = random.Random(1)  # CIFAR-10: two 3,073-byte records (label, 3x32x32 pixels), and one with label 11
open(f"{seeds}/cifar/two_records.bin", "wb").write(b"".join(bytes([label]) + rng.randbytes(3072) for label in (3, 7)))
open(f"{seeds}/cifar/bad_label.bin", "wb").write(bytes([11]) + bytes(3072))
state = {"weight": torch.randn(3, 2), "bias": torch.zeros(3), "steps": torch.tensor(7)}
torch.save(state, f"{seeds}/weights/state.pt")
torch.save({"state_dict": state, "epoch": 3}, f"{seeds}/weights/wrapped.pt")
import struct  # FP8 state: recipe and margin bytes, then histories and scales as FP32 (delayed; a tiny amax)
open(f"{seeds}/fp8_state/delayed.bin", "wb").write(bytes([0, 0]) + struct.pack("<5f", 2.0, 0, 0, 0, 224.0) * 3)
open(f"{seeds}/fp8_state/tiny.bin", "wb").write(bytes([1, 1]) + struct.pack("<5f", 1e-36, 0, 0, 0, 3.4e38) * 3)
with zipfile.ZipFile(f"{seeds}/weights/state.pt") as z:
    for name in z.namelist():
        if name.endswith("data.pkl"):
            open(f"{seeds}/pickle/state.pkl", "wb").write(z.read(name))
with zipfile.ZipFile(f"{seeds}/weights/wrapped.pt") as z:
    for name in z.namelist():
        if name.endswith("data.pkl"):
            open(f"{seeds}/pickle/wrapped.pkl", "wb").write(z.read(name))
try:
    from safetensors.torch import save_file
    save_file({k: v.float() for k, v in state.items()}, f"{seeds}/weights/state.safetensors")
except ImportError:
    pass
try:
    from PIL import Image
    image = Image.new("RGB", (9, 7), (200, 30, 90))
    image.save(f"{seeds}/image/a.png")
    image.save(f"{seeds}/image/a.jpg", quality=90)
except ImportError:
    pass
PY
  if [[ -x build/mpt ]]; then  # a small real checkpoint
    run=$(mktemp -d)
    build/mpt train configs/mlp_fmnist_fp32.yaml model.hidden_sizes=[2] train.max_steps=1 data.train_limit=128 \
      train.progress=plain --run-dir "$run/r" >/dev/null 2>&1 && cp "$run"/r/checkpoints/*.mpt "$seeds/weights/" || true
    rm -rf "$run"
  fi
  touch "$seeds/.made"
fi
if [[ ! -d $seeds/checkpoint ]]; then  # the checkpoint harness's model: Linear(4, 3) and BatchNorm1d(3), Adam
  mkdir -p "$seeds/checkpoint"
  "$python" - "$seeds/checkpoint" <<'PY'
import struct, sys, zlib
def record(name, kind, body):
    return struct.pack("<I", len(name)) + name.encode() + bytes([kind]) + body
def tensor(name, shape, values):
    data = struct.pack(f"<{len(values)}f", *values)
    return record(name, 1, bytes([1, len(shape)]) + b"".join(struct.pack("<q", s) for s in shape)
                  + struct.pack("<Q", len(data)) + data)
records = [record("optimizer.kind", 4, struct.pack("<Q", 4) + b"adam")]
for name, shape in [("0.weight", [3, 4]), ("0.bias", [3]), ("1.weight", [3]), ("1.bias", [3])]:
    n = 1
    for s in shape: n *= s
    records.append(tensor("model." + name, shape, [0.5] * n))
    records.append(record(f"optimizer.{name}.step", 2, struct.pack("<q", 3)))
    records.append(tensor(f"optimizer.{name}.exp_avg", shape, [0.1] * n))
    records.append(tensor(f"optimizer.{name}.exp_avg_sq", shape, [0.01] * n))
records += [tensor("model.1.running_mean", [3], [0.0] * 3), tensor("model.1.running_var", [3], [1.0] * 3),
            record("model.1.num_batches_tracked", 1, bytes([5, 0]) + struct.pack("<Q", 8) + struct.pack("<q", 3)),
            record("state.step", 2, struct.pack("<q", 3)), record("state.applied_steps", 2, struct.pack("<q", 3)),
            record("scaler.scale", 3, struct.pack("<d", 1024.0)), record("scaler.lowest_scale", 3, struct.pack("<d", 1.0))]
body = b"".join(records)
open(f"{sys.argv[1]}/small.mpt", "wb").write(b"MPTCKPT
" + struct.pack("<II", 2, 0) + body + b"MPTDONE
"
    + struct.pack("<QII", len(body), zlib.crc32(body), len(records)))
PY
fi
if [[ -x build/mpt && ! -f $seeds/weights/sharded.mpt ]]; then  # streamed checkpoints: one file, and a sharded main
  run=$(mktemp -d)
  build/mpt train configs/mlp_fmnist_mixed.yaml model.hidden_sizes=[64] train.max_steps=2 data.train_limit=512 \
    data.test_limit=100 train.progress=plain --run-dir "$run/one" >/dev/null 2>&1 &&
    cp "$run/one/checkpoints/step-000000002.mpt" "$seeds/weights/streamed.mpt" || true
  build/mpt train configs/mlp_fmnist_mixed.yaml model.hidden_sizes=[64] train.max_steps=2 data.train_limit=512 \
    data.test_limit=100 train.progress=plain distributed.shard_optimizer=true precision.strategy=master_weights \
    --nproc 2 --run-dir "$run/two" >/dev/null 2>&1 &&
    cp "$run/two/checkpoints/step-000000002.mpt" "$seeds/weights/sharded.mpt" || true
  rm -rf "$run"
fi

mkdir -p build-fuzz/findings build-fuzz/scratch
status=0
for name in "${harnesses[@]}"; do
  corpus=build-fuzz/corpus/$name
  mkdir -p "$corpus"
  cp -n "$seeds/$name"/* "$corpus/" 2>/dev/null || true
  echo "== fuzz_$name ${limit[*]}"
  # LibTorch's own start-up allocations are not ours to report; mpt's parsers run instrumented.
  if ! FUZZ_SCRATCH=build-fuzz/scratch ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 \
      LSAN_OPTIONS=suppressions=fuzz/lsan.supp UBSAN_OPTIONS=print_stacktrace=1 \
      "build-fuzz/fuzz_$name" "$corpus" "${limit[@]}" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
      -artifact_prefix="build-fuzz/findings/$name-" -print_final_stats=1 2>"build-fuzz/$name.log"; then
    echo "fuzz_$name: FINDING (see build-fuzz/$name.log and build-fuzz/findings/)"
    tail -30 "build-fuzz/$name.log"
    status=1
  fi
  grep -E '^stat::number_of_executed_units|^stat::peak_rss_mb|cov: ' "build-fuzz/$name.log" | tail -3 || true
done
exit $status
