// Weights files as model.init_from reads them: safetensors, a PyTorch zip, or an mpt checkpoint, told apart by
// their first bytes; and the checkpoint container's own check.
#include "fuzz/harness.h"
#include "io/checkpoint.h"
#include "io/weights.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = mpt::fuzz::scratch_file(data, size, "weights");
  mpt::fuzz::refusals_only([&] { mpt::io::read_weights(path); });
  (void)mpt::io::verify_checkpoint(path);
  mpt::fuzz::refusals_only(
      [&] { mpt::io::decode_safetensors(std::string(reinterpret_cast<const char*>(data), size), "fuzz"); });
  return 0;
}
