// tokenizer.json -> a Tokenizer (see tokenizer.h): the added tokens split the text first (those not normalized on
// the raw text, the others after the normalizer), then the pre-tokenizer and the model encode what lies between.
#include <bitset>
#include <filesystem>

#include <unicode/uchar.h>
#include <unicode/utf8.h>

#include "common/error.h"
#include "common/files.h"
#include "common/json.h"
#include "data/bpe.h"
#include "data/text_splitting.h"
#include "data/tokenizer.h"

namespace mpt::data {
namespace {

using Json = nlohmann::json;

struct AddedToken {
  std::string content;
  std::string pattern;  // what is matched: the content, through the normalizer for a normalized token
  int32_t id = 0;
  bool single_word = false, lstrip = false, rstrip = false, normalized = false;
};

// Text and the added tokens found in it, in order: a piece with id >= 0 is a token, the others text to encode.
struct Segment {
  std::string text;
  int32_t id = -1;
};

bool is_space_at(std::string_view text, size_t at, size_t* length) {
  UChar32 c = 0;
  int32_t i = static_cast<int32_t>(at);
  U8_NEXT(text.data(), i, static_cast<int32_t>(text.size()), c);
  *length = static_cast<size_t>(i) - at;
  return c >= 0 && u_hasBinaryProperty(c, UCHAR_WHITE_SPACE);
}

bool is_word_char(UChar32 c) { return c == '_' || u_isalnum(c); }

bool word_before(std::string_view text, size_t at) {
  if (at == 0) return false;
  int32_t i = static_cast<int32_t>(at);
  UChar32 c = 0;
  U8_PREV(text.data(), 0, i, c);
  return c >= 0 && is_word_char(c);
}

bool word_after(std::string_view text, size_t at) {
  if (at >= text.size()) return false;
  int32_t i = static_cast<int32_t>(at);
  UChar32 c = 0;
  U8_NEXT(text.data(), i, static_cast<int32_t>(text.size()), c);
  return c >= 0 && is_word_char(c);
}

// The added tokens in `text`, leftmost first and the longest among those starting there (the library's
// leftmost-longest matching), with their whitespace stripping and single-word rule.
// `starts` holds the first bytes of the patterns: a position no pattern starts with is passed at once.
std::vector<Segment> split_added(std::string_view text, const std::vector<AddedToken>& tokens,
                                 const std::bitset<256>& starts) {
  std::vector<Segment> out;
  size_t taken = 0;  // text before this is in `out`
  for (size_t at = 0; at < text.size();) {
    if (!starts[static_cast<unsigned char>(text[at])]) {
      ++at;
      continue;
    }
    const AddedToken* best = nullptr;
    for (const AddedToken& token : tokens)
      if ((!best || token.pattern.size() > best->pattern.size()) && !token.pattern.empty() &&
          text.compare(at, token.pattern.size(), token.pattern) == 0)
        best = &token;
    if (!best || (best->single_word && (word_before(text, at) || word_after(text, at + best->pattern.size())))) {
      at += best ? best->pattern.size() : 1;
      continue;
    }
    size_t begin = at, end = at + best->pattern.size(), length = 0;
    if (best->lstrip)
      while (begin > taken) {
        size_t back = begin - 1;
        while (back > taken && (static_cast<unsigned char>(text[back]) & 0xC0) == 0x80) --back;
        if (!is_space_at(text, back, &length)) break;
        begin = back;
      }
    if (best->rstrip)
      while (end < text.size() && is_space_at(text, end, &length)) end += length;
    if (begin > taken) out.push_back({std::string(text.substr(taken, begin - taken)), -1});
    out.push_back({best->content, best->id});
    taken = at = end;
  }
  if (taken < text.size()) out.push_back({std::string(text.substr(taken)), -1});
  return out;
}

bool flag(const Json& object, const char* key) {
  return object.contains(key) && object[key].is_boolean() && object[key].get<bool>();
}

std::vector<AddedToken> added_tokens(const Json& list, const std::string& where) {
  std::vector<AddedToken> tokens;
  if (list.is_null()) return tokens;
  if (!list.is_array()) throw Error(where + ": expected a list");
  for (size_t i = 0; i < list.size(); ++i) {
    const Json& entry = list[i];
    const std::string at = where + "[" + std::to_string(i) + "]";
    if (!entry.is_object() || !entry.contains("content") || !entry["content"].is_string() || !entry.contains("id") ||
        !entry["id"].is_number_integer() || entry["id"].get<int64_t>() < 0 ||
        entry["id"].get<int64_t>() >= (int64_t{1} << 31))
      throw Error(at + ": expected {\"id\": a non-negative integer, \"content\": a string, ...}");
    const std::string content = entry["content"].get<std::string>();
    AddedToken token{content,
                     content,
                     static_cast<int32_t>(entry["id"].get<int64_t>()),
                     flag(entry, "single_word"),
                     flag(entry, "lstrip"),
                     flag(entry, "rstrip"),
                     flag(entry, "normalized")};
    if (token.content.empty()) throw Error(at + ": content is empty");
    tokens.push_back(std::move(token));
  }
  return tokens;
}

class BpeTokenizer : public Tokenizer {
 public:
  BpeTokenizer(const Json& json, const std::string& file)
      : file_(file),
        model_(json["model"], file + ": model"),
        normalizer_(make_normalizer(json.value("normalizer", Json()), file + ": normalizer")),
        pre_tokenizer_(make_pre_tokenizer(json.value("pre_tokenizer", Json()), file + ": pre_tokenizer")) {
    // As the library does, a normalized token is looked for as the normalizer writes it.
    for (AddedToken& token : added_tokens(json.value("added_tokens", Json()), file + ": added_tokens")) {
      if (token.normalized) token.pattern = normalizer_(token.content);
      if (!token.pattern.empty())
        (token.normalized ? normalized_starts_ : raw_starts_).set(static_cast<unsigned char>(token.pattern[0]));
      (token.normalized ? normalized_ : raw_).push_back(std::move(token));
    }
    for (const auto& [token, id] : model_.vocab()) set_token(id, token);
    for (const auto* list : {&raw_, &normalized_})
      for (const AddedToken& token : *list) set_token(token.id, token.content);
  }

