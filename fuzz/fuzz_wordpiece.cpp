// WordPiece: a vocabulary file, and arbitrary text through bert-base-uncased's two-stage split.
#include "data/wordpiece.h"
#include "fuzz/harness.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const mpt::data::WordPieceTokenizer tokenizer(
      mpt::data::Vocabulary::from_tokens(
          {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "##s", "a", "##b", "é", "中"}),
      /*lowercase=*/true);
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)tokenizer.encode(text);
  const std::string path = mpt::fuzz::scratch_file(data, size, "vocab.txt");
  mpt::fuzz::refusals_only([&] {
    const mpt::data::WordPieceTokenizer loaded(mpt::data::Vocabulary::load(path), /*lowercase=*/false);
    (void)loaded.encode("the quick brown fox");
  });
  return 0;
}
