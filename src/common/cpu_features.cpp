// See cpu_features.h.
#include "common/cpu_features.h"

namespace mpt {

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = [] {
    CpuFeatures f;
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    f.avx2 = __builtin_cpu_supports("avx2");
    f.avx512_core = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                    __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
    f.avx512_bf16 = f.avx512_core && __builtin_cpu_supports("avx512bf16");
    f.amx_bf16 = __builtin_cpu_supports("amx-bf16");
#endif
    return f;
  }();
  return features;
}

}  // namespace mpt
