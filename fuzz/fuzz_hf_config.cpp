// A Hugging Face config.json as model.hf_config reads it: every size bounded, the memory its weights need
// computed before anything is allocated.
#include "fuzz/harness.h"
#include "models/hf_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = mpt::fuzz::scratch_file(data, size, "config.json");
  mpt::fuzz::refusals_only([&] { (void)mpt::models::read_hf_bert_config(path); });
  return 0;
}
