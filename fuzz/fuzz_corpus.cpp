// A text corpus for masked-LM: the input is ROOT/a.txt, tokenised with a small WordPiece vocabulary and packed.
#include "data/dataset.h"
#include "fuzz/harness.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string root = mpt::fuzz::scratch_folder("corpus");
  static const std::string vocab = mpt::fuzz::write_small_vocabulary(root);
  static const std::string text = mpt::fuzz::scratch_folder("corpus/text");
  static int64_t calls = 0;
  mpt::fuzz::write_bytes(text + "/a.txt", data, size);
  mpt::data::DataConfig config;
  config.name = "text_corpus";
  config.root = text;
  config.vocab = vocab;
  // The packed corpus is cached per (root, vocabulary, seq_len, ...): alternating the length packs every input anew.
  config.seq_len = ++calls % 2 ? 8 : 9;
  config.test_every = 2;
  for (const char* split : {"train", "test"})
    mpt::fuzz::refusals_only([&] { (void)mpt::data::load_text_corpus(config, split, 0); });
  return 0;
}
