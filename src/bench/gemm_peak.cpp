// GEMM peak microbenchmark.
#include "bench/gemm_peak.h"

#include <torch/cuda.h>

#include <optional>

#include "ops/bf16_gemm_emulation.h"
#include "precision/autocast.h"

#include <algorithm>
#include <chrono>

namespace mpt::bench {

GemmPeak measure_gemm_flops(torch::ScalarType dtype, torch::Device device, int64_t max_n, double seconds) {
  // Where BF16 is emulated the step's products are, so the peak is the emulated product's (FP32 in, autocast on).
  const bool emulated = device.is_cpu() && dtype == torch::kBFloat16 && ops::enable_cpu_bf16_emulation();
  std::optional<precision::AutocastScope> autocast;
  if (emulated) autocast.emplace(device.type(), dtype);
  auto options = torch::TensorOptions().dtype(emulated ? torch::kFloat : dtype).device(device);
  auto sync = [&] {
    if (device.is_cuda()) torch::cuda::synchronize();
  };
  auto time_one = [&](const torch::Tensor& a, const torch::Tensor& b, torch::Tensor& c) {
    const auto start = std::chrono::steady_clock::now();
    if (emulated)
      c = torch::mm(a, b);
    else
      torch::mm_out(c, a, b);
    sync();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  // The size: from 256 up, doubling while one product stays under a tenth of the time and n under max_n.
  int64_t n = std::min<int64_t>(256, max_n);
  while (true) {
    const torch::Tensor a = torch::randn({n, n}, options), b = torch::randn({n, n}, options);
    torch::Tensor c = torch::mm(a, b);  // warm-up: kernels, packing buffers, thread pool
    sync();
    const double once = time_one(a, b, c);
    if (2 * n > max_n || once * 8 > seconds / 10) break;
    n *= 2;
  }
  const torch::Tensor a = torch::randn({n, n}, options), b = torch::randn({n, n}, options);
  torch::Tensor c = torch::mm(a, b);
  sync();
  GemmPeak peak{0.0, n};
  for (double spent = 0.0; spent < seconds;) {
    const double elapsed = time_one(a, b, c);
    spent += elapsed;
    peak.flops = std::max(peak.flops, 2.0 * static_cast<double>(n) * n * n / elapsed);
  }
  return peak;
}

}  // namespace mpt::bench
