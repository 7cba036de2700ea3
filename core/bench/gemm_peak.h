// The machine's measured matrix-multiply peak for a dtype: the denominator of MFU. Measured, not looked up,
// because what matters is what this LibTorch, BLAS and thread setting reach here.
#pragma once

#include <torch/torch.h>

namespace mpt::bench {

// FLOP/s of an n x n x n matmul in `dtype` on `device`, best of repeated timings over ~`seconds`.
double measure_gemm_flops(torch::ScalarType dtype, torch::Device device, int64_t n = 2048, double seconds = 1.0);

}  // namespace mpt::bench
