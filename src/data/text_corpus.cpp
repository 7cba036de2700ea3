// Text corpus -> packed token sequences.
#include <algorithm>
#include <filesystem>
#include <memory>
#include <set>

#include "common/error.h"
#include "data/dataset.h"
#include "data/held_out.h"
#include "data/last_made.h"
#include "data/tokenizer.h"
#include "data/wordpiece.h"

namespace mpt::data {
namespace fs = std::filesystem;
namespace {

struct PackedCorpus {
  torch::Tensor sequences;  // int32 (N, S)
  MaskedLmConfig masked_lm;
};

// Tokenises `path` line by line (BERT treats a newline as whitespace, so no token spans two lines) and appends
// its packed sequences to `rows`.
void pack_file(const std::string& path, const WordPieceTokenizer& tokenizer, int64_t seq_len, int32_t cls, int32_t sep,
               std::vector<int32_t>& rows) {
  const auto body = static_cast<size_t>(seq_len - 2);
  std::vector<int32_t> pending;
  auto emit = [&](size_t count) {
    rows.push_back(cls);
    rows.insert(rows.end(), pending.begin(), pending.begin() + static_cast<std::ptrdiff_t>(count));
    rows.push_back(sep);
    rows.insert(rows.end(), body - count, 0);  // [PAD] = 0 after the text
    pending.erase(pending.begin(), pending.begin() + static_cast<std::ptrdiff_t>(count));
  };
  for_each_utf8_line(path, [&](std::string& line, int64_t) {
    const std::vector<int32_t> ids = tokenizer.encode(line);
    pending.insert(pending.end(), ids.begin(), ids.end());
    while (pending.size() >= body) emit(body);
  });
  if (!pending.empty()) emit(pending.size());
}

PackedCorpus pack_corpus(const DataConfig& config) {
  WordPieceTokenizer tokenizer = wordpiece_tokenizer(config);
  const Vocabulary& vocab = tokenizer.vocab();
  const auto cls = static_cast<int32_t>(vocab.id("[CLS]")), sep = static_cast<int32_t>(vocab.id("[SEP]"));
  const int64_t pad = vocab.id("[PAD]");
  if (pad != 0)
    throw Error(config.vocab + ": [PAD] has id " + std::to_string(pad) + "; mpt expects it at id 0 (line 1)");
  if (config.seq_len < 3)
    throw UsageError("data.seq_len = " + std::to_string(config.seq_len) + ": expected at least 3");

  std::vector<int32_t> rows;
  for (const std::string& file : corpus_files(config.root)) pack_file(file, tokenizer, config.seq_len, cls, sep, rows);
  if (rows.empty()) throw Error(config.root + ": the corpus holds no text");
  PackedCorpus corpus;
  const auto count = static_cast<int64_t>(rows.size()) / config.seq_len;
  corpus.sequences = torch::from_blob(rows.data(), {count, config.seq_len}, torch::kInt).clone();
  corpus.masked_lm = masked_lm_config(vocab, config.mask_prob);
  return corpus;
}

// Train and test come from one tokenisation pass: the last corpus packed is kept for the other split.
std::shared_ptr<const PackedCorpus> packed_corpus(const DataConfig& config) {
  const std::string key = config.root + '\n' + config.vocab + '\n' + config.tokenizer + '\n' +
                          std::to_string(config.lowercase) + '\n' + std::to_string(config.seq_len) + '\n' +
                          std::to_string(config.mask_prob);
  return last_made<PackedCorpus>(key, [&] { return pack_corpus(config); });
}

}  // namespace

MaskedLmConfig masked_lm_config(const Vocabulary& vocab, double probability) {
  MaskedLmConfig config;
  config.probability = probability;
  config.mask_id = vocab.id("[MASK]");
  config.vocab_size = vocab.size();
  config.special_ids = {vocab.id("[PAD]"), vocab.id("[CLS]"), vocab.id("[SEP]")};
  return config;
}

std::vector<std::string> corpus_files(const std::string& root, const std::vector<std::string>& extensions) {
  std::error_code error;
  if (fs::is_regular_file(root, error)) return {root};
  if (!fs::is_directory(root, error)) throw Error(root + ": no such file or folder (the text corpus, data.root)");
  // Linked folders are followed, each real folder and file once: a link loop neither recurses forever nor reads
  // a file twice (which would also copy its text into both splits).
  std::set<fs::path> folders_seen = {fs::canonical(root)}, files_seen;
  std::vector<std::string> files;
  auto walk = fs::recursive_directory_iterator(root, fs::directory_options::follow_directory_symlink);
  for (auto it = fs::begin(walk); it != fs::end(walk); it.increment(error)) {
    if (error) throw Error(root + ": cannot list the corpus folder: " + error.message());
    const fs::path real = fs::canonical(it->path(), error);
    if (error) continue;  // a dangling link
    if (fs::is_directory(real)) {
      if (!folders_seen.insert(real).second) it.disable_recursion_pending();
    } else if (std::find(extensions.begin(), extensions.end(), it->path().extension().string()) != extensions.end() &&
               fs::is_regular_file(real) && files_seen.insert(real).second) {
      files.push_back(it->path().string());
    }
  }
  if (files.empty()) {
    std::string kinds;
    for (const auto& extension : extensions) kinds += (kinds.empty() ? "*" : " or *") + extension;
    throw Error(root + ": no " + kinds + " files in this folder (the text corpus, data.root)");
  }
  std::sort(files.begin(), files.end());
  return files;
}

Dataset load_text_corpus(const DataConfig& config, const std::string& split, int64_t limit) {
  const auto corpus = packed_corpus(config);
  Dataset dataset;
  dataset.tokens = split_rows(corpus->sequences, config, split, limit, "sequences");
  dataset.masked_lm = corpus->masked_lm;
  return dataset;
}

}  // namespace mpt::data
