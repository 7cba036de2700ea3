// WordPiece: the algorithm on a hand vocabulary, bert-base-uncased's splits on the real vocabulary
// (scripts/setup.sh provides it), and clear errors for malformed vocabularies.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "data/wordpiece.h"
#include "tests/support/helpers.h"

using namespace mpt::data;
using Tokens = std::vector<std::string>;

namespace {

const std::string kRealVocab = mpt::testing::source_path("data/bert-base-uncased/vocab.txt");

WordPieceTokenizer real_tokenizer() {
  REQUIRE(std::filesystem::exists(kRealVocab));  // scripts/setup.sh (run by scripts/test.sh) provides it
  return WordPieceTokenizer(Vocabulary::load(kRealVocab), /*lowercase=*/true);
}

std::string write_file(const std::string& dir, const std::string& name, const std::string& text) {
  const std::string path = dir + "/" + name;
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

}  // namespace

TEST_CASE("WordPiece splits greedily, longest match first, with ## continuations", "[fast][data]") {
  // The example in the docstring of Google BERT's WordPiece tokenizer.
  WordPieceTokenizer tokenizer(Vocabulary::from_tokens({"[PAD]", "[UNK]", "un", "##aff", "##able", "runn", "##ing", ",",
                                                        "want", "##want", "##ed", "wa"}),
                               /*lowercase=*/true);
  CHECK(tokenizer.tokenize("unaffable") == Tokens{"un", "##aff", "##able"});
  CHECK(tokenizer.tokenize("UNwant\u00E9d,running") == Tokens{"un", "##want", "##ed", ",", "runn", "##ing"});
  CHECK(tokenizer.tokenize("xyz unaffable") == Tokens{"[UNK]", "un", "##aff", "##able"});  // no piece fits
  CHECK(tokenizer.tokenize(std::string(101, 'a')) == Tokens{"[UNK]"});                     // longer than 100 characters
}

TEST_CASE("the basic stage cleans, lower-cases, strips accents and splits punctuation and CJK", "[fast][data]") {
  WordPieceTokenizer tokenizer(Vocabulary::from_tokens({"[UNK]"}), /*lowercase=*/true);
  CHECK(tokenizer.basic_words(" \tHeLLo!how  \n Are yoU?  ") == Tokens{"hello", "!", "how", "are", "you", "?"});
  CHECK(tokenizer.basic_words("H\u00E4ll\u00F3 na\u00EFve") == Tokens{"hallo", "naive"});
  CHECK(tokenizer.basic_words("a\x08"
                              "b\x01 c\u200Bd") == Tokens{"ab", "cd"});  // control and format characters
  CHECK(tokenizer.basic_words("ab\u4E2D\u6587cd") == Tokens{"ab", "\u4E2D", "\u6587", "cd"});
  CHECK(tokenizer.basic_words("$5^2`x") == Tokens{"$", "5", "^", "2", "`", "x"});  // ASCII symbols are punctuation
  CHECK(tokenizer.basic_words("ok\xFF\xFEgo") == Tokens{"okgo"});  // invalid bytes are dropped like U+FFFD
  WordPieceTokenizer cased(Vocabulary::from_tokens({"[UNK]"}), /*lowercase=*/false);
  CHECK(cased.basic_words("H\u00E4llo") == Tokens{"H\u00E4llo"});
}

TEST_CASE("bert-base-uncased's vocabulary gives BERT's documented splits and ids", "[fast][data]") {
  WordPieceTokenizer tokenizer = real_tokenizer();
  const Vocabulary& vocab = tokenizer.vocab();
  CHECK(vocab.size() == 30522);
  CHECK(vocab.id("[PAD]") == 0);
  CHECK(vocab.id("[UNK]") == 100);
  CHECK(vocab.id("[CLS]") == 101);
  CHECK(vocab.id("[SEP]") == 102);
  CHECK(vocab.id("[MASK]") == 103);
  CHECK(vocab.id("the") == 1996);
  // BERT's README: "John Johanson's house" with the uncased model.
  CHECK(tokenizer.tokenize("John Johanson's house") == Tokens{"john", "johan", "##son", "'", "s", "house"});
  CHECK(tokenizer.encode("the") == std::vector<int32_t>{1996});
  CHECK(tokenizer.tokenize("Caf\u00E9 NA\u00CFVE!") == Tokens{"cafe", "naive", "!"});
}

TEST_CASE("malformed vocabularies and text are rejected with file, line or byte offset", "[fast][data]") {
  const std::string dir = mpt::testing::scratch_dir("wordpiece_errors");
  CHECK_THROWS_WITH(Vocabulary::load(dir + "/missing.txt"), Catch::Contains("missing.txt: cannot open"));
  CHECK_THROWS_WITH(Vocabulary::load(write_file(dir, "dup.txt", "[PAD]\nfoo\nbar\nfoo\n")),
                    Catch::Contains("dup.txt:4: token 'foo' repeats line 2"));
  CHECK_THROWS_WITH(Vocabulary::load(write_file(dir, "blank.txt", "[PAD]\n\nfoo\n")),
                    Catch::Contains("blank.txt:2: empty line"));
  CHECK_THROWS_WITH(Vocabulary::load(write_file(dir, "empty.txt", "")), Catch::Contains("empty vocabulary"));
  CHECK_THROWS_WITH(WordPieceTokenizer(Vocabulary::from_tokens({"a"}), true), Catch::Contains("has no [UNK]"));
  CHECK(first_invalid_utf8("plain") == -1);
  CHECK(first_invalid_utf8("ab\xFF") == 2);
  CHECK(first_invalid_utf8("\xC3\x28") == 0);        // a lead byte without its continuation
  CHECK(first_invalid_utf8("\u00E9\xE2\x82") == 2);  // a truncated 3-byte sequence after a valid 2-byte one
}
