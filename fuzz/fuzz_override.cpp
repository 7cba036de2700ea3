// Hydra's override grammar: the input's lines as `key=value`, `+key=value`, `++key=value` and `~key[=value]`
// overrides of a small spec, each checked like the file.
#include <sstream>
#include <vector>

#include "config/load.h"
#include "fuzz/harness.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string> overrides;
  std::istringstream lines(std::string(reinterpret_cast<const char*>(data), size));
  for (std::string line; std::getline(lines, line) && overrides.size() < 64;) overrides.push_back(line);
  mpt::fuzz::refusals_only([&] {
    (void)mpt::config::parse_spec("optimizer:\n  lr: 0.01\ntrain:\n  max_steps: 3\n", "fuzz.yaml", overrides);
  });
  return 0;
}
