// A Hugging Face tokenizer.json as data.tokenizer reads it (every component, merges, added tokens, the user's own
// regexes under a work limit), then text through it; and arbitrary text through a fixed byte-level BPE.
#include "data/tokenizer.h"
#include "fuzz/harness.h"

namespace {

// A byte-level BPE with Llama 3's split, digits, a byte fallback and added tokens of every kind.
const char* const kFixed = R"({"model": {"type": "BPE", "byte_fallback": true, "unk_token": "<unk>",
  "vocab": {"<unk>": 0, "<0x41>": 1, "a": 2, "b": 3, "ab": 4, "Ġ": 5, "Ġa": 6, "1": 7, "<|endoftext|>": 8, "x": 9},
  "merges": [["a", "b"], "Ġ a"]},
  "added_tokens": [{"id": 8, "content": "<|endoftext|>", "special": true},
                   {"id": 9, "content": "x", "single_word": true, "lstrip": true, "rstrip": true, "normalized": true}],
  "normalizer": {"type": "Sequence", "normalizers": [{"type": "NFKC"}, {"type": "Prepend", "prepend": "a"}]},
  "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
    {"type": "Split", "pattern": {"Regex": "(?i:'s|'t)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s+(?!\\S)|\\s+"},
     "behavior": "Isolated"},
    {"type": "Digits", "individual_digits": true},
    {"type": "ByteLevel", "add_prefix_space": false, "use_regex": false}]}})";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string fixed_path = [] {
    const std::string path = mpt::fuzz::scratch_path("fixed-tokenizer.json");
    mpt::fuzz::write_bytes(path, reinterpret_cast<const uint8_t*>(kFixed), std::strlen(kFixed));
    return path;
  }();
  static const auto fixed = mpt::data::read_tokenizer_json(fixed_path);
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  if (mpt::data::first_invalid_utf8(text) < 0) (void)fixed->encode(text);  // training refuses invalid UTF-8 first
  const std::string path = mpt::fuzz::scratch_file(data, size, "tokenizer.json");
  mpt::fuzz::refusals_only([&] {
    const auto loaded = mpt::data::read_tokenizer_json(path);
    (void)loaded->encode("The quick brown fox's 123 jumps <|endoftext|>  over\n\tthe lazy dog. \xC3\xA9\xE4\xB8\xAD");
  });
  return 0;
}
