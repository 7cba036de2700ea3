// Nightly suite YAML.
#include "fuzz/harness.h"
#include "tools/nightly/suite.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = mpt::fuzz::scratch_file(data, size, "suite.yaml");
  mpt::fuzz::refusals_only([&] { mpt::nightly::load_suite(path); });
  return 0;
}
