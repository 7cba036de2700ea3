// Fused attention scores (see attention_scores.h).
#include "ops/attention_scores.h"

#include <ATen/Parallel.h>

#include <limits>

#include "common/cpu_features.h"
#include "ops/avx512.h"
#include "ops/bf16_bits.h"
#include "ops/dispatch.h"
#include "ops/dropout.h"
#include "ops/dropout_mask.h"

namespace mpt::ops {
namespace {

// Rows [begin, end) of the (B * h * S, S) score matrix; row r belongs to sequence r / rows_per_sequence.
template <typename P>
MPT_CPU_CLONES_BF16 void scores_forward(const P* __restrict products, const float* __restrict mask_bias,
                                        float* __restrict scores, int64_t begin, int64_t end, int64_t keys,
                                        int64_t rows_per_sequence, float scale) {
  for (int64_t row = begin; row < end; ++row) {
    const float* mask = mask_bias + (row / rows_per_sequence) * keys;
    const P* in = products + row * keys;
    float* out = scores + row * keys;
    for (int64_t j = 0; j < keys; ++j) out[j] = mask[j] + scale * bf16::widen(in[j]);
  }
}

template <typename P>
MPT_CPU_CLONES_BF16 void scores_backward(const float* __restrict grad, P* __restrict grad_products, int64_t begin,
                                         int64_t end, float scale) {
  for (int64_t i = begin; i < end; ++i) bf16::store(&grad_products[i], scale * grad[i]);
}

constexpr int64_t kGrain = 1 << 14;

struct MaskedScoresFunction : public torch::autograd::Function<MaskedScoresFunction> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& products,
                               const torch::Tensor& mask_bias, double scale) {
    ctx->saved_data["scale"] = scale;
    ctx->saved_data["dtype"] = static_cast<int64_t>(products.scalar_type());
    torch::Tensor scores = torch::empty(products.sizes(), products.options().dtype(torch::kFloat));
    const int64_t keys = products.size(3), rows = products.numel() / keys;
    const int64_t rows_per_sequence = products.size(1) * products.size(2);
    auto run = [&](const auto* in) {
      at::parallel_for(0, rows, std::max<int64_t>(1, kGrain / keys), [&](int64_t begin, int64_t end) {
        scores_forward(in, mask_bias.data_ptr<float>(), scores.data_ptr<float>(), begin, end, keys, rows_per_sequence,
                       static_cast<float>(scale));
      });
    };
    if (products.scalar_type() == torch::kBFloat16)
      run(bf16::bits(products));
    else
      run(products.data_ptr<float>());
    return scores;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    const torch::Tensor grad = grad_outputs[0].contiguous();
    const auto scale = static_cast<float>(ctx->saved_data["scale"].toDouble());
    const auto dtype = static_cast<torch::ScalarType>(ctx->saved_data["dtype"].toInt());
    torch::Tensor grad_products = torch::empty(grad.sizes(), grad.options().dtype(dtype));
    auto run = [&](auto* out) {
      at::parallel_for(0, grad.numel(), kGrain, [&](int64_t begin, int64_t end) {
        scores_backward(grad.data_ptr<float>(), out, begin, end, scale);
      });
    };
    if (dtype == torch::kBFloat16)
      run(bf16::bits(grad_products));
    else
      run(grad_products.data_ptr<float>());
    return {grad_products, torch::Tensor(), torch::Tensor()};
  }
};

#if MPT_AVX512_KERNELS
using avx512::kLanes;
using avx512::load;
using avx512::store;

constexpr int64_t kMaxKeys = 4096;  // a row's softmax fits a 16 KB stack buffer when backward does not need it

// SplitMix64's finaliser (models::mix) on 8 lanes.
MPT_AVX512_BF16 inline __m512i mix8(__m512i z) {
  z = _mm512_mullo_epi64(_mm512_xor_si512(z, _mm512_srli_epi64(z, 30)), _mm512_set1_epi64(0xbf58476d1ce4e5b9LL));
  z = _mm512_mullo_epi64(_mm512_xor_si512(z, _mm512_srli_epi64(z, 27)), _mm512_set1_epi64(0x94d049bb133111ebLL));
  return _mm512_xor_si512(z, _mm512_srli_epi64(z, 31));
}

