#include "models/transformer_blocks.h"

#include <cmath>

#include "ops/attention_scores.h"

namespace mpt::models {
namespace {

// h E^T + b as one autograd node whose weight gradient is computed as grad^T h: a contiguous (V, H) tensor of its
// own, into which autograd adds the lookup's sparse gradient in place. Through addmm(b, h, E^T) autograd returned the
// transpose of h^T grad, which cannot take an in-place add, so the sum became a dense (V, H) add against the grain
// (docs/findings.md).
struct TiedDecoderFunction : public torch::autograd::Function<TiedDecoderFunction> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& h,
                               const torch::Tensor& embedding, const c10::optional<torch::Tensor>& bias) {
    ctx->save_for_backward({h, embedding});
    ctx->saved_data["has_bias"] = bias.has_value();
    return bias ? torch::addmm(*bias, h, embedding.t()) : h.mm(embedding.t());  // (N, V)
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &h = saved[0], &embedding = saved[1], &grad = grad_outputs[0];
    const bool bias_grad = ctx->saved_data["has_bias"].toBool() && ctx->needs_input_grad(2);
    return {ctx->needs_input_grad(0) ? grad.mm(embedding) : torch::Tensor(),
            ctx->needs_input_grad(1) ? grad.t().mm(h) : torch::Tensor(), bias_grad ? grad.sum(0) : torch::Tensor()};
  }
};

}  // namespace

torch::Tensor tied_decoder(const torch::Tensor& h, const torch::Tensor& embedding, const torch::Tensor& bias) {
  return TiedDecoderFunction::apply(h, embedding, bias.defined() ? c10::optional<torch::Tensor>(bias) : c10::nullopt);
}

torch::Tensor attention_core(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                             const torch::Tensor& mask_bias, double p, bool training, Scores scores) {
  torch::Tensor probs;
  {
    // The probabilities go back to the compute dtype for the second product, through dropout: one fused pass on
    // CPU, five passes and four autograd nodes unfused.
    torch::Tensor products;  // (B, h, S, S)
    if (scores == Scores::kComputeDtype) products = torch::matmul(q, k.transpose(-2, -1));
    precision::Fp32Scope fp32(q.device().type());
    if (scores == Scores::kFp32) products = torch::matmul(q.to(torch::kFloat), k.to(torch::kFloat).transpose(-2, -1));
    probs = ops::attention_probabilities(products, mask_bias, 1.0 / std::sqrt(static_cast<double>(q.size(-1))), p,
                                         training, v.scalar_type());
  }
  return torch::matmul(probs, v);  // (B, h, S, d)
}

torch::Tensor split_heads(const torch::Tensor& x, int64_t heads) {
  return x.view({x.size(0), x.size(1), heads, x.size(2) / heads}).transpose(1, 2);
}

torch::Tensor merge_heads(const torch::Tensor& x) {
  return x.transpose(1, 2).reshape({x.size(0), x.size(2), x.size(1) * x.size(3)});
}

torch::Tensor layer_norm_through(const precision::ModuleRunner& runner, const torch::nn::LayerNorm& norm,
                                 const torch::Tensor& x) {
  return runner(x, [&](const torch::Tensor& h) {
    return torch::layer_norm(h, norm->options.normalized_shape(), norm->weight.to(h.scalar_type()),
                             norm->bias.to(h.scalar_type()), norm->options.eps());
  });
}

}  // namespace mpt::models
