// A "billion laughs" in YAML, for the tests that prove it is refused (torch-free, for the config tests too).
#pragma once

#include <string>

namespace mpt::testing {

// YAML whose anchors PREFIX0..PREFIX9 each alias the one below ten times: 10^10 values from 800 bytes, line k+1
// holding level k.
inline std::string alias_bomb(const std::string& prefix) {
  std::string bomb = prefix + "0: &" + prefix + "0 [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]\n";
  for (int level = 1; level < 10; ++level) {
    const std::string below = "*" + prefix + std::to_string(level - 1);
    bomb += prefix + std::to_string(level) + ": &" + prefix + std::to_string(level) + " [" + below;
    for (int i = 1; i < 10; ++i) bomb += ", " + below;
    bomb += "]\n";
  }
  return bomb;
}

}  // namespace mpt::testing
