// See hand_kernels.h.
#include "core/common/hand_kernels.h"

#include <atomic>
#include <cstdlib>
#include <string>

namespace mpt {
namespace {

std::atomic<bool>& enabled() {
  static std::atomic<bool> on{[] {
    const char* portable = std::getenv("MPT_PORTABLE_KERNELS");
    return !(portable && std::string(portable) == "1");
  }()};
  return on;
}

}  // namespace

bool hand_kernels_enabled() { return enabled().load(std::memory_order_relaxed); }

void force_portable_kernels(bool portable) { enabled().store(!portable); }

}  // namespace mpt
