// BPE encoding (see bpe.h): the tokenizers library's Word::merge_all, a heap of candidate merges over a linked list
// of symbols, stale candidates skipped when popped.
#include "data/bpe.h"

#include <fmt/format.h>

#include <queue>

#include "common/error.h"

namespace mpt::data {
namespace {

uint64_t pair_key(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

size_t utf8_length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if (lead >> 5 == 0x6) return 2;
  if (lead >> 4 == 0xE) return 3;
  return 4;
}

std::pair<std::string, std::string> merge_pair(const nlohmann::json& merge, const std::string& where) {
  if (merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string())
    return {merge[0].get<std::string>(), merge[1].get<std::string>()};
  if (merge.is_string()) {
    const std::string text = merge.get<std::string>();
    const size_t space = text.find(' ');
    if (space != std::string::npos && space > 0 && text.find(' ', space + 1) == std::string::npos &&
        space + 1 < text.size())
      return {text.substr(0, space), text.substr(space + 1)};
  }
  throw Error(where + ": expected \"LEFT RIGHT\" or [\"LEFT\", \"RIGHT\"], got " + merge.dump().substr(0, 80));
}

std::string optional_text(const nlohmann::json& model, const char* key, const std::string& where) {
  if (!model.contains(key) || model[key].is_null()) return "";
  if (!model[key].is_string()) throw Error(where + ": " + key + ": expected a string or null");
  return model[key].get<std::string>();
}

bool optional_flag(const nlohmann::json& model, const char* key, const std::string& where) {
  if (!model.contains(key) || model[key].is_null()) return false;
  if (!model[key].is_boolean()) throw Error(where + ": " + key + ": expected true or false");
  return model[key].get<bool>();
}

constexpr size_t kCacheWords = 1 << 16;

}  // namespace

BpeModel::BpeModel(const nlohmann::json& model, const std::string& where) {
  if (!model.contains("vocab") || !model["vocab"].is_object()) throw Error(where + ": vocab: expected an object");
  for (const auto& [token, id] : model["vocab"].items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= (int64_t{1} << 31))
      throw Error(where + ": vocab: " + nlohmann::json(token).dump() + ": expected a non-negative integer id");
    vocab_.emplace(token, static_cast<int32_t>(id.get<int64_t>()));
  }
  if (model.contains("dropout") && !model["dropout"].is_null() && model["dropout"].get<double>() != 0.0)
    throw Error(where + ": dropout: mpt encodes deterministically (expected null or 0)");
  prefix_ = optional_text(model, "continuing_subword_prefix", where);
  suffix_ = optional_text(model, "end_of_word_suffix", where);
  fuse_unknown_ = optional_flag(model, "fuse_unk", where);
  byte_fallback_ = optional_flag(model, "byte_fallback", where);
  ignore_merges_ = optional_flag(model, "ignore_merges", where);
  if (const std::string unknown = optional_text(model, "unk_token", where); !unknown.empty()) {
    const auto found = vocab_.find(unknown);
    if (found == vocab_.end())
      throw Error(where + ": unk_token " + nlohmann::json(unknown).dump() + " is not in vocab");
    unknown_ = found->second;
  }
  const nlohmann::json& merges = model.contains("merges") ? model["merges"] : nlohmann::json::array();
  if (!merges.is_array()) throw Error(where + ": merges: expected a list");
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const std::string at = fmt::format("{}: merges[{}]", where, rank);
    const auto [left, right] = merge_pair(merges[rank], at);
    const std::string merged = left + right.substr(right.rfind(prefix_, 0) == 0 ? prefix_.size() : 0);
    const auto l = vocab_.find(left), r = vocab_.find(right), m = vocab_.find(merged);
    if (l == vocab_.end() || r == vocab_.end() || m == vocab_.end())
      throw Error(at + ": " +
                  nlohmann::json(l == vocab_.end()   ? left
                                 : r == vocab_.end() ? right
                                                     : merged)
                      .dump() +
                  " is not in vocab");
    merges_.emplace(pair_key(l->second, r->second), Merge{static_cast<int32_t>(rank), m->second});
  }
}

