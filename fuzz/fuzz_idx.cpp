// IDX (Fashion-MNIST's images and labels), plain and gzipped.
#include "data/idx.h"
#include "fuzz/harness.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<uint8_t> bytes(data, data + size);
  for (const int rank : {1, 3}) mpt::fuzz::refusals_only([&] { mpt::data::parse_idx(bytes, "fuzz.idx", rank); });
  const std::string path = mpt::fuzz::scratch_file(data, size, "fuzz.idx.gz");
  mpt::fuzz::refusals_only([&] { mpt::data::read_maybe_gzipped(path); });
  return 0;
}
