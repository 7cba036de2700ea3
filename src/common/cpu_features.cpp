// See cpu_features.h.
#include "common/cpu_features.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

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
    // CPUID.(EAX=7, ECX=0):EDX bit 22, read directly: clang before 16 has no "amx-bf16" for __builtin_cpu_supports.
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    f.amx_bf16 = __get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) && (edx & (1u << 22)) != 0;
#endif
    return f;
  }();
  return features;
}

}  // namespace mpt
