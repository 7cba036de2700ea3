// Causal-LM corpus -> windows of next-token training: documents from text or JSONL files, tokenized, each closed
// by the end-of-text token, concatenated and cut into windows of seq_len + 1 tokens that overlap by one (a window's
// inputs are its first seq_len tokens, its targets the last seq_len).
#include <filesystem>
#include <memory>

#include "common/error.h"
#include "common/json.h"
#include "data/dataset.h"
#include "data/held_out.h"
#include "data/last_made.h"
#include "data/tokenizer.h"

namespace mpt::data {
namespace {

struct PackedDocuments {
  torch::Tensor windows;  // int32 (N, S + 1)
  int64_t eot_id = -1;
};

bool is_jsonl(const std::string& file) { return std::filesystem::path(file).extension() == ".jsonl"; }

// Calls on_document(text) for each document of a .txt file: lines joined by '\n', up to a line that is
// data.document_delimiter (an empty line when that is empty).
void read_text_documents(const std::string& file, const std::string& delimiter,
                         const std::function<void(const std::string&)>& on_document) {
  std::string document;
  bool open = false;
  for_each_utf8_line(file, [&](std::string& line, int64_t) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line == delimiter) {
      if (open) on_document(document);
      document.clear();
      open = false;
      return;
    }
    document += (open ? "\n" : "") + line;
    open = true;
  });
  if (open) on_document(document);
}

// One document per line of a .jsonl file: the string under data.text_field.
void read_jsonl_documents(const std::string& file, const std::string& field,
                          const std::function<void(const std::string&)>& on_document) {
  for_each_utf8_line(file, [&](std::string& line, int64_t number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) return;
    std::string problem;
    const nlohmann::json record = parse_json(line, &problem);
    const std::string at = file + ":" + std::to_string(number);
    if (record.is_discarded()) throw Error(at + ": not JSON (" + problem + ")");
    if (!record.is_object() || !record.contains(field) || !record[field].is_string())
      throw Error(at + ": expected an object with a string \"" + field + "\" (data.text_field)");
    on_document(record[field].get<std::string>());
  });
}

PackedDocuments pack_documents(const DataConfig& config) {
  const auto tokenizer = text_tokenizer(config);
  PackedDocuments packed;
  packed.eot_id = end_of_text_id(*tokenizer, config.eot_token);
  std::vector<int32_t> ids;
  const auto add = [&](const std::string& document) {
    if (document.empty()) return;
    const std::vector<int32_t> encoded = tokenizer->encode(document);
    ids.insert(ids.end(), encoded.begin(), encoded.end());
    ids.push_back(static_cast<int32_t>(packed.eot_id));
  };
  for (const std::string& file : corpus_files(config.root, {".txt", ".jsonl"})) {
    if (is_jsonl(file))
      read_jsonl_documents(file, config.text_field, add);
    else
      read_text_documents(file, config.document_delimiter, add);
  }
  const int64_t s = config.seq_len, count = (static_cast<int64_t>(ids.size()) - 1) / s;
  if (count < 2)
    throw Error(config.root + ": the corpus holds " + std::to_string(ids.size()) +
                " tokens, fewer than two windows of " + std::to_string(s) +
                " (data.seq_len); use more text or a shorter data.seq_len");
  const torch::Tensor all = torch::from_blob(ids.data(), {static_cast<int64_t>(ids.size())}, torch::kInt);
  packed.windows = all.narrow(0, 0, count * s + 1).unfold(0, s + 1, s).clone();  // (N, S + 1)
  return packed;
}

// Train and test come from one tokenization pass: the last corpus packed is kept for the other split.
std::shared_ptr<const PackedDocuments> packed_documents(const DataConfig& config) {
  const std::string key = config.root + '\n' + config.tokenizer + '\n' + config.vocab + '\n' +
                          std::to_string(config.lowercase) + '\n' + std::to_string(config.seq_len) + '\n' +
                          config.text_field + '\n' + config.document_delimiter + '\n' + config.eot_token;
  return last_made<PackedDocuments>(key, [&] { return pack_documents(config); });
}

}  // namespace

int64_t end_of_text_id(const Tokenizer& tokenizer, const std::string& token) {
  if (!token.empty()) {
    const int64_t id = tokenizer.find(token);
    if (id < 0) throw Error(tokenizer.source() + ": no token " + token + " (data.eot_token)");
    return id;
  }
  for (const char* name : {"<|endoftext|>", "<|end_of_text|>", "</s>", "<eos>", "[SEP]"})
    if (const int64_t id = tokenizer.find(name); id >= 0) return id;
  throw Error(tokenizer.source() +
              ": none of the end-of-text tokens mpt knows (<|endoftext|>, <|end_of_text|>, </s>, <eos>, [SEP]); name "
              "the one that ends a document in data.eot_token");
}

Dataset load_causal_lm(const DataConfig& config, const std::string& split, int64_t limit) {
  const auto packed = packed_documents(config);
  Dataset dataset;
  dataset.tokens = split_rows(packed->windows, config, split, limit, "windows");
  dataset.causal_lm = CausalLmConfig{packed->eot_id};
  return dataset;
}

}  // namespace mpt::data
