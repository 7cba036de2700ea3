// The text stages of a Hugging Face tokenizer.json before its model: normalizers (Unicode normal forms, replace,
// prepend) and pre-tokenizers (a regex or string split with its delimiter behaviour, digits, GPT-2's byte-level
// split and byte-to-character mapping), each built from its JSON object as the tokenizers library defines it.
// Regexes run on ICU with \s and \S read as Unicode White_Space, which is what the library's Oniguruma matches.
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <string>
#include <vector>

namespace mpt::data {

using Pieces = std::vector<std::string>;  // UTF-8 pieces of one text, in order

// A normalizer: the text rewritten. A pre-tokenizer: one piece split into smaller ones (and rewritten).
using Normalizer = std::function<std::string(std::string)>;
using PreTokenizer = std::function<void(const std::string& piece, Pieces& out)>;

// From tokenizer.json's "normalizer" / "pre_tokenizer" object (null: none). An unsupported type or a malformed field
// is an error naming `where` ("FILE: pre_tokenizer") and what was expected.
Normalizer make_normalizer(const nlohmann::json& spec, const std::string& where);
PreTokenizer make_pre_tokenizer(const nlohmann::json& spec, const std::string& where);

// GPT-2's reversible map of the 256 byte values to printable characters (UTF-8): the byte-level alphabet.
const std::vector<std::string>& byte_level_alphabet();

}  // namespace mpt::data
