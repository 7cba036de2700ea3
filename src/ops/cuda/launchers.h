// The CUDA kernels' launchers, in plain C++ types so that nvcc never sees LibTorch's headers and the host side
// never sees CUDA's: ops/cuda/cuda_ops.cpp calls them with a tensor's pointers and the current stream. Each kernel
// has its reference in LibTorch ops beside the op it serves, and tests/ops/test_device_ops.cpp compares the two.
#pragma once

#include <cstdint>

namespace mpt::ops::cuda {

// MXFP8 casts (ops/mxfp8.h): `blocks` blocks of 32 FP32 values from `x` to E4M3 bytes in `data` and one E8M0
// scale byte per block in `scales`, on `stream` (a cudaStream_t). Returns the launch's cudaError_t.
int launch_to_mxfp8(const float* x, uint8_t* data, uint8_t* scales, int64_t blocks, void* stream);

}  // namespace mpt::ops::cuda
