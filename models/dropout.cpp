// Counter-based dropout (see dropout.h).
#include "models/dropout.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <mutex>

namespace mpt::models {
namespace {

// SplitMix64's finaliser: consecutive inputs give independent, uniformly distributed outputs.
inline uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// The mask as raw bits (`keep` where the hash is below the threshold, else 0), so one loop serves FP32 (uint32_t
// bits) and BF16/FP16 (uint16_t bits) and the compiler vectorises the 64-bit hash: with AVX-512's 64-bit
// multiply a cooperlake clone runs 8 hashes per instruction where the scalar loop spent ~1.8 ns per element.
template <typename Bits>
__attribute__((target_clones("arch=cooperlake", "avx2", "default"))) void fill_mask(
    Bits* __restrict out, int64_t begin, int64_t end, uint64_t seed, uint64_t threshold, Bits keep) {
  for (int64_t i = begin; i < end; ++i) out[i] = mix(seed + static_cast<uint64_t>(i)) < threshold ? keep : Bits{0};
}

template <typename Scalar, typename Bits>
void fill_mask_as(torch::Tensor& mask, uint64_t seed, uint64_t threshold, double scale) {
  static_assert(sizeof(Scalar) == sizeof(Bits));
  const auto value = static_cast<Scalar>(scale);
  Bits keep;
  std::memcpy(&keep, &value, sizeof(keep));
  auto* out = reinterpret_cast<Bits*>(mask.data_ptr<Scalar>());
  at::parallel_for(0, mask.numel(), 1 << 14, [&](int64_t begin, int64_t end) {
    fill_mask<Bits>(out, begin, end, seed, threshold, keep);
  });
}

// Widening and narrowing BF16 by hand, so the loops below vectorise (a BF16 is the top half of an FP32).
inline float widen(uint16_t bits) {
  const uint32_t word = static_cast<uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &word, sizeof(value));
  return value;
}

inline uint16_t narrow(float value) {  // round to nearest even; NaN stays NaN (a select, not a branch)
  uint32_t word;
  std::memcpy(&word, &value, sizeof(word));
  const uint32_t rounded = (word + 0x7fffU + ((word >> 16) & 1U)) >> 16;
  const uint32_t quiet_nan = (word >> 16) | 0x40U;
  return static_cast<uint16_t>((word & 0x7fffffffU) > 0x7f800000U ? quiet_nan : rounded);
}

inline float widen(float value) { return value; }

// The fused loops work in chunks: first the chunk's mask as FP32 factors (scale or 0) in a stack buffer, then the
// arithmetic. One loop doing both ran 7x slower, as the vectoriser packs the 64-bit hash lanes down to 32-bit
// float lanes element by element.
constexpr int64_t kChunk = 1024;

inline void fill_factors(float* __restrict factors, int64_t first, int64_t n, uint64_t seed, uint64_t threshold,
                         float scale) {
  for (int64_t j = 0; j < n; ++j) factors[j] = mix(seed + static_cast<uint64_t>(first + j)) < threshold ? scale : 0.0f;
}

// out = residual + factor * y, y FP32 (float) or BF16 (uint16_t bits).
template <typename Y>
__attribute__((target_clones("arch=cooperlake", "avx2", "default"))) void dropout_add_forward(
    const Y* __restrict y, const float* __restrict residual, float* __restrict out, int64_t begin, int64_t end,
    uint64_t seed, uint64_t threshold, float scale) {
  alignas(64) float factors[kChunk];
  for (int64_t first = begin; first < end; first += kChunk) {
    const int64_t n = std::min(kChunk, end - first);
    fill_factors(factors, first, n, seed, threshold, scale);
    for (int64_t j = 0; j < n; ++j) out[first + j] = residual[first + j] + factors[j] * widen(y[first + j]);
  }
}

// grad_y = factor * grad, in y's dtype: FP32 (float) or BF16 (uint16_t bits, rounded once).
inline void store(float* out, float value) { *out = value; }
inline void store(uint16_t* out, float value) { *out = narrow(value); }

template <typename Y>
__attribute__((target_clones("arch=cooperlake", "avx2", "default"))) void dropout_backward(
    const float* __restrict grad, Y* __restrict grad_y, int64_t begin, int64_t end, uint64_t seed,
    uint64_t threshold, float scale) {
  alignas(64) float factors[kChunk];
  for (int64_t first = begin; first < end; first += kChunk) {
    const int64_t n = std::min(kChunk, end - first);
    fill_factors(factors, first, n, seed, threshold, scale);
    for (int64_t j = 0; j < n; ++j) store(&grad_y[first + j], factors[j] * grad[first + j]);
  }
}

uint64_t draw_seed() {
  at::Generator generator = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(generator.mutex());
  return generator.get<at::CPUGeneratorImpl>()->random64();
}

// keep when the hash is below (1 - p) * 2^64; the rounding of the threshold is below 2^-53 in probability.
uint64_t keep_threshold(double p) { return static_cast<uint64_t>((1.0 - p) * 18446744073709551616.0); }

uint64_t next_mask_seed() { return draw_seed() * 0x9e3779b97f4a7c15ULL; }

constexpr int64_t kGrain = 1 << 14;

struct DropoutAddFunction : public torch::autograd::Function<DropoutAddFunction> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& y,
                               const torch::Tensor& residual, double p) {
    const uint64_t seed = next_mask_seed(), threshold = keep_threshold(p);
    const auto scale = static_cast<float>(1.0 / (1.0 - p));
    ctx->saved_data["seed"] = static_cast<int64_t>(seed);
    ctx->saved_data["threshold"] = static_cast<int64_t>(threshold);
    ctx->saved_data["scale"] = static_cast<double>(scale);
    ctx->saved_data["y_dtype"] = static_cast<int64_t>(y.scalar_type());
    torch::Tensor out = torch::empty_like(residual);
    const float* r = residual.data_ptr<float>();
    float* o = out.data_ptr<float>();
    if (y.scalar_type() == torch::kBFloat16) {
      const auto* in = reinterpret_cast<const uint16_t*>(y.data_ptr<at::BFloat16>());
      at::parallel_for(0, out.numel(), kGrain, [&](int64_t begin, int64_t end) {
        dropout_add_forward<uint16_t>(in, r, o, begin, end, seed, threshold, scale);
      });
    } else {
      const float* in = y.data_ptr<float>();
      at::parallel_for(0, out.numel(), kGrain, [&](int64_t begin, int64_t end) {
        dropout_add_forward<float>(in, r, o, begin, end, seed, threshold, scale);
      });
    }
    return out;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    const torch::Tensor grad = grad_outputs[0].contiguous();
    const auto seed = static_cast<uint64_t>(ctx->saved_data["seed"].toInt());
    const auto threshold = static_cast<uint64_t>(ctx->saved_data["threshold"].toInt());
    const auto scale = static_cast<float>(ctx->saved_data["scale"].toDouble());
    const auto y_dtype = static_cast<torch::ScalarType>(ctx->saved_data["y_dtype"].toInt());
    torch::Tensor grad_y;
    if (ctx->needs_input_grad(0)) {
      grad_y = torch::empty(grad.sizes(), grad.options().dtype(y_dtype));
      const float* g = grad.data_ptr<float>();
      if (y_dtype == torch::kBFloat16) {
        auto* out = reinterpret_cast<uint16_t*>(grad_y.data_ptr<at::BFloat16>());
        at::parallel_for(0, grad.numel(), kGrain, [&](int64_t begin, int64_t end) {
          dropout_backward<uint16_t>(g, out, begin, end, seed, threshold, scale);
        });
      } else {
        float* out = grad_y.data_ptr<float>();
        at::parallel_for(0, grad.numel(), kGrain, [&](int64_t begin, int64_t end) {
          dropout_backward<float>(g, out, begin, end, seed, threshold, scale);
        });
      }
    }
    return {grad_y, ctx->needs_input_grad(1) ? grad : torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor dropout_add(const torch::Tensor& y, const torch::Tensor& residual, double p, bool training) {
  if (!training || p <= 0.0) return y + residual;
  const bool fusable = y.device().is_cpu() && residual.device().is_cpu() && p < 1.0 &&
                       residual.scalar_type() == torch::kFloat &&
                       (y.scalar_type() == torch::kFloat || y.scalar_type() == torch::kBFloat16) &&
                       y.sizes() == residual.sizes() && y.is_contiguous() && residual.is_contiguous();
  if (!fusable) return models::dropout(y, p, training) + residual;
  return DropoutAddFunction::apply(y, residual, p);
}

torch::Tensor dropout(const torch::Tensor& x, double p, bool training) {
  if (!training || p <= 0.0) return x;
  if (!x.device().is_cpu() || p >= 1.0) return torch::dropout(x, p, training);
  const uint64_t seed = next_mask_seed(), threshold = keep_threshold(p);
  torch::Tensor mask = torch::empty(x.sizes(), x.options().requires_grad(false));
  const double scale = 1.0 / (1.0 - p);
  switch (mask.scalar_type()) {
    case at::kFloat: fill_mask_as<float, uint32_t>(mask, seed, threshold, scale); break;
    case at::kDouble: fill_mask_as<double, uint64_t>(mask, seed, threshold, scale); break;
    case at::kBFloat16: fill_mask_as<at::BFloat16, uint16_t>(mask, seed, threshold, scale); break;
    case at::kHalf: fill_mask_as<at::Half, uint16_t>(mask, seed, threshold, scale); break;
    default: return torch::dropout(x, p, training);
  }
  return x * mask;  // autograd keeps the mask for backward: grad * mask
}

}  // namespace mpt::models
