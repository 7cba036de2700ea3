// Fused attention scores (see attention_scores.h).
#include "models/attention_scores.h"

#include <ATen/Parallel.h>

#include "core/common/bf16_bits.h"

namespace mpt::models {
namespace {

// Rows [begin, end) of the (B * h * S, S) score matrix; row r belongs to sequence r / rows_per_sequence.
template <typename P>
__attribute__((target_clones("arch=cooperlake", "avx2", "default"))) void scores_forward(
    const P* __restrict products, const float* __restrict mask_bias, float* __restrict scores, int64_t begin,
    int64_t end, int64_t keys, int64_t rows_per_sequence, float scale) {
  for (int64_t row = begin; row < end; ++row) {
    const float* mask = mask_bias + (row / rows_per_sequence) * keys;
    const P* in = products + row * keys;
    float* out = scores + row * keys;
    for (int64_t j = 0; j < keys; ++j) out[j] = mask[j] + scale * bf16::widen(in[j]);
  }
}

template <typename P>
__attribute__((target_clones("arch=cooperlake", "avx2", "default"))) void scores_backward(
    const float* __restrict grad, P* __restrict grad_products, int64_t begin, int64_t end, float scale) {
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
        scores_forward(in, mask_bias.data_ptr<float>(), scores.data_ptr<float>(), begin, end, keys,
                       rows_per_sequence, static_cast<float>(scale));
      });
    };
    if (products.scalar_type() == torch::kBFloat16) run(bf16::bits(products));
    else run(products.data_ptr<float>());
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
    if (dtype == torch::kBFloat16) run(bf16::bits(grad_products));
    else run(grad_products.data_ptr<float>());
    return {grad_products, torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor masked_scores(const torch::Tensor& products, const torch::Tensor& mask_bias, double scale) {
  const bool fusable =
      products.device().is_cpu() && products.dim() == 4 && products.is_contiguous() &&
      bf16::fp32_or_bf16(products) &&
      mask_bias.device().is_cpu() && mask_bias.scalar_type() == torch::kFloat && mask_bias.is_contiguous() &&
      !mask_bias.requires_grad() &&
      mask_bias.sizes() == torch::IntArrayRef({products.size(0), 1, 1, products.size(3)});
  if (!fusable) return torch::add(mask_bias, products, scale);
  return MaskedScoresFunction::apply(products, mask_bias, scale);
}

}  // namespace mpt::models
