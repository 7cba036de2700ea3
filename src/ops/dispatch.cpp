// See dispatch.h.
#include "ops/dispatch.h"

#include <atomic>
#include <cstdlib>
#include <string>

#include "common/cpu_features.h"
#include "ops/avx512.h"

namespace mpt::ops {
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

bool avx512_bf16_kernels() { return MPT_AVX512_KERNELS && hand_kernels_enabled() && cpu_features().avx512_bf16; }

void force_portable_kernels(bool portable) { enabled().store(!portable); }

}  // namespace mpt::ops
