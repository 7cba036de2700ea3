// The one probe of the CPU's instruction sets: every hand kernel's dispatch (ops/dispatch.h), the BF16 GEMM
// emulation's switch and doctor's report read it, so they cannot disagree.
#pragma once

namespace mpt {

struct CpuFeatures {
  bool avx2 = false;
  bool avx512_core = false;  // AVX512F, BW, VL and DQ: oneDNN's BF16 GEMM runs natively from here up
  bool avx512_bf16 = false;  // vcvtneps2bf16 and the BF16 dot products: the hand-vectorised BF16 kernels
  bool amx_bf16 = false;
};

// Probed once; all false on a CPU other than x86-64.
const CpuFeatures& cpu_features();

}  // namespace mpt

// Function multi-versioning for the hand kernels' element loops: an AVX-512, an AVX2 and a portable clone,
// picked at load time. Other architectures and compilers get the portable code alone.
#if defined(__x86_64__) && defined(__GNUC__)
#define MPT_CPU_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#define MPT_CPU_CLONES_BF16 __attribute__((target_clones("arch=cooperlake", "avx2", "default")))
#else
#define MPT_CPU_CLONES
#define MPT_CPU_CLONES_BF16
#endif
