// Normalizers and pre-tokenizers of tokenizer.json (see text_splitting.h), following the tokenizers library's
// definitions: a split marks every delimiter span of a piece, then the behaviour decides where each goes.
#include "data/text_splitting.h"

#include <unicode/normalizer2.h>
#include <unicode/regex.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>

#include <algorithm>
#include <memory>
#include <utility>

#include "common/error.h"

namespace mpt::data {
namespace {

using Json = nlohmann::json;

// Spans of a piece in UTF-16 units: [begin, end) and whether it is a delimiter, covering the piece in order.
struct Span {
  int32_t begin, end;
  bool delimiter;
};

enum class Behavior { kIsolated, kRemoved, kMergedWithPrevious, kMergedWithNext, kContiguous };

Behavior behavior_of(const Json& spec, const std::string& where) {
  static const std::pair<const char*, Behavior> names[] = {{"Isolated", Behavior::kIsolated},
                                                           {"Removed", Behavior::kRemoved},
                                                           {"MergedWithPrevious", Behavior::kMergedWithPrevious},
                                                           {"MergedWithNext", Behavior::kMergedWithNext},
                                                           {"Contiguous", Behavior::kContiguous}};
  const std::string name = spec.value("behavior", std::string("Isolated"));
  for (const auto& [text, behavior] : names)
    if (name == text) return behavior;
  throw Error(where + ": behavior '" + name +
              "': expected Isolated, Removed, MergedWithPrevious, MergedWithNext or Contiguous");
}

// The tokenizers library's delimiter behaviours over the spans (its NormalizedString::split), then the pieces.
void emit(const icu::UnicodeString& text, std::vector<Span> spans, Behavior behavior, Pieces& out) {
  std::vector<std::pair<int32_t, int32_t>> kept;
  bool previous = false;
  if (behavior == Behavior::kMergedWithNext) {
    for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
      if (it->delimiter && !previous && !kept.empty())
        kept.back().first = it->begin;
      else
        kept.emplace_back(it->begin, it->end);
      previous = it->delimiter;
    }
    std::reverse(kept.begin(), kept.end());
  } else {
    for (const Span& span : spans) {
      const bool merge = (behavior == Behavior::kContiguous && span.delimiter == previous) ||
                         (behavior == Behavior::kMergedWithPrevious && span.delimiter && !previous);
      if (behavior == Behavior::kRemoved && span.delimiter) {
        previous = true;
        continue;
      }
      if (merge && !kept.empty())
        kept.back().second = span.end;
      else
        kept.emplace_back(span.begin, span.end);
      previous = span.delimiter;
    }
  }
  for (const auto& [begin, end] : kept) {
    if (begin == end) continue;
    std::string piece;
    text.tempSubStringBetween(begin, end).toUTF8String(piece);
    out.push_back(std::move(piece));
  }
}

// Delimiter spans from match positions, the gaps between them as the other spans.
std::vector<Span> spans_from(const std::vector<std::pair<int32_t, int32_t>>& matches, int32_t length, bool invert) {
  std::vector<Span> spans;
  int32_t previous = 0;
  for (const auto& [begin, end] : matches) {
    if (previous != begin) spans.push_back({previous, begin, invert});
    spans.push_back({begin, end, !invert});
    previous = end;
  }
  if (previous != length) spans.push_back({previous, length, invert});
  return spans;
}

// Oniguruma's Unicode classes in ICU's syntax: \s and \S are White_Space, \w is letters, marks, decimal digits and
// connector punctuation (ICU's own \s leaves out U+000B and U+0085, its \w adds other alphabetics).
std::string as_icu_pattern(const std::string& pattern) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] != '\\' || i + 1 == pattern.size()) {
      out += pattern[i];
      continue;
    }
    const char next = pattern[++i];
    if (next == 's')
      out += "\\p{White_Space}";
    else if (next == 'S')
      out += "\\P{White_Space}";
    else if (next == 'w')
      out += "[\\p{L}\\p{M}\\p{Nd}\\p{Pc}]";
    else if (next == 'W')
      out += "[^\\p{L}\\p{M}\\p{Nd}\\p{Pc}]";
    else
      out += {'\\', next};
  }
  return out;
}

// A compiled pattern shared by the pre-tokenizer's copies; each call makes its own matcher.
std::shared_ptr<const icu::RegexPattern> compile(const std::string& pattern, bool literal, const std::string& where) {
  UErrorCode status = U_ZERO_ERROR;
  UParseError parse{};
  const icu::UnicodeString source = icu::UnicodeString::fromUTF8(literal ? pattern : as_icu_pattern(pattern));
  std::shared_ptr<const icu::RegexPattern> compiled(
      icu::RegexPattern::compile(source, literal ? UREGEX_LITERAL : 0, parse, status));
  if (U_FAILURE(status) || !compiled)
    throw Error(where + ": pattern " + nlohmann::json(pattern).dump() + " is not a regex mpt reads (" +
                u_errorName(status) + " at offset " + std::to_string(parse.offset) + ")");
  return compiled;
}

