// The one switch over mpt's hand-written kernels: the CPU's (fused optimizers, the gradient norm, the split linear
// backward, the AVX512-BF16 ops) and the devices' (ops/cuda/cuda_ops.h, each with its supports check).
// MPT_PORTABLE_KERNELS=1 in the environment makes every op take LibTorch's own path, the reference each kernel is
// tested and benchmarked against (tests/ops/test_device_ops.cpp runs every op both ways on every device); the
// CPU's features come from one probe (common/cpu_features.h).
#pragma once

namespace mpt::ops {

// False when MPT_PORTABLE_KERNELS=1 (read once) or after force_portable_kernels(true).
bool hand_kernels_enabled();

// Hand kernels enabled, built (x86-64 with GCC or Clang) and the CPU has AVX512-BF16: the vectorised BF16
// kernels of avx512.h may run.
bool avx512_bf16_kernels();

// For tests that run an op both ways in one process.
void force_portable_kernels(bool portable);

}  // namespace mpt::ops
