// WordPiece tokenizer. Unicode categories, case mapping and NFD come from ICU, the library Python's unicodedata
// tables agree with for everything bert-base-uncased's vocabulary can express.
#include "data/wordpiece.h"

#include <unicode/uchar.h>
#include <unicode/unorm2.h>
#include <unicode/ustring.h>
#include <unicode/utf8.h>

#include <fstream>

#include "common/error.h"
#include "common/files.h"

namespace mpt::data {
namespace {

constexpr size_t kMaxWordChars = 100;  // BERT's max_input_chars_per_word

// As Hugging Face tokenizers' BertNormalizer, the implementation users run: Unicode's White_Space property (so
// the line and paragraph separators U+2028/U+2029 split words, where Google's Python BERT took only Zs) ...
bool is_whitespace(UChar32 c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || u_isUWhiteSpace(c); }

// ... and Cc, Cf and Co removed; an unassigned code point (to this ICU: a character of a newer Unicode) stays,
// and becomes [UNK].
bool is_control(UChar32 c) {
  if (c == '\t' || c == '\n' || c == '\r') return false;
  switch (u_charType(c)) {
    case U_CONTROL_CHAR:
    case U_FORMAT_CHAR:
    case U_PRIVATE_USE_CHAR:
    case U_SURROGATE: return true;
    default: return false;
  }
}

bool is_punctuation(UChar32 c) {
  // BERT counts every non-alphanumeric ASCII symbol ("$", "^", "`") as punctuation, plus Unicode's P*.
  if ((c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126)) return true;
  switch (u_charType(c)) {
    case U_DASH_PUNCTUATION:
    case U_START_PUNCTUATION:
    case U_END_PUNCTUATION:
    case U_CONNECTOR_PUNCTUATION:
    case U_OTHER_PUNCTUATION:
    case U_INITIAL_PUNCTUATION:
    case U_FINAL_PUNCTUATION: return true;
    default: return false;
  }
}

bool is_cjk(UChar32 c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
         (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B820 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

void append_utf8(std::string& out, UChar32 c) {
  char buffer[U8_MAX_LENGTH];
  int32_t length = 0;
  UBool error = false;
  U8_APPEND(buffer, length, U8_MAX_LENGTH, c, error);
  if (!error) out.append(buffer, static_cast<size_t>(length));
}

// Lower-case (full case mapping, as Python's str.lower) and strip accents: NFD, then drop non-spacing marks.
std::vector<UChar32> lower_and_strip_accents(const std::vector<UChar32>& word) {
  std::u16string utf16;
  for (UChar32 c : word) {
    if (c <= 0xFFFF) {
      utf16.push_back(static_cast<char16_t>(c));
    } else {
      utf16.push_back(static_cast<char16_t>(U16_LEAD(c)));
      utf16.push_back(static_cast<char16_t>(U16_TRAIL(c)));
    }
  }
  UErrorCode status = U_ZERO_ERROR;
  std::u16string lowered(utf16.size() * 3 + 4, u'\0');
  const int32_t lowered_length = u_strToLower(lowered.data(), static_cast<int32_t>(lowered.size()), utf16.data(),
                                              static_cast<int32_t>(utf16.size()), "", &status);
  MPT_CHECK(U_SUCCESS(status), "ICU u_strToLower failed");
  lowered.resize(static_cast<size_t>(lowered_length));
  const UNormalizer2* nfd = unorm2_getNFDInstance(&status);
  std::u16string decomposed(lowered.size() * 4 + 4, u'\0');
  const int32_t decomposed_length =
      unorm2_normalize(nfd, lowered.data(), static_cast<int32_t>(lowered.size()), decomposed.data(),
                       static_cast<int32_t>(decomposed.size()), &status);
  MPT_CHECK(U_SUCCESS(status), "ICU NFD normalisation failed");
  std::vector<UChar32> out;
  for (int32_t i = 0; i < decomposed_length;) {
    UChar32 c;
    U16_NEXT(decomposed.data(), i, decomposed_length, c);
    if (u_charType(c) != U_NON_SPACING_MARK) out.push_back(c);
  }
  return out;
}

}  // namespace

int64_t first_invalid_utf8(std::string_view bytes) {
  const auto* data = reinterpret_cast<const uint8_t*>(bytes.data());
  const int32_t length = static_cast<int32_t>(bytes.size());
  for (int32_t i = 0; i < length;) {
    const int32_t start = i;
    UChar32 c;
    U8_NEXT(data, i, length, c);
    if (c < 0) return start;
  }
  return -1;
}

void for_each_utf8_line(std::istream& in, const std::string& name,
                        const std::function<void(std::string& line, int64_t number)>& on_line) {
  std::streambuf& bytes = *in.rdbuf();
  std::string line;
  int64_t offset = 0;  // of the line's first byte in the input
  for (int64_t number = 1;; ++number) {
    line.clear();
    int c;
    while ((c = bytes.sbumpc()) != std::char_traits<char>::eof() && c != '\n') {
      if (c == 0)  // refused at once: /dev/zero holds no line break for the length bound to find
        throw Error(name + ": byte offset " + std::to_string(offset + static_cast<int64_t>(line.size())) + " (line " +
                    std::to_string(number) + "): a NUL byte: binary data, not UTF-8 text");
      if (line.size() == kMaxLineBytes)
        throw Error(name + ": line " + std::to_string(number) + " (from byte offset " + std::to_string(offset) +
                    ") is longer than " + std::to_string(kMaxLineBytes) +
                    " bytes; expected text with a line break at least every 1 MiB");
      line.push_back(static_cast<char>(c));
    }
    const bool last = c == std::char_traits<char>::eof();
    if (last && line.empty()) return;
    if (number == 1 && line.rfind("\xEF\xBB\xBF", 0) == 0) {  // a byte-order mark, as Windows editors write
      line.erase(0, 3);
      offset = 3;
    }
    if (const int64_t bad = first_invalid_utf8(line); bad >= 0)
      throw Error(name + ": byte offset " + std::to_string(offset + bad) + " (line " + std::to_string(number) +
                  "): invalid UTF-8; expected UTF-8 text");
    offset += static_cast<int64_t>(line.size()) + 1;
    on_line(line, number);
    if (last) return;
  }
}

void for_each_utf8_line(const std::string& path,
                        const std::function<void(std::string& line, int64_t number)>& on_line) {
  require_regular_file(path);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot open");
  for_each_utf8_line(in, path, on_line);
}

Vocabulary Vocabulary::from_tokens(std::vector<std::string> tokens) {
  Vocabulary vocab;
  vocab.tokens_ = std::move(tokens);
  for (size_t i = 0; i < vocab.tokens_.size(); ++i) vocab.ids_.emplace(vocab.tokens_[i], static_cast<int64_t>(i));
  return vocab;
}

Vocabulary Vocabulary::load(const std::string& path) {
  require_regular_file(path);
  if (!std::ifstream(path))
    throw Error(path + ": cannot open the WordPiece vocabulary (scripts/setup.sh provides bert-base-uncased's)");
  Vocabulary vocab;
  vocab.source_ = path;
  for_each_utf8_line(path, [&](std::string& line, int64_t number) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) throw Error(path + ":" + std::to_string(number) + ": empty line; expected one token per line");
    if (!vocab.ids_.emplace(line, number - 1).second)
      throw Error(path + ":" + std::to_string(number) + ": token '" + line + "' repeats line " +
                  std::to_string(vocab.ids_.at(line) + 1));
    vocab.tokens_.push_back(line);
  });
  if (vocab.tokens_.empty()) throw Error(path + ": empty vocabulary; expected one token per line");
  return vocab;
}

int64_t Vocabulary::find(const std::string& token) const {
  auto it = ids_.find(token);
  return it == ids_.end() ? -1 : it->second;
}

int64_t Vocabulary::id(const std::string& token) const {
  const int64_t found = find(token);
  if (found < 0) throw Error((source_.empty() ? std::string("vocabulary") : source_) + ": has no " + token + " token");
  return found;
}

WordPieceTokenizer::WordPieceTokenizer(Vocabulary vocab, bool lowercase)
    : vocab_(std::move(vocab)), lowercase_(lowercase), unk_id_(static_cast<int32_t>(vocab_.id("[UNK]"))) {}

std::vector<std::string> WordPieceTokenizer::basic_words(std::string_view text) const {
  std::vector<std::string> words;
  std::vector<UChar32> word;
  auto flush = [&] {
    if (word.empty()) return;
    bool ascii = true;
    for (UChar32 c : word) ascii = ascii && c < 0x80;
    std::vector<UChar32> normal;
    if (!lowercase_) {
      normal = word;
    } else if (ascii) {  // the common case needs no ICU round trip
      normal = word;
      for (UChar32& c : normal)
        if (c >= 'A' && c <= 'Z') c += 'a' - 'A';
    } else {
      normal = lower_and_strip_accents(word);
    }
    std::string piece;
    for (UChar32 c : normal) {
      if (is_punctuation(c)) {
        if (!piece.empty()) words.push_back(std::move(piece)), piece.clear();
        append_utf8(piece, c);
        words.push_back(std::move(piece)), piece.clear();
      } else {
        append_utf8(piece, c);
      }
    }
    if (!piece.empty()) words.push_back(std::move(piece));
    word.clear();
  };

  const auto* data = reinterpret_cast<const uint8_t*>(text.data());
  const int32_t length = static_cast<int32_t>(text.size());
  for (int32_t i = 0; i < length;) {
    UChar32 c;
    U8_NEXT(data, i, length, c);
    if (c <= 0 || c == 0xFFFD || is_control(c)) continue;  // c < 0: an invalid byte sequence
    if (is_whitespace(c)) {
      flush();
    } else if (is_cjk(c)) {
      flush();
      word.push_back(c);
      flush();
    } else {
      word.push_back(c);
    }
  }
  flush();
  return words;
}

void WordPieceTokenizer::word_pieces(const std::string& word, std::vector<int32_t>& out) const {
  int32_t chars = 0;
  for (unsigned char byte : word) chars += (byte & 0xC0) != 0x80;
  if (static_cast<size_t>(chars) > kMaxWordChars) {
    out.push_back(unk_id_);
    return;
  }
  const size_t mark = out.size();
  std::string candidate;
  for (size_t start = 0; start < word.size();) {
    int64_t match = -1;
    size_t end = word.size();
    for (; end > start; --end) {
      if (end < word.size() && (static_cast<unsigned char>(word[end]) & 0xC0) == 0x80) continue;  // mid-character
      candidate.assign(start > 0 ? "##" : "");
      candidate.append(word, start, end - start);
      if ((match = vocab_.find(candidate)) >= 0) break;
    }
    if (match < 0) {  // no piece fits: the whole word is unknown
      out.resize(mark);
      out.push_back(unk_id_);
      return;
    }
    out.push_back(static_cast<int32_t>(match));
    start = end;
  }
}

std::vector<int32_t> WordPieceTokenizer::encode(std::string_view text) const {
  std::vector<int32_t> ids;
  for (const std::string& word : basic_words(text)) word_pieces(word, ids);
  return ids;
}

std::vector<std::string> WordPieceTokenizer::tokenize(std::string_view text) const {
  std::vector<std::string> tokens;
  for (int32_t id : encode(text)) tokens.push_back(vocab_.token(id));
  return tokens;
}

}  // namespace mpt::data