  std::vector<int32_t> encode(std::string_view text) const override {
    std::vector<int32_t> ids;
    for (const Segment& raw : split_added(text, raw_, raw_starts_)) {
      if (raw.id >= 0) {
        ids.push_back(raw.id);
        continue;
      }
      for (const Segment& normal : split_added(normalizer_(raw.text), normalized_, normalized_starts_)) {
        if (normal.id >= 0) {
          ids.push_back(normal.id);
          continue;
        }
        if (normal.text.empty()) continue;
        Pieces pieces;
        pre_tokenizer_(normal.text, pieces);
        for (const std::string& piece : pieces) model_.encode(piece, ids);
      }
    }
    return ids;
  }

  int64_t size() const override { return static_cast<int64_t>(tokens_.size()); }
  int64_t find(const std::string& token) const override {
    for (const auto* list : {&raw_, &normalized_})
      for (const AddedToken& added : *list)
        if (added.content == token) return added.id;
    const auto found = model_.vocab().find(token);
    return found == model_.vocab().end() ? -1 : found->second;
  }
  std::string token(int64_t id) const override {
    return id >= 0 && id < size() ? tokens_[static_cast<size_t>(id)] : std::string();
  }
  std::string source() const override { return file_; }

 private:
  void set_token(int32_t id, const std::string& token) {
    if (static_cast<size_t>(id) >= tokens_.size()) tokens_.resize(static_cast<size_t>(id) + 1);
    tokens_[static_cast<size_t>(id)] = token;
  }

  std::string file_;
  BpeModel model_;
  Normalizer normalizer_;
  PreTokenizer pre_tokenizer_;
  std::vector<AddedToken> raw_, normalized_;
  std::bitset<256> raw_starts_, normalized_starts_;  // the first bytes of their patterns
  std::vector<std::string> tokens_;                  // by id
};

class WordPieceAdapter : public Tokenizer {
 public:
  explicit WordPieceAdapter(WordPieceTokenizer tokenizer) : tokenizer_(std::move(tokenizer)) {}
  std::vector<int32_t> encode(std::string_view text) const override { return tokenizer_.encode(text); }
  int64_t size() const override { return tokenizer_.vocab().size(); }
  int64_t find(const std::string& token) const override { return tokenizer_.vocab().find(token); }
  std::string token(int64_t id) const override { return id >= 0 && id < size() ? tokenizer_.vocab().token(id) : ""; }
  std::string source() const override { return tokenizer_.vocab().source(); }

