// `mpt tokenize`'s input: any bytes as standard input, read line by line with the training reader's rules and
// split with a small WordPiece vocabulary.
#include <sstream>

#include "data/wordpiece.h"
#include "fuzz/harness.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string folder = mpt::fuzz::scratch_folder("tokenize");
  static const mpt::data::WordPieceTokenizer tokenizer(
      mpt::data::Vocabulary::load(mpt::fuzz::write_small_vocabulary(folder)), /*lowercase=*/true);
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  mpt::fuzz::refusals_only([&] {
    mpt::data::for_each_utf8_line(in, "standard input",
                                  [](std::string& line, int64_t) { (void)tokenizer.tokenize(line); });
  });
  return 0;
}
