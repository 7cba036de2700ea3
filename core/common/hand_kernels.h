// The switch over mpt's hand-written CPU kernels (fused optimizers, the gradient norm, the split linear backward,
// the AVX-512 ops): MPT_PORTABLE_KERNELS=1 in the environment makes every op take LibTorch's own path, the
// reference each kernel is tested and benchmarked against.
#pragma once

namespace mpt {

// False when MPT_PORTABLE_KERNELS=1 (read once) or after force_portable_kernels(true).
bool hand_kernels_enabled();

// For tests that run an op both ways in one process.
void force_portable_kernels(bool portable);

}  // namespace mpt
