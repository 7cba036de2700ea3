// Counter-based dropout (see dropout.h).
#include "ops/dropout.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <mutex>

#include "common/cpu_features.h"
#include "ops/bf16_bits.h"
#include "ops/dispatch.h"
#include "ops/dropout_mask.h"

namespace mpt::ops {
namespace {

using bf16::fp32_or_bf16;
using bf16::store;
using bf16::widen;

constexpr int64_t kGrain = 1 << 14;  // elements per parallel_for task

// The mask as raw bits (`keep` where the hash is below the threshold, else 0), so one loop serves FP32 (uint32_t
// bits) and BF16/FP16 (uint16_t bits) and the compiler vectorises the 64-bit hash: with AVX-512's 64-bit multiply a
// cooperlake clone runs 8 hashes per instruction, where the scalar loop hashes one element at a time.
template <typename Bits>
MPT_CPU_CLONES_BF16 void fill_mask(Bits* __restrict out, int64_t begin, int64_t end, uint64_t seed, uint64_t threshold,
                                   Bits keep) {
  for (int64_t i = begin; i < end; ++i) out[i] = mix(seed + static_cast<uint64_t>(i)) < threshold ? keep : Bits{0};
}

template <typename Scalar, typename Bits>
void fill_mask_as(torch::Tensor& mask, uint64_t seed, uint64_t threshold, double scale) {
  static_assert(sizeof(Scalar) == sizeof(Bits));
  const auto value = static_cast<Scalar>(scale);
  Bits keep;
  std::memcpy(&keep, &value, sizeof(keep));
  auto* out = reinterpret_cast<Bits*>(mask.data_ptr<Scalar>());
  at::parallel_for(0, mask.numel(), kGrain,
                   [&](int64_t begin, int64_t end) { fill_mask<Bits>(out, begin, end, seed, threshold, keep); });
}

// The fused loops work in chunks: first the chunk's mask as FP32 factors (scale or 0) in a stack buffer, then the
// arithmetic. One loop doing both was much slower, as the vectoriser packs the 64-bit hash lanes down to 32-bit
// float lanes element by element.
constexpr int64_t kChunk = 1024;

inline void fill_factors(float* __restrict factors, int64_t first, int64_t n, uint64_t seed, uint64_t threshold,
                         float scale) {
  for (int64_t j = 0; j < n; ++j) factors[j] = mix(seed + static_cast<uint64_t>(first + j)) < threshold ? scale : 0.0f;
}

// out = residual + factor * y, y FP32 (float) or BF16 (uint16_t bits).
template <typename Y>
MPT_CPU_CLONES_BF16 void dropout_add_forward(const Y* __restrict y, const float* __restrict residual,
                                             float* __restrict out, int64_t begin, int64_t end, uint64_t seed,
                                             uint64_t threshold, float scale) {
  alignas(64) float factors[kChunk];
  for (int64_t first = begin; first < end; first += kChunk) {
    const int64_t n = std::min(kChunk, end - first);
    fill_factors(factors, first, n, seed, threshold, scale);
    for (int64_t j = 0; j < n; ++j) out[first + j] = residual[first + j] + factors[j] * widen(y[first + j]);
  }
}

// out = factor * in, converted: FP32 (float) or BF16 (uint16_t bits, widened exactly, narrowed once to nearest).
template <typename In, typename Out>
MPT_CPU_CLONES_BF16 void scale_kept(const In* __restrict in, Out* __restrict out, int64_t begin, int64_t end,
                                    uint64_t seed, uint64_t threshold, float scale) {
  alignas(64) float factors[kChunk];
  for (int64_t first = begin; first < end; first += kChunk) {
    const int64_t n = std::min(kChunk, end - first);
    fill_factors(factors, first, n, seed, threshold, scale);
    for (int64_t j = 0; j < n; ++j) store(&out[first + j], factors[j] * widen(in[first + j]));
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

// mask * in as a new contiguous tensor of dtype `out_dtype`; in and out are each FP32 or BF16.
torch::Tensor apply_mask(const torch::Tensor& in, torch::ScalarType out_dtype, const DropoutMask& mask) {
  torch::Tensor out = torch::empty(in.sizes(), in.options().dtype(out_dtype));
  bf16::with_data(in, [&](const auto* from) {
    bf16::with_mutable_data(out, [&](auto* to) {
      at::parallel_for(0, in.numel(), kGrain, [&](int64_t begin, int64_t end) {
        scale_kept(from, to, begin, end, mask.seed, mask.threshold, mask.scale);
      });
    });
  });
  return out;
}

struct DropoutAddFunction : public torch::autograd::Function<DropoutAddFunction> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& y,
                               const torch::Tensor& residual, double p) {
    const DropoutMask mask = DropoutMask::draw(p);
    mask.save(ctx);
    ctx->saved_data["y_dtype"] = static_cast<int64_t>(y.scalar_type());
    torch::Tensor out = torch::empty_like(residual);
    bf16::with_data(y, [&](const auto* in) {
      at::parallel_for(0, out.numel(), kGrain, [&](int64_t begin, int64_t end) {
        dropout_add_forward(in, residual.data_ptr<float>(), out.data_ptr<float>(), begin, end, mask.seed,
                            mask.threshold, mask.scale);
      });
    });
    return out;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    const torch::Tensor grad = grad_outputs[0].contiguous();
    const auto y_dtype = static_cast<torch::ScalarType>(ctx->saved_data["y_dtype"].toInt());
    return {ctx->needs_input_grad(0) ? apply_mask(grad, y_dtype, DropoutMask::load(ctx)) : torch::Tensor(),
            ctx->needs_input_grad(1) ? grad : torch::Tensor(), torch::Tensor()};
  }
};

struct DropoutCastFunction : public torch::autograd::Function<DropoutCastFunction> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x, double p,
                               torch::ScalarType dtype) {
    const DropoutMask mask = DropoutMask::draw(p);
    mask.save(ctx);
    ctx->saved_data["x_dtype"] = static_cast<int64_t>(x.scalar_type());
    return apply_mask(x, dtype, mask);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    const auto x_dtype = static_cast<torch::ScalarType>(ctx->saved_data["x_dtype"].toInt());
    return {apply_mask(grad_outputs[0].contiguous(), x_dtype, DropoutMask::load(ctx)), torch::Tensor(),
            torch::Tensor()};
  }
};

}  // namespace

