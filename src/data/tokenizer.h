// The tokenizers mpt trains with, behind one interface: BERT's WordPiece (a vocab.txt, or a tokenizer.json whose
// model is WordPiece) and a Hugging Face tokenizer.json with a BPE model (byte-level as GPT-2, Llama 3 and SmolLM
// use it): its added and special tokens, normalizer, pre-tokenizer and merges, so that the ids mpt trains on are the
// ids the tokenizers library gives the same text.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "data/dataset.h"
#include "data/wordpiece.h"

namespace mpt::data {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // Token ids of `text` (valid UTF-8) as the library's encode(text, add_special_tokens=False) gives them: special
  // tokens written in the text are recognised, none are added.
  virtual std::vector<int32_t> encode(std::string_view text) const = 0;
  virtual int64_t size() const = 0;                          // every id is below this
  virtual int64_t find(const std::string& token) const = 0;  // -1 when absent
  virtual std::string token(int64_t id) const = 0;           // "" for an id without a token
  virtual std::string source() const = 0;                    // the file it was read from
};

// A tokenizer.json (or a folder holding one). An unsupported component or a malformed field is an error naming the
// file, the field and what mpt reads.
std::shared_ptr<const Tokenizer> read_tokenizer_json(const std::string& path);

// The WordPiece tokenizer a tokenizer.json describes (BertNormalizer, BertPreTokenizer, WordPiece), for BERT's
// datasets; an error naming the file when it describes another.
WordPieceTokenizer read_wordpiece_json(const std::string& path);

// The text datasets' tokenizer: data.tokenizer when set, else WordPiece from data.vocab with data.lowercase.
std::shared_ptr<const Tokenizer> text_tokenizer(const DataConfig& config);
WordPieceTokenizer wordpiece_tokenizer(const DataConfig& config);

// The id of the token that ends a document: `token` (data.eot_token), or when empty the first of <|endoftext|>,
// <|end_of_text|>, </s>, <eos>, [SEP] the tokenizer has; an error naming the tokenizer's file otherwise.
int64_t end_of_text_id(const Tokenizer& tokenizer, const std::string& token);

}  // namespace mpt::data
