// The BPE model of a Hugging Face tokenizer.json: a vocabulary and ranked merges applied to each pre-tokenized word
// as the tokenizers library applies them (lowest rank first, leftmost first among equals), with its options: byte
// fallback to <0xXX> tokens, an unknown token (fused or not), a continuing-subword prefix and an end-of-word
// suffix, and ignore_merges (a word that is a token is taken whole).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace mpt::data {

class BpeModel {
 public:
  // From tokenizer.json's "model" object; an error naming `where`, the field and the entry that is wrong.
  BpeModel(const nlohmann::json& model, const std::string& where);

  // Appends the ids of one word (a pre-token) to `out`.
  void encode(const std::string& word, std::vector<int32_t>& out) const;
  const std::unordered_map<std::string, int32_t>& vocab() const { return vocab_; }

 private:
  struct Merge {
    int32_t rank, id;
  };
  std::vector<int32_t> merge_word(const std::string& word) const;
  void add_symbol(const std::string& piece, std::vector<int32_t>& symbols, int32_t& pending_unknown) const;

  std::unordered_map<std::string, int32_t> vocab_;
  std::unordered_map<uint64_t, Merge> merges_;  // (left id << 32 | right id) -> its rank and the merged token's id
  int32_t unknown_ = -1;
  bool fuse_unknown_ = false, byte_fallback_ = false, ignore_merges_ = false;
  std::string prefix_, suffix_;
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache_;  // word -> ids, bounded
};

}  // namespace mpt::data