DropoutMask DropoutMask::draw(double p) {
  return {next_mask_seed(), keep_threshold(p), static_cast<float>(1.0 / (1.0 - p))};
}

void DropoutMask::save(torch::autograd::AutogradContext* ctx) const {
  ctx->saved_data["dropout_seed"] = static_cast<int64_t>(seed);
  ctx->saved_data["dropout_threshold"] = static_cast<int64_t>(threshold);
  ctx->saved_data["dropout_scale"] = static_cast<double>(scale);
}

DropoutMask DropoutMask::load(torch::autograd::AutogradContext* ctx) {
  return {static_cast<uint64_t>(ctx->saved_data["dropout_seed"].toInt()),
          static_cast<uint64_t>(ctx->saved_data["dropout_threshold"].toInt()),
          static_cast<float>(ctx->saved_data["dropout_scale"].toDouble())};
}

torch::Tensor dropout_add(const torch::Tensor& y, const torch::Tensor& residual, double p, bool training) {
  if (!training || p <= 0.0) return y + residual;
  const bool fusable = hand_kernels_enabled() && y.device().is_cpu() && residual.device().is_cpu() && p < 1.0 &&
                       fp32_or_bf16(y) && residual.scalar_type() == torch::kFloat && y.sizes() == residual.sizes() &&
                       y.is_contiguous() && residual.is_contiguous();
  if (!fusable) return ops::dropout(y, p, training) + residual;
  return DropoutAddFunction::apply(y, residual, p);
}

torch::Tensor dropout_to(const torch::Tensor& x, double p, bool training, torch::ScalarType dtype) {
  if (!training || p <= 0.0) return x.to(dtype);
  const bool fusable = hand_kernels_enabled() && x.device().is_cpu() && p < 1.0 && x.is_contiguous() &&
                       fp32_or_bf16(x) && (dtype == torch::kFloat || dtype == torch::kBFloat16);
  if (!fusable) return ops::dropout(x, p, training).to(dtype);
  return DropoutCastFunction::apply(x, p, dtype);
}

torch::Tensor dropout(const torch::Tensor& x, double p, bool training) {
  if (!training || p <= 0.0) return x;
  if (!hand_kernels_enabled() || !x.device().is_cpu() || p >= 1.0) return torch::dropout(x, p, training);
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

}  // namespace mpt::ops