// The dropout factors (scale where kept, else 0) of the 16 elements from `index`: mix(seed + i) < threshold.
MPT_AVX512_BF16 inline __m512 keep_factors(const DropoutMask& mask, uint64_t index) {
  const __m512i first = _mm512_add_epi64(_mm512_set1_epi64(static_cast<int64_t>(mask.seed + index)),
                                         _mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0));
  const __m512i second = _mm512_add_epi64(first, _mm512_set1_epi64(8));
  const __m512i threshold = _mm512_set1_epi64(static_cast<int64_t>(mask.threshold));
  const __mmask16 kept = static_cast<__mmask16>(_mm512_cmplt_epu64_mask(mix8(first), threshold) |
                                                (_mm512_cmplt_epu64_mask(mix8(second), threshold) << 8));
  return _mm512_maskz_mov_ps(kept, _mm512_set1_ps(mask.scale));
}

// Rows [begin, end) of the (B * h * S, S) matrices; row r belongs to sequence r / rows_per_sequence. softmax
// (FP32) is written when backward needs it, else each row goes through a stack buffer. mask is null without
// dropout.
template <typename P, typename Out>
MPT_AVX512_BF16 void probabilities_forward(const P* __restrict products, const float* __restrict mask_bias,
                                           float* __restrict softmax, Out* __restrict probs, int64_t begin, int64_t end,
                                           int64_t keys, int64_t rows_per_sequence, float scale,
                                           const DropoutMask* mask) {
  alignas(64) float row_buffer[kMaxKeys];
  const __m512 scale_v = _mm512_set1_ps(scale);
  for (int64_t row = begin; row < end; ++row) {
    const float* bias = mask_bias + (row / rows_per_sequence) * keys;
    const P* in = products + row * keys;
    float* y = softmax ? softmax + row * keys : row_buffer;
    Out* out = probs + row * keys;
    __m512 max_v = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
    for (int64_t j = 0; j < keys; j += kLanes) {
      const __m512 score = _mm512_fmadd_ps(scale_v, load(in + j), load(bias + j));
      store(y + j, score);
      max_v = _mm512_max_ps(max_v, score);
    }
    // A NaN score is lost from the maximum but not from the sum below: the row becomes NaN, as ATen's does.
    const __m512 row_max = avx512::horizontal_max(max_v);
    __m512 sum_v = _mm512_setzero_ps();
    for (int64_t j = 0; j < keys; j += kLanes) {
      const __m512 e = avx512::exp(_mm512_sub_ps(load(y + j), row_max));
      store(y + j, e);
      sum_v = _mm512_add_ps(sum_v, e);
    }
    const __m512 inverse = _mm512_div_ps(_mm512_set1_ps(1.0f), avx512::horizontal_sum(sum_v));
    for (int64_t j = 0; j < keys; j += kLanes) {
      __m512 value = _mm512_mul_ps(load(y + j), inverse);
      store(y + j, value);
      if (mask) value = _mm512_mul_ps(value, keep_factors(*mask, static_cast<uint64_t>(row * keys + j)));
      store(out + j, value);
    }
  }
}

// The 16 gradients from g through the dropout mask (recomputed; mask is null without dropout); index is g's.
template <typename G>
MPT_AVX512_BF16 inline __m512 through_mask(const G* g, const DropoutMask* mask, int64_t index) {
  const __m512 value = load(g);
  return mask ? _mm512_mul_ps(value, keep_factors(*mask, static_cast<uint64_t>(index))) : value;
}

// d products = scale * y * (g - sum(g * y)) per row, with g the incoming gradient through the dropout mask.
template <typename G, typename P>
MPT_AVX512_BF16 void probabilities_backward(const G* __restrict grad, const float* __restrict softmax,
                                            P* __restrict grad_products, int64_t begin, int64_t end, int64_t keys,
                                            float scale, const DropoutMask* mask) {
  const __m512 scale_v = _mm512_set1_ps(scale);
  for (int64_t row = begin; row < end; ++row) {
    const G* g_row = grad + row * keys;
    const float* y = softmax + row * keys;
    __m512 dot_v = _mm512_setzero_ps();
    for (int64_t j = 0; j < keys; j += kLanes)
      dot_v = _mm512_fmadd_ps(through_mask(g_row + j, mask, row * keys + j), load(y + j), dot_v);
    const __m512 dot = avx512::horizontal_sum(dot_v);
    for (int64_t j = 0; j < keys; j += kLanes) {
      const __m512 g = through_mask(g_row + j, mask, row * keys + j);
      const __m512 d_score = _mm512_mul_ps(load(y + j), _mm512_sub_ps(g, dot));
      store(grad_products + row * keys + j, _mm512_mul_ps(scale_v, d_score));
    }
  }
}

