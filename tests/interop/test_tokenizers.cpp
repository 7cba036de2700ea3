// mpt's WordPiece against the real tokenizers library: BertWordPieceTokenizer on bert-base-uncased's vocabulary
// gives the same ids for every line of the shipped corpus and for hard cases (line and paragraph separators,
// recent emoji and CJK, accents, control characters, invalid-looking spacing).
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "data/wordpiece.h"
#include "tests/support/helpers.h"

using namespace mpt;
using testing::source_path;

TEST_CASE("WordPiece gives tokenizers' ids over the whole corpus and the hard cases", "[slow][interop][data]") {
  if (const std::string missing = testing::python_missing("tokenizers"); !missing.empty()) MPT_SKIP(missing);
  const std::string vocab = source_path("data/bert-base-uncased/vocab.txt");
  const std::string corpus = source_path("data/corpus/fortunes");
  REQUIRE(std::filesystem::is_directory(corpus));  // scripts/setup.sh makes it
  const data::WordPieceTokenizer tokenizer(data::Vocabulary::load(vocab), /*lowercase=*/true);

  std::vector<std::string> texts = {
      "line\u2028separator and paragraph\u2029separator",
      "emoji of Unicode 15: \U0001FAE8 \U0001FA77 and 14: \U0001FAE0 \U0001F9CC, flags \U0001F1EB\U0001F1F7",
      "CJK: \u4E2D\u6587\u5B57 ext B \U00020000 ext G \U00030000 ext I \U0002EBF0 and kana \u3072\u3089\u304C\u306A",
      "accents: Ca\u0301fe\u0301 \u00C7a va? na\u00EFve \u00C5ngstr\u00F6m \u1E9E \u0130stanbul \u00DF",
      "controls: a\u0001b\u0007c\td\re\u000Bf\u000Cg\u0085h\u00ADi \u200Bzero\u200Dwidth\uFEFFbom",
      "punctuation: \u00BFqu\u00E9? \u2014dash\u2013 \u201Cquotes\u201D \u00AB\u00BB $5.00 100% a_b ~x^y`",
      "spaces:\u00A0nbsp\u2003em\u3000ideographic\u202Fnarrow  double",
      "Greek \u039A\u03B1\u03BB\u03B7\u03BC\u03AD\u03C1\u03B1, Cyrillic \u041F\u0440\u0438\u0432\u0435\u0442, Hebrew "
      "\u05E9\u05DC\u05D5\u05DD, Arabic \u0645\u0631\u062D\u0628\u0627, Devanagari "
      "\u0928\u092E\u0938\u094D\u0924\u0947",
      "unbelievably-long-hyphenated_words and aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
      "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
  };
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(corpus)) files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  for (const auto& file : files)
    data::for_each_utf8_line(file.string(), [&](std::string& line, int64_t) {
      if (!line.empty()) texts.push_back(line);
    });
  INFO(texts.size() << " texts");
  REQUIRE(texts.size() > 10000);

  nlohmann::json cases = nlohmann::json::array();
  for (const auto& text : texts) {
    const std::vector<int32_t> ids = tokenizer.encode(text);
    cases.push_back({{"text", text}, {"ids", ids}});
  }
  const std::string path = testing::scratch_dir("tokenizers") + "/cases.json";
  std::ofstream(path) << cases.dump(-1, ' ', false, nlohmann::json::error_handler_t::strict);
  const testing::CommandResult result =
      testing::run_python(source_path("tests/interop/hf_reference.py") + " wordpiece " + vocab + " " + path);
  INFO(result.output);
  CHECK(result.exit_code == 0);
}
