// GEMM peak microbenchmark.
#include "core/bench/gemm_peak.h"

#include <torch/cuda.h>

#include <algorithm>
#include <chrono>

namespace mpt::bench {

double measure_gemm_flops(torch::ScalarType dtype, torch::Device device, int64_t n, double seconds) {
  auto options = torch::TensorOptions().dtype(dtype).device(device);
  const torch::Tensor a = torch::randn({n, n}, options), b = torch::randn({n, n}, options);
  torch::Tensor c = torch::mm(a, b);  // warm-up: kernels, packing buffers, thread pool
  auto sync = [&] {
    if (device.is_cuda()) torch::cuda::synchronize();
  };
  sync();
  double best = 0.0, spent = 0.0;
  while (spent < seconds) {
    const auto start = std::chrono::steady_clock::now();
    torch::mm_out(c, a, b);
    sync();
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    spent += elapsed;
    best = std::max(best, 2.0 * static_cast<double>(n) * n * n / elapsed);
  }
  return best;
}

}  // namespace mpt::bench
