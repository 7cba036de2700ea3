// The machine's measured matrix-multiply peak for a dtype: the denominator of MFU. Measured, not looked up,
// because what matters is what this LibTorch, BLAS and thread setting reach here.
#pragma once

#include <torch/torch.h>

namespace mpt::bench {

struct GemmPeak {
  double flops = 0.0;  // best FLOP/s over the timings
  int64_t n = 0;       // the n x n x n matmul measured
};

// FLOP/s of an n x n x n matmul in `dtype` on `device`, best of repeated timings over ~`seconds`. n doubles from
// 256 up to `max_n` while one product takes under a tenth of that time, so a slow GEMM cannot stall the probe.
GemmPeak measure_gemm_flops(torch::ScalarType dtype, torch::Device device, int64_t max_n = 2048, double seconds = 1.0);

}  // namespace mpt::bench
