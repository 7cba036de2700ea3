// Labelled text (text_classification): the input up to its first form feed is ROOT/train.tsv, the rest
// ROOT/test.tsv (the whole input for both when there is none), read with a small WordPiece vocabulary.
#include <algorithm>

#include "data/dataset.h"
#include "fuzz/harness.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string root = mpt::fuzz::scratch_folder("tsv");
  static const std::string vocab = mpt::fuzz::write_small_vocabulary(root);
  const uint8_t* split = std::find(data, data + size, '\f');
  const bool one_file = split == data + size;
  mpt::fuzz::write_bytes(root + "/train.tsv", data, static_cast<size_t>(split - data));
  if (one_file)
    mpt::fuzz::write_bytes(root + "/test.tsv", data, size);
  else
    mpt::fuzz::write_bytes(root + "/test.tsv", split + 1, static_cast<size_t>(data + size - split - 1));
  mpt::data::DataConfig config;
  config.name = "text_classification";
  config.root = root;
  config.vocab = vocab;
  config.seq_len = 16;
  for (const char* split_name : {"train", "test"})
    mpt::fuzz::refusals_only([&] { (void)mpt::data::load_text_classification(config, split_name, 0); });
  return 0;
}