// ICU's work limit for one match (its time units, about a millisecond each): a file's own regex that backtracks
// without end is refused instead of hanging the run.
constexpr int32_t kRegexTimeLimit = 1000;

PreTokenizer regex_split(std::shared_ptr<const icu::RegexPattern> pattern, Behavior behavior, bool invert,
                         const std::string& where) {
  return [pattern, behavior, invert, where](const std::string& piece, Pieces& out) {
    const icu::UnicodeString text = icu::UnicodeString::fromUTF8(piece);
    UErrorCode status = U_ZERO_ERROR;
    std::unique_ptr<icu::RegexMatcher> matcher(pattern->matcher(text, status));
    MPT_CHECK(U_SUCCESS(status), "ICU could not make a regex matcher");
    matcher->setTimeLimit(kRegexTimeLimit, status);
    std::vector<std::pair<int32_t, int32_t>> matches;
    while (matcher->find(status) && U_SUCCESS(status))
      matches.emplace_back(matcher->start(status), matcher->end(status));
    if (U_FAILURE(status))
      throw Error(where + ": the pattern failed on a piece of " + std::to_string(piece.size()) + " bytes (" +
                  u_errorName(status) + "): a regex that backtracks without end?");
    emit(text, spans_from(matches, text.length(), invert), behavior, out);
  };
}

// Each character for which `is_delimiter` holds is a delimiter span of its own.
PreTokenizer char_split(bool (*is_delimiter)(UChar32), Behavior behavior) {
  return [is_delimiter, behavior](const std::string& piece, Pieces& out) {
    const icu::UnicodeString text = icu::UnicodeString::fromUTF8(piece);
    std::vector<std::pair<int32_t, int32_t>> matches;
    for (int32_t i = 0; i < text.length(); i = text.moveIndex32(i, 1))
      if (is_delimiter(text.char32At(i))) matches.emplace_back(i, text.moveIndex32(i, 1));
    emit(text, spans_from(matches, text.length(), false), behavior, out);
  };
}

bool is_numeric(UChar32 c) {
  const int8_t type = u_charType(c);
  return type == U_DECIMAL_DIGIT_NUMBER || type == U_LETTER_NUMBER || type == U_OTHER_NUMBER;
}

bool is_white_space(UChar32 c) { return u_hasBinaryProperty(c, UCHAR_WHITE_SPACE); }

const char* const kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

bool flag(const Json& spec, const char* key, bool fallback, const std::string& where) {
  if (!spec.contains(key) || spec[key].is_null()) return fallback;
  if (!spec[key].is_boolean()) throw Error(where + ": " + key + ": expected true or false");
  return spec[key].get<bool>();
}

std::string text_field(const Json& spec, const char* key, const std::string& where) {
  if (!spec.contains(key) || !spec[key].is_string()) throw Error(where + ": " + key + ": expected a string");
  return spec[key].get<std::string>();
}

// GPT-2's byte-level stage: an optional leading space, its regex split, then every byte as its printable character.
PreTokenizer byte_level(const Json& spec, const std::string& where) {
  const bool prefix_space = flag(spec, "add_prefix_space", true, where);
  const PreTokenizer split = flag(spec, "use_regex", true, where)
                                 ? regex_split(compile(kGpt2Pattern, false, where), Behavior::kIsolated, false, where)
                                 : PreTokenizer([](const std::string& piece, Pieces& out) { out.push_back(piece); });
  return [prefix_space, split](const std::string& piece, Pieces& out) {
    Pieces parts;
    split(prefix_space && piece.front() != ' ' ? " " + piece : piece, parts);
    const auto& alphabet = byte_level_alphabet();
    for (const std::string& part : parts) {
      std::string mapped;
      for (const unsigned char byte : part) mapped += alphabet[byte];
      out.push_back(std::move(mapped));
    }
  };
}

PreTokenizer split_pre_tokenizer(const Json& spec, const std::string& where) {
  if (!spec.contains("pattern") || !spec["pattern"].is_object())
    throw Error(where + ": pattern: expected {\"Regex\": ...} or {\"String\": ...}");
  const Json& pattern = spec["pattern"];
  const bool literal = pattern.contains("String");
  const std::string text = text_field(pattern, literal ? "String" : "Regex", where + ": pattern");
  if (literal && text.empty()) return [](const std::string& piece, Pieces& out) { out.push_back(piece); };
  return regex_split(compile(text, literal, where), behavior_of(spec, where), flag(spec, "invert", false, where),
                     where);
}

PreTokenizer sequence_of(const Json& steps, const std::string& where) {
  if (!steps.is_array()) throw Error(where + ": pretokenizers: expected a list");
  std::vector<PreTokenizer> parts;
  for (size_t i = 0; i < steps.size(); ++i)
    parts.push_back(make_pre_tokenizer(steps[i], where + "[" + std::to_string(i) + "]"));
  return [parts](const std::string& piece, Pieces& out) {
    Pieces current{piece};
    for (const PreTokenizer& part : parts) {
      Pieces next;
      for (const std::string& p : current) part(p, next);
      current = std::move(next);
    }
    out.insert(out.end(), current.begin(), current.end());
  };
}

