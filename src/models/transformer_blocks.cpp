#include "models/transformer_blocks.h"

#include <cmath>

#include "ops/attention_scores.h"

namespace mpt::models {

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