struct AttentionProbabilitiesFunction : public torch::autograd::Function<AttentionProbabilitiesFunction> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& products,
                               const torch::Tensor& mask_bias, double scale, double p, bool training,
                               torch::ScalarType dtype, bool keep_softmax) {
    const bool drop = training && p > 0.0;
    const DropoutMask mask = drop ? DropoutMask::draw(p) : DropoutMask{0, 0, 1.0f};
    if (drop) mask.save(ctx);
    ctx->saved_data["drop"] = drop;
    ctx->saved_data["score_scale"] = scale;
    ctx->saved_data["products_dtype"] = static_cast<int64_t>(products.scalar_type());
    const int64_t keys = products.size(3), rows = products.numel() / keys;
    const int64_t rows_per_sequence = products.size(1) * products.size(2);
    torch::Tensor softmax =
        keep_softmax ? torch::empty(products.sizes(), products.options().dtype(torch::kFloat)) : torch::Tensor();
    torch::Tensor probs = torch::empty(products.sizes(), products.options().dtype(dtype));
    float* softmax_data = keep_softmax ? softmax.data_ptr<float>() : nullptr;
    bf16::with_data(products, [&](const auto* in) {
      bf16::with_mutable_data(probs, [&](auto* out) {
        at::parallel_for(0, rows, std::max<int64_t>(1, kGrain / keys), [&](int64_t begin, int64_t end) {
          probabilities_forward(in, mask_bias.data_ptr<float>(), softmax_data, out, begin, end, keys, rows_per_sequence,
                                static_cast<float>(scale), drop ? &mask : nullptr);
        });
      });
    });
    if (keep_softmax) ctx->save_for_backward({softmax});
    return probs;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    const torch::Tensor softmax = ctx->get_saved_variables()[0];
    const torch::Tensor grad = grad_outputs[0].contiguous();
    const bool drop = ctx->saved_data["drop"].toBool();
    const DropoutMask mask = drop ? DropoutMask::load(ctx) : DropoutMask{0, 0, 1.0f};
    const auto scale = static_cast<float>(ctx->saved_data["score_scale"].toDouble());
    const auto dtype = static_cast<torch::ScalarType>(ctx->saved_data["products_dtype"].toInt());
    const int64_t keys = softmax.size(3), rows = softmax.numel() / keys;
    torch::Tensor grad_products = torch::empty(softmax.sizes(), softmax.options().dtype(dtype));
    bf16::with_data(grad, [&](const auto* g) {
      bf16::with_mutable_data(grad_products, [&](auto* out) {
        at::parallel_for(0, rows, std::max<int64_t>(1, kGrain / keys), [&](int64_t begin, int64_t end) {
          probabilities_backward(g, softmax.data_ptr<float>(), out, begin, end, keys, scale, drop ? &mask : nullptr);
        });
      });
    });
    return {grad_products,   torch::Tensor(), torch::Tensor(), torch::Tensor(),
            torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};
#endif  // MPT_AVX512_KERNELS

bool fusable_scores(const torch::Tensor& products, const torch::Tensor& mask_bias) {
  return products.device().is_cpu() && products.dim() == 4 && products.is_contiguous() &&
         bf16::fp32_or_bf16(products) && mask_bias.device().is_cpu() && mask_bias.scalar_type() == torch::kFloat &&
         mask_bias.is_contiguous() && !mask_bias.requires_grad() &&
         mask_bias.sizes() == torch::IntArrayRef({products.size(0), 1, 1, products.size(3)});
}

}  // namespace

torch::Tensor masked_scores(const torch::Tensor& products, const torch::Tensor& mask_bias, double scale) {
  if (!fusable_scores(products, mask_bias)) return torch::add(mask_bias, products, scale);
  return MaskedScoresFunction::apply(products, mask_bias, scale);
}

torch::Tensor attention_probabilities(const torch::Tensor& products, const torch::Tensor& mask_bias, double scale,
                                      double p, bool training, torch::ScalarType dtype) {
#if MPT_AVX512_KERNELS
  const bool fusable = avx512_bf16_kernels() && fusable_scores(products, mask_bias) && p < 1.0 &&
                       products.size(3) % kLanes == 0 && products.size(3) <= kMaxKeys &&
                       (dtype == torch::kFloat || dtype == torch::kBFloat16);
  if (fusable) {
    const bool keep_softmax = torch::GradMode::is_enabled() && products.requires_grad();
    return AttentionProbabilitiesFunction::apply(products, mask_bias, scale, p, training, dtype, keep_softmax);
  }
#endif
  return dropout_to(torch::softmax(masked_scores(products, mask_bias, scale), -1), p, training, dtype);
}

}  // namespace mpt::ops
