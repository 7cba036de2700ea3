#include "core/precision/gradient_check.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <mutex>

namespace mpt::precision {
namespace {

constexpr int64_t kGrain = 1 << 16;  // elements per task: large enough that a task costs more than its launch

constexpr int64_t kBlock = 4096;  // elements squared and summed in FP32 before the block's sum joins a double

// Squares summed in FP32 over one block: four accumulators of 16 floats (GCC vector types, so each target clone
// uses its widest registers), each lane summing at most 64 squares, so the rounding error stays near FP32's
// epsilon. A square overflows FP32 only for |x| > 1.8e19; such a block is summed again in double.
typedef float Floats16 __attribute__((vector_size(64)));

__attribute__((target_clones("avx512f", "avx2", "default"))) float block_sum_of_squares(const float* __restrict x,
                                                                                        int64_t count) {
  Floats16 acc[4] = {};
  int64_t i = 0;
  for (; i + 64 <= count; i += 64) {
    for (int a = 0; a < 4; ++a) {
      Floats16 v;
      std::memcpy(&v, x + i + 16 * a, sizeof(v));
      acc[a] += v * v;
    }
  }
  float total = 0.0f;
  for (; i < count; ++i) total += x[i] * x[i];
  for (int l = 0; l < 16; ++l) total += (acc[0][l] + acc[1][l]) + (acc[2][l] + acc[3][l]);
  return total;
}

double sum_of_squares(const float* x, int64_t count) {
  double total = 0.0;
  for (int64_t begin = 0; begin < count; begin += kBlock) {
    const int64_t n = std::min(kBlock, count - begin);
    const float block = block_sum_of_squares(x + begin, n);
    if (std::isfinite(block)) {
      total += block;
    } else {  // Inf/NaN in the block, or squares past FP32's range: the double sum tells which
      for (int64_t i = begin; i < begin + n; ++i) total += static_cast<double>(x[i]) * x[i];
    }
  }
  return total;
}

double tensor_sum_of_squares(const torch::Tensor& grad) {
  const float* data = grad.data_ptr<float>();
  std::mutex mutex;
  double total = 0.0;
  at::parallel_for(0, grad.numel(), kGrain, [&](int64_t begin, int64_t end) {
    const double part = sum_of_squares(data + begin, end - begin);
    std::lock_guard<std::mutex> lock(mutex);
    total += part;
  });
  return total;
}

}  // namespace

bool single_pass_applies(const std::vector<torch::Tensor>& grads) {
  for (const auto& grad : grads)
    if (!grad.device().is_cpu() || grad.scalar_type() != torch::kFloat || grad.is_sparse() ||
        !grad.is_non_overlapping_and_dense())
      return false;
  return true;
}

double global_l2_norm(const std::vector<torch::Tensor>& grads) {
  double total = 0.0;
  for (const auto& grad : grads) total += tensor_sum_of_squares(grad);
  return std::sqrt(total);
}

GradientCheck unscale_check_and_clip(const std::vector<torch::Tensor>& grads, double scale, double max_norm) {
  GradientCheck check;
  const double scaled_norm = global_l2_norm(grads);
  if (!std::isfinite(scaled_norm)) {
    check.nonfinite = true;
    return check;
  }
  check.norm = scaled_norm / scale;
  double factor = 1.0 / scale;
  if (max_norm > 0) {
    const double clip = max_norm / (check.norm + 1e-6);
    if (clip < 1.0) factor *= clip;
  }
  if (factor != 1.0)
    for (const auto& grad : grads) grad.mul_(factor);
  return check;
}

}  // namespace mpt::precision