 private:
  WordPieceTokenizer tokenizer_;
};

std::string json_file(const std::string& path) {
  return std::filesystem::is_directory(path) ? path + "/tokenizer.json" : path;
}

Json parse_tokenizer_json(const std::string& file) {
  require_regular_file(file);
  std::string problem;
  Json json = parse_json(read_file(file, /*max_bytes=*/size_t{1} << 30), &problem);
  if (json.is_discarded()) throw Error(file + ": not JSON (" + problem + ")");
  if (!json.is_object() || !json.contains("model") || !json["model"].is_object())
    throw Error(file + ": expected a Hugging Face tokenizer.json (an object with a \"model\")");
  return json;
}

std::string model_type(const Json& json) {
  const Json& model = json["model"];
  if (model.contains("type") && model["type"].is_string()) return model["type"].get<std::string>();
  return model.contains("merges") ? "BPE" : "";  // older files leave BPE's type out
}

// The settings mpt's WordPiece has (bert-base-uncased's and cased BERT's), or why the file asks for others.
std::string wordpiece_mismatch(const Json& json, bool* lowercase) {
  const Json& normalizer = json.value("normalizer", Json());
  const Json& pre = json.value("pre_tokenizer", Json());
  const Json& model = json["model"];
  if (!normalizer.is_object() || normalizer.value("type", "") != "BertNormalizer")
    return "normalizer: mpt's WordPiece reads BertNormalizer";
  if (!pre.is_object() || pre.value("type", "") != "BertPreTokenizer")
    return "pre_tokenizer: mpt's WordPiece reads BertPreTokenizer";
  *lowercase = normalizer.value("lowercase", true);
  const Json& accents = normalizer.value("strip_accents", Json());
  if (!accents.is_null() && accents != *lowercase)
    return "normalizer: strip_accents differs from lowercase, which mpt's WordPiece ties together";
  if (!normalizer.value("clean_text", true) || !normalizer.value("handle_chinese_chars", true))
    return "normalizer: mpt's WordPiece cleans text and splits CJK ideographs (clean_text, handle_chinese_chars true)";
  if (model.value("continuing_subword_prefix", "##") != "##" || model.value("max_input_chars_per_word", 100) != 100 ||
      model.value("unk_token", "[UNK]") != "[UNK]")
    return "model: mpt's WordPiece uses unk_token [UNK], prefix ## and at most 100 characters a word";
  return "";
}

}  // namespace

WordPieceTokenizer read_wordpiece_json(const std::string& path) {
  const std::string file = json_file(path);
  const Json json = parse_tokenizer_json(file);
  if (model_type(json) != "WordPiece")
    throw Error(file + ": model type '" + model_type(json) + "': BERT's datasets take a WordPiece tokenizer.json");
  bool lowercase = true;
  if (const std::string why = wordpiece_mismatch(json, &lowercase); !why.empty()) throw Error(file + ": " + why);
  const Json& vocab = json["model"].value("vocab", Json());
  if (!vocab.is_object()) throw Error(file + ": model: vocab: expected an object");
  std::vector<std::string> tokens(vocab.size());
  for (const auto& [token, id] : vocab.items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<size_t>() >= tokens.size() ||
        !tokens[id.get<size_t>()].empty())
      throw Error(file + ": model: vocab: " + Json(token).dump() + ": expected ids 0..N-1, each once");
    tokens[id.get<size_t>()] = token;
  }
  return WordPieceTokenizer(Vocabulary::from_tokens(std::move(tokens)), lowercase);
}

std::shared_ptr<const Tokenizer> read_tokenizer_json(const std::string& path) {
  const std::string file = json_file(path);
  const Json json = parse_tokenizer_json(file);
  const std::string type = model_type(json);
  if (type == "BPE") return std::make_shared<BpeTokenizer>(json, file);
  if (type == "WordPiece") return std::make_shared<WordPieceAdapter>(read_wordpiece_json(file));
  throw Error(file + ": model type '" + type + "' is not one mpt reads (BPE, WordPiece)");
}

std::shared_ptr<const Tokenizer> text_tokenizer(const DataConfig& config) {
  if (!config.tokenizer.empty()) return read_tokenizer_json(config.tokenizer);
  return std::make_shared<WordPieceAdapter>(WordPieceTokenizer(Vocabulary::load(config.vocab), config.lowercase));
}

WordPieceTokenizer wordpiece_tokenizer(const DataConfig& config) {
  if (!config.tokenizer.empty()) return read_wordpiece_json(config.tokenizer);
  return WordPieceTokenizer(Vocabulary::load(config.vocab), config.lowercase);
}

}  // namespace mpt::data
