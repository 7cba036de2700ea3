// BERT's tokenizer: a WordPiece vocabulary (vocab.txt) and the two-stage split bert-base-uncased uses, so the
// ids mpt trains on are the ids Hugging Face's BertTokenizer produces for the same text.
//  1. Basic: drop control characters, NUL and U+FFFD; whitespace becomes a space; CJK ideographs stand alone;
//     split on whitespace; lower-case and strip accents (NFD, drop non-spacing marks) when uncased; split
//     punctuation (ASCII symbols and Unicode P*) into single tokens.
//  2. WordPiece: greedy longest-match-first against the vocabulary, continuation pieces prefixed "##"; a word
//     with no split, or longer than 100 characters, becomes [UNK].
#pragma once

#include <cstdint>
#include <functional>
#include <istream>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "data/dataset.h"

namespace mpt::data {

class Vocabulary {
 public:
  // One token per line, id = line index; a missing file, an empty line or a repeated token is an error
  // naming the file and line.
  static Vocabulary load(const std::string& path);
  static Vocabulary from_tokens(std::vector<std::string> tokens);  // for tests and tools

  int64_t size() const { return static_cast<int64_t>(tokens_.size()); }
  const std::string& token(int64_t id) const { return tokens_.at(static_cast<size_t>(id)); }
  int64_t find(const std::string& token) const;  // -1 when absent
  int64_t id(const std::string& token) const;    // a token the model needs ([CLS], [MASK], ...): an error if absent
  const std::string& source() const { return source_; }

 private:
  std::vector<std::string> tokens_;
  std::unordered_map<std::string, int64_t> ids_;
  std::string source_;
};

class WordPieceTokenizer {
 public:
  WordPieceTokenizer(Vocabulary vocab, bool lowercase);

  const Vocabulary& vocab() const { return vocab_; }
  // Token ids of `text` (UTF-8; invalid bytes are dropped like U+FFFD), without [CLS]/[SEP].
  std::vector<int32_t> encode(std::string_view text) const;
  // The same as token strings, for inspection and tests.
  std::vector<std::string> tokenize(std::string_view text) const;

  // Stage 1 alone: the words WordPiece then splits.
  std::vector<std::string> basic_words(std::string_view text) const;

 private:
  void word_pieces(const std::string& word, std::vector<int32_t>& out) const;

  Vocabulary vocab_;
  bool lowercase_;
  int32_t unk_id_;
};

// Masked-LM settings for `vocab`: its [MASK] id, size and the special tokens never chosen.
MaskedLmConfig masked_lm_config(const Vocabulary& vocab, double probability);

// Text files are read a line at a time, and no line may be longer than this: a longer one is binary data or a
// file without line breaks, which would otherwise be held, and tokenized, whole.
inline constexpr size_t kMaxLineBytes = size_t{1} << 20;

// Calls on_line(line, number) for each line of `in` (1-based numbers, the newline removed, a trailing '\r' kept,
// a leading byte-order mark dropped), streaming: memory is bounded by one line. Invalid UTF-8, a NUL byte (binary
// data) or a line over kMaxLineBytes is an error naming `name`, the byte offset and the line.
void for_each_utf8_line(std::istream& in, const std::string& name,
                        const std::function<void(std::string& line, int64_t number)>& on_line);
// The same for the file at `path`; an unreadable file is an error naming it.
void for_each_utf8_line(const std::string& path, const std::function<void(std::string& line, int64_t number)>& on_line);

// The byte offset of the first invalid UTF-8 sequence in `bytes`, or -1 when it is all valid.
int64_t first_invalid_utf8(std::string_view bytes);

}  // namespace mpt::data