Normalizer unicode_form(const icu::Normalizer2* (*instance)(UErrorCode&)) {
  return [instance](std::string text) {
    UErrorCode status = U_ZERO_ERROR;
    const icu::Normalizer2* form = instance(status);
    MPT_CHECK(U_SUCCESS(status), "ICU has no Unicode normalizer");
    const icu::UnicodeString normal = form->normalize(icu::UnicodeString::fromUTF8(text), status);
    MPT_CHECK(U_SUCCESS(status), "ICU normalization failed");
    std::string out;
    return normal.toUTF8String(out);
  };
}

Normalizer replace(const Json& spec, const std::string& where) {
  if (!spec.contains("pattern") || !spec["pattern"].contains("String"))
    throw Error(where + ": Replace: mpt reads a {\"String\": ...} pattern only");
  const std::string from = text_field(spec["pattern"], "String", where), to = text_field(spec, "content", where);
  if (from.empty()) throw Error(where + ": Replace: an empty pattern");
  return [from, to](std::string text) {
    std::string out;
    for (size_t at = 0;;) {
      const size_t found = text.find(from, at);
      out.append(text, at, found == std::string::npos ? std::string::npos : found - at);
      if (found == std::string::npos) return out;
      out += to;
      at = found + from.size();
    }
  };
}

}  // namespace

const std::vector<std::string>& byte_level_alphabet() {
  static const std::vector<std::string> alphabet = [] {
    std::vector<std::string> map(256);
    int shifted = 0;
    for (int byte = 0; byte < 256; ++byte) {
      const bool printable = (byte >= '!' && byte <= '~') || (byte >= 0xA1 && byte <= 0xAC) || byte >= 0xAE;
      const auto code = static_cast<UChar32>(printable ? byte : 256 + shifted++);
      icu::UnicodeString(code).toUTF8String(map[static_cast<size_t>(byte)]);
    }
    return map;
  }();
  return alphabet;
}

PreTokenizer make_pre_tokenizer(const Json& spec, const std::string& where) {
  if (spec.is_null()) return [](const std::string& piece, Pieces& out) { out.push_back(piece); };
  if (!spec.is_object() || !spec.contains("type") || !spec["type"].is_string())
    throw Error(where + ": expected an object with a \"type\"");
  const std::string type = spec["type"].get<std::string>();
  if (type == "ByteLevel") return byte_level(spec, where);
  if (type == "Split") return split_pre_tokenizer(spec, where);
  if (type == "Sequence") return sequence_of(spec.value("pretokenizers", Json()), where);
  if (type == "Digits")
    return char_split(is_numeric,
                      flag(spec, "individual_digits", false, where) ? Behavior::kIsolated : Behavior::kContiguous);
  if (type == "WhitespaceSplit") return char_split(is_white_space, Behavior::kRemoved);
  if (type == "Whitespace")  // the gaps between words and punctuation runs, removed
    return regex_split(compile(R"(\w+|[^\w\s]+)", false, where), Behavior::kRemoved, /*invert=*/true, where);
  throw Error(where + ": pre-tokenizer type '" + type +
              "' is not one mpt reads (ByteLevel, Split, Sequence, Digits, Whitespace, WhitespaceSplit)");
}

Normalizer make_normalizer(const Json& spec, const std::string& where) {
  if (spec.is_null()) return [](std::string text) { return text; };
  if (!spec.is_object() || !spec.contains("type") || !spec["type"].is_string())
    throw Error(where + ": expected an object with a \"type\"");
  const std::string type = spec["type"].get<std::string>();
  if (type == "NFC") return unicode_form(icu::Normalizer2::getNFCInstance);
  if (type == "NFD") return unicode_form(icu::Normalizer2::getNFDInstance);
  if (type == "NFKC") return unicode_form(icu::Normalizer2::getNFKCInstance);
  if (type == "NFKD") return unicode_form(icu::Normalizer2::getNFKDInstance);
  if (type == "Replace") return replace(spec, where);
  if (type == "Prepend") {
    const std::string prefix = text_field(spec, "prepend", where);
    return [prefix](std::string text) { return text.empty() ? text : prefix + text; };
  }
  if (type == "Sequence") {
    const Json& steps = spec.value("normalizers", Json());
    if (!steps.is_array()) throw Error(where + ": normalizers: expected a list");
    std::vector<Normalizer> parts;
    for (size_t i = 0; i < steps.size(); ++i)
      parts.push_back(make_normalizer(steps[i], where + "[" + std::to_string(i) + "]"));
    return [parts](std::string text) {
      for (const Normalizer& part : parts) text = part(std::move(text));
      return text;
    };
  }
  throw Error(where + ": normalizer type '" + type +
              "' is not one mpt reads (NFC, NFD, NFKC, NFKD, Replace, Prepend, Sequence)");
}

}  // namespace mpt::data
