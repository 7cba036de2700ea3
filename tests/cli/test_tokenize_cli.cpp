// `mpt tokenize` end to end: the tokens training sees, and the training reader's refusals (invalid UTF-8,
// binary data, overlong lines) for files and standard input alike.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "tests/support/helpers.h"

using namespace mpt::testing;

namespace {

std::string vocab_or_empty() {
  const std::string vocab = source_path("data/bert-base-uncased/vocab.txt");
  return std::filesystem::exists(vocab) ? vocab : "";
}

}  // namespace

TEST_CASE("mpt tokenize splits text as training does", "[fast][cli]") {
  const std::string vocab = vocab_or_empty();
  if (vocab.empty()) MPT_SKIP("no vocabulary (scripts/setup.sh installs it)");
  const std::string text = scratch_dir("tokenize") + "/text.txt";
  std::ofstream(text) << "Hello, World!\nunaffable\n";
  const auto plain = run_mpt({"tokenize", text, "--vocab", vocab});
  CHECK(plain.exit_code == 0);
  CHECK(plain.output == "hello , world !\nuna ##ffa ##ble\n");
  const auto json = run_mpt({"tokenize", text, "--vocab", vocab, "--json"});
  CHECK_THAT(json.output,
             Catch::StartsWith("{\"ids\":[7592,1010,2088,999],\"tokens\":[\"hello\",\",\",\"world\",\"!\"]}"));
  const auto piped = run_mpt_with_input(text, {"tokenize", "--vocab", vocab});
  CHECK(piped.exit_code == 0);
  CHECK(piped.output == plain.output);
}

TEST_CASE("mpt tokenize refuses what training refuses: invalid UTF-8, binary data and overlong lines", "[fast][cli]") {
  const std::string vocab = vocab_or_empty();
  if (vocab.empty()) MPT_SKIP("no vocabulary (scripts/setup.sh installs it)");
  const std::string dir = scratch_dir("tokenize-hostile");
  std::ofstream(dir + "/broken.txt", std::ios::binary) << "fine line\ncaf\xc3 \xff\xfe broken\n";
  for (const auto& result : {run_mpt({"tokenize", dir + "/broken.txt", "--vocab", vocab}),
                             run_mpt_with_input(dir + "/broken.txt", {"tokenize", "--vocab", vocab})}) {
    INFO(result.output);
    CHECK(result.exit_code != 0);
    CHECK_THAT(result.output, Catch::Contains("byte offset 13 (line 2): invalid UTF-8"));
    CHECK_THAT(result.output, Catch::Contains("fine line"));  // lines before the bad one were printed, streaming
  }
  // /dev/zero as standard input: refused at its first byte, not read for seconds to print nothing.
  const auto zeros = run_mpt_with_input("/dev/zero", {"tokenize", "--vocab", vocab});
  CHECK(zeros.exit_code != 0);
  CHECK_THAT(zeros.output, Catch::Contains("standard input: byte offset 0 (line 1): a NUL byte: binary data"));
  // A single line past the reader's bound is refused as it is read, not held whole.
  std::ofstream(dir + "/long.txt", std::ios::binary) << std::string((1 << 20) + 10, 'a') << "\n";
  const auto long_line = run_mpt({"tokenize", dir + "/long.txt", "--vocab", vocab});
  CHECK(long_line.exit_code != 0);
  CHECK_THAT(long_line.output, Catch::Contains("line 1 (from byte offset 0) is longer than 1048576 bytes"));
}
