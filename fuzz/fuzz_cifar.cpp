// CIFAR-10's binary batches: the input is ROOT/test_batch.bin.
#include "data/dataset.h"
#include "fuzz/harness.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string root = mpt::fuzz::scratch_folder("cifar");
  mpt::fuzz::write_bytes(root + "/test_batch.bin", data, size);
  mpt::data::DataConfig config;
  config.name = "cifar10";
  config.root = root;
  mpt::fuzz::refusals_only([&] { (void)mpt::data::load_cifar10(config, "test", 0); });
  return 0;
}
