// Spec YAML: parse, flatten, validate, overrides.
#include "config/load.h"
#include "fuzz/harness.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  mpt::fuzz::refusals_only([&] { mpt::config::parse_spec(text, "fuzz.yaml", {}); });
  // The same bytes as one override value.
  mpt::fuzz::refusals_only(
      [&] { mpt::config::parse_spec("", "fuzz.yaml", {"debug.inject_nonfinite_grad_at=" + text}); });
  return 0;
}