void BpeModel::add_symbol(const std::string& piece, std::vector<int32_t>& symbols, int32_t& pending_unknown) const {
  if (const auto found = vocab_.find(piece); found != vocab_.end()) {
    if (pending_unknown >= 0) symbols.push_back(pending_unknown);
    pending_unknown = -1;
    symbols.push_back(found->second);
    return;
  }
  if (byte_fallback_) {
    std::vector<int32_t> bytes;
    for (const unsigned char byte : piece) {
      const auto found = vocab_.find(fmt::format("<0x{:02X}>", byte));
      if (found == vocab_.end()) break;
      bytes.push_back(found->second);
    }
    if (bytes.size() == piece.size()) {
      symbols.insert(symbols.end(), bytes.begin(), bytes.end());
      return;
    }
  }
  if (unknown_ < 0) return;  // no unknown token: the character is dropped, as the library drops it
  if (pending_unknown >= 0 && !fuse_unknown_) symbols.push_back(pending_unknown);
  pending_unknown = unknown_;
}

std::vector<int32_t> BpeModel::merge_word(const std::string& word) const {
  std::vector<int32_t> ids;
  int32_t pending_unknown = -1;
  for (size_t at = 0; at < word.size();) {
    const size_t length = std::min(utf8_length(static_cast<unsigned char>(word[at])), word.size() - at);
    std::string piece = word.substr(at, length);
    if (at > 0) piece = prefix_ + piece;
    at += length;
    if (at == word.size()) piece += suffix_;
    add_symbol(piece, ids, pending_unknown);
  }
  if (pending_unknown >= 0) ids.push_back(pending_unknown);

  const auto n = static_cast<int64_t>(ids.size());
  std::vector<int64_t> previous(ids.size()), next(ids.size());
  std::vector<bool> removed(ids.size(), false);
  for (int64_t i = 0; i < n; ++i) previous[i] = i - 1, next[i] = i + 1 < n ? i + 1 : -1;
  struct Candidate {
    int32_t rank;
    int64_t position;
    int32_t id;
    bool operator<(const Candidate& other) const {  // the heap's top: the lowest rank, then the leftmost
      return rank != other.rank ? rank > other.rank : position > other.position;
    }
  };
  std::priority_queue<Candidate> heap;
  auto offer = [&](int64_t left) {
    if (left < 0 || next[left] < 0) return;
    if (const auto m = merges_.find(pair_key(ids[left], ids[next[left]])); m != merges_.end())
      heap.push({m->second.rank, left, m->second.id});
  };
  for (int64_t i = 0; i + 1 < n; ++i) offer(i);
  while (!heap.empty()) {
    const Candidate top = heap.top();
    heap.pop();
    const int64_t right = next[top.position];
    if (removed[top.position] || right < 0) continue;
    const auto m = merges_.find(pair_key(ids[top.position], ids[right]));
    if (m == merges_.end() || m->second.id != top.id) continue;  // the pair changed since it was offered
    ids[top.position] = top.id;
    removed[right] = true;
    next[top.position] = next[right];
    if (next[right] >= 0) previous[next[right]] = top.position;
    offer(previous[top.position]);
    offer(top.position);
  }
  std::vector<int32_t> merged;
  for (int64_t i = 0; i < n; ++i)
    if (!removed[i]) merged.push_back(ids[i]);
  return merged;
}

void BpeModel::encode(const std::string& word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (ignore_merges_)
    if (const auto found = vocab_.find(word); found != vocab_.end()) {
      out.push_back(found->second);
      return;
    }
  {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    if (const auto hit = cache_.find(word); hit != cache_.end()) {
      out.insert(out.end(), hit->second.begin(), hit->second.end());
      return;
    }
  }
  std::vector<int32_t> ids = merge_word(word);
  out.insert(out.end(), ids.begin(), ids.end());
  std::lock_guard<std::mutex> lock(cache_mutex_);
  if (cache_.size() >= kCacheWords) cache_.clear();
  cache_.emplace(word, std::move(ids));
}

}  // namespace mpt::data
