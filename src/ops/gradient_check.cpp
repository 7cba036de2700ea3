#include "ops/gradient_check.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "common/cpu_features.h"
#include "ops/bf16_bits.h"
#include "ops/dispatch.h"

namespace mpt::ops {
namespace {

constexpr int64_t kGrain = 1 << 16;  // elements per task: large enough that a task costs more than its launch

constexpr int64_t kBlock = 4096;  // elements squared and summed in FP32 before the block's sum joins a double

// Squares summed in FP32 over one block: four accumulators of 16 floats (GCC vector types, so each target clone
// uses its widest registers), each lane summing at most 64 squares, so the rounding error stays near FP32's
// epsilon. A square overflows FP32 only for |x| > 1.8e19; such a block is summed again in double.
// BF16 gradients (the master-weights strategy's) are widened on the fly: a BF16 is the top half of an FP32.
typedef float Floats16 __attribute__((vector_size(64)));
typedef uint16_t Halves16 __attribute__((vector_size(32)));
typedef uint32_t Words16 __attribute__((vector_size(64)));

// (Loaded through a reference: a 64-byte vector returned by value would change the baseline clone's ABI.)
[[gnu::always_inline]] inline void load16(const float* x, Floats16& v) { std::memcpy(&v, x, sizeof(v)); }
[[gnu::always_inline]] inline void load16(const uint16_t* x, Floats16& v) {
  Halves16 h;
  std::memcpy(&h, x, sizeof(h));
  const Words16 words = __builtin_convertvector(h, Words16) << 16;
  std::memcpy(&v, &words, sizeof(v));
}

template <typename Element>
[[gnu::always_inline]] inline float block_sum(const Element* __restrict x, int64_t count) {
  Floats16 acc[4] = {};
  int64_t i = 0;
  for (; i + 64 <= count; i += 64) {
    for (int a = 0; a < 4; ++a) {
      Floats16 v;
      load16(x + i + 16 * a, v);
      acc[a] += v * v;
    }
  }
  float total = 0.0f;
  for (; i < count; ++i) total += bf16::widen(x[i]) * bf16::widen(x[i]);
  for (int l = 0; l < 16; ++l) total += (acc[0][l] + acc[1][l]) + (acc[2][l] + acc[3][l]);
  return total;
}

MPT_CPU_CLONES float block_sum_of_squares(const float* __restrict x, int64_t count) { return block_sum(x, count); }
MPT_CPU_CLONES float block_sum_of_squares(const uint16_t* __restrict x, int64_t count) { return block_sum(x, count); }

template <typename Element>
double sum_of_squares(const Element* x, int64_t count) {
  double total = 0.0;
  for (int64_t begin = 0; begin < count; begin += kBlock) {
    const int64_t n = std::min(kBlock, count - begin);
    const float block = block_sum_of_squares(x + begin, n);
    if (std::isfinite(block)) {
      total += block;
    } else {  // Inf/NaN in the block, or squares past FP32's range: the double sum tells which
      for (int64_t i = begin; i < begin + n; ++i) {
        const double value = bf16::widen(x[i]);
        total += value * value;
      }
    }
  }
  return total;
}

// Each thread sums its own contiguous share into its own slot and the slots are added in thread order, so the
// norm (and the clip factor) comes out the same bit for bit on every run with the same thread count.
template <typename Element>
double sum_of_squares_parallel(const Element* data, int64_t count) {
  std::vector<double> parts(at::get_num_threads(), 0.0);
  at::parallel_for(0, count, kGrain, [&](int64_t begin, int64_t end) {
    parts[at::get_thread_num()] = sum_of_squares(data + begin, end - begin);
  });
  double total = 0.0;
  for (double part : parts) total += part;
  return total;
}

double tensor_sum_of_squares(const torch::Tensor& grad) {
  if (grad.scalar_type() == torch::kBFloat16) return sum_of_squares_parallel(bf16::bits(grad), grad.numel());
  return sum_of_squares_parallel(grad.data_ptr<float>(), grad.numel());
}

}  // namespace

bool single_pass_applies(const std::vector<torch::Tensor>& grads) {
  if (!hand_kernels_enabled()) return false;
  for (const auto& grad : grads)
    if (!grad.device().is_cpu() || !bf16::fp32_or_bf16(grad) || grad.is_sparse() ||
        !grad.is_non_overlapping_and_dense())
      return false;
  return true;
}

double global_l2_norm(const std::vector<torch::Tensor>& grads) {
  double total = 0.0;
  for (const auto& grad : grads) total += tensor_sum_of_squares(grad);
  return std::sqrt(total);
}

torch::Tensor clip_grad_norm(const std::vector<torch::Tensor>& grads, double max_norm) {
  torch::NoGradGuard no_grad;
  if (grads.empty()) return torch::zeros({}, torch::kFloat);
  std::vector<torch::Tensor> norms = at::_foreach_norm(grads, 2);
  for (auto& norm : norms) norm = norm.to(torch::kFloat);  // BF16 gradients' norms join the FP32 ones
  const torch::Tensor total = norms.size() == 1 ? norms.front() : torch::stack(norms).norm(2);
  at::_foreach_mul_(grads, torch::clamp_max(max_norm / (total + 1e-6), 1.0));
  return total;
}

GradientCheck check_gradients(const std::vector<torch::Tensor>& grads, double scale, double max_norm) {
  GradientCheck check;
  const double scaled_norm = global_l2_norm(grads);
  if (!std::isfinite(scaled_norm)) {
    check.nonfinite = true;
    return check;
  }
  check.norm = scaled_norm / scale;
  check.factor = 1.0 / scale;
  if (max_norm > 0) {
    const double clip = max_norm / (check.norm + 1e-6);
    if (clip < 1.0) check.factor *= clip;
  }
  return check;
}

GradientCheck unscale_check_and_clip(const std::vector<torch::Tensor>& grads, double scale, double max_norm) {
  const GradientCheck check = check_gradients(grads, scale, max_norm);
  if (!check.nonfinite && check.factor != 1.0)
    for (const auto& grad : grads) grad.mul_(check.factor);
  return check;
}

}  // namespace mpt::ops
