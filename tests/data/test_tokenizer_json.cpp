// The tokenizer.json reader on files written here: the merge order, byte fallback and added tokens it must get
// right, and the refusals that name the file and component. Its oracle test against the tokenizers library (every
// corpus line, five schemes) is in tests/interop/test_llama_interop.cpp.
#include <catch2/catch.hpp>

#include <fstream>

#include "common/error.h"
#include "data/tokenizer.h"
#include "tests/support/helpers.h"

using namespace mpt;

namespace {

std::string write_json(const std::string& text) {
  const std::string path = testing::scratch_dir("tokenizer_json") + "/tokenizer.json";
  std::ofstream(path) << text;
  return path;
}

// A BPE over single letters: "a b" ranks before "b c", so "abc" is "ab c"; "<0x..>" tokens for bytes it lacks.
std::string bpe(const std::string& pre_tokenizer, const std::string& added = "[]") {
  return R"({"added_tokens": )" + added + R"(, "pre_tokenizer": )" + pre_tokenizer +
         R"(, "model": {"type": "BPE", "byte_fallback": true, "vocab": {"a": 0, "b": 1, "c": 2, "ab": 3, "bc": 4,
         " ": 5, "<0xC3>": 6, "<0xA9>": 7, "<eot>": 8}, "merges": ["a b", ["b", "c"]]}})";
}

}  // namespace

TEST_CASE("tokenizer.json BPE: lowest rank first, byte fallback, special tokens found in the text", "[fast][data]") {
  const auto tokenizer =
      data::read_tokenizer_json(write_json(bpe("null", R"([{"id": 8, "content": "<eot>", "special": true}])")));
  CHECK(tokenizer->encode("abc") == std::vector<int32_t>{3, 2});
  CHECK(tokenizer->encode("bca") == std::vector<int32_t>{4, 0});
  CHECK(tokenizer->encode("\xC3\xA9") == std::vector<int32_t>{6, 7});  // é as its two bytes
  CHECK(tokenizer->encode("ab<eot>c") == std::vector<int32_t>{3, 8, 2});
  CHECK(tokenizer->size() == 9);
  CHECK(tokenizer->find("<eot>") == 8);
  CHECK(data::end_of_text_id(*tokenizer, "<eot>") == 8);
  CHECK_THROWS_WITH(data::end_of_text_id(*tokenizer, ""), Catch::Contains("data.eot_token"));
}

TEST_CASE("tokenizer.json refusals name the file and the component, and a runaway regex stops", "[fast][data]") {
  CHECK_THROWS_WITH(data::read_tokenizer_json(write_json(bpe(R"({"type": "Metaspace"})"))),
                    Catch::Contains("tokenizer.json: pre_tokenizer: pre-tokenizer type 'Metaspace'"));
  CHECK_THROWS_WITH(data::read_tokenizer_json(write_json(R"({"model": {"type": "Unigram", "vocab": []}})")),
                    Catch::Contains("model type 'Unigram'"));
  CHECK_THROWS_WITH(
      data::read_tokenizer_json(write_json(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a z"]}})")),
      Catch::Contains("merges[0]: \"z\" is not in vocab"));
  CHECK_THROWS_WITH(data::read_tokenizer_json(write_json("[1, 2")), Catch::Contains("not JSON"));
  const auto runaway = data::read_tokenizer_json(
      write_json(bpe(R"({"type": "Split", "pattern": {"Regex": "(a|a)*b"}, "behavior": "Isolated"})")));
  CHECK_THROWS_WITH(runaway->encode(std::string(60, 'a')), Catch::Contains("backtracks"));
}
