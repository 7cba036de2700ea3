// MXFP8 Linear layers (see mxfp8.h). M = rows of the input (batch x positions), K = in_features, N = out_features.
#include "precision/mxfp8.h"

#include <ATen/autocast_mode.h>

#include "ops/mxfp8.h"

namespace mpt::precision {
namespace {

// a (P, R) times b (Q, R) transposed through MXFP8, both blocked along R. When R is not a multiple of a block, both
// are padded with zeros to the next one: the last block is then a partial one, as the MX spec allows, since zeros
// change neither a block's amax nor the sums.
torch::Tensor mx_product(const torch::Tensor& a, const torch::Tensor& b, torch::ScalarType out) {
  const int64_t pad = (ops::kMxBlock - a.size(1) % ops::kMxBlock) % ops::kMxBlock;
  if (pad == 0) return ops::mxfp8_mm(ops::to_mxfp8(a), ops::to_mxfp8(b), out);
  return ops::mxfp8_mm(ops::to_mxfp8(torch::constant_pad_nd(a, {0, pad})),
                       ops::to_mxfp8(torch::constant_pad_nd(b, {0, pad})), out);
}

struct Mxfp8LinearFunction : public torch::autograd::Function<Mxfp8LinearFunction> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& weight, const c10::optional<torch::Tensor>& bias) {
    c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);  // our GEMM picks its dtypes
    const torch::Tensor rows = x.reshape({-1, x.size(-1)});                         // (M, K)
    torch::Tensor out = mx_product(rows, weight, torch::kBFloat16);                 // (M, N)
    if (bias) out.add_(bias->to(torch::kBFloat16));
    ctx->save_for_backward({rows, weight});
    ctx->saved_data["x_shape"] = x.sizes().vec();
    ctx->saved_data["bias_dtype"] = bias ? bias->scalar_type() : torch::kFloat;
    ctx->saved_data["has_bias"] = bias.has_value();
    std::vector<int64_t> shape = x.sizes().vec();
    shape.back() = weight.size(0);
    return out.view(shape);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &rows = saved[0], &weight = saved[1];
    const torch::Tensor g = grads[0].reshape({-1, weight.size(0)});  // (M, N)
    // dX = dY W: (M, N) x (K, N)^T, blocked along N.
    const torch::Tensor grad_x =
        mx_product(g, weight.t().contiguous(), rows.scalar_type()).view(ctx->saved_data["x_shape"].toIntVector());
    // dW = dY^T X: (N, M) x (K, M)^T, blocked along M, the batch's rows.
    const torch::Tensor grad_w = mx_product(g.t().contiguous(), rows.t().contiguous(), weight.scalar_type());
    torch::Tensor grad_b;
    if (ctx->saved_data["has_bias"].toBool())
      grad_b = g.to(torch::kFloat).sum(0).to(ctx->saved_data["bias_dtype"].toScalarType());
    return {grad_x, grad_w, grad_b};
  }
};

}  // namespace

std::vector<GemmEligibility> mxfp8_eligibility(torch::nn::Module& model, const ModulePolicy& policy) {
  std::vector<GemmEligibility> layers;
  for (const auto& item : model.named_modules("", /*include_self=*/false)) {
    const auto* linear = item.value()->as<torch::nn::Linear>();
    if (!linear) continue;
    GemmEligibility layer{item.key(), linear->options.in_features(), linear->options.out_features(), false, ""};
    if (policy.runs_in_fp32(layer.name)) layer.why_not = "FP32: an FP32 island (precision.fp32_modules)";
    layer.low_precision = layer.why_not.empty();
    layers.push_back(std::move(layer));
  }
  return layers;
}

Mxfp8Gemms::Mxfp8Gemms(torch::nn::Module& model, const ModulePolicy& policy)
    : eligibility_(mxfp8_eligibility(model, policy)) {
  const auto modules = model.named_modules("", /*include_self=*/false);
  for (const GemmEligibility& layer : eligibility_)
    if (layer.low_precision)
      weights_.insert(modules[layer.name]->as<torch::nn::Linear>()->weight.unsafeGetTensorImpl());
}

torch::Tensor Mxfp8Gemms::linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                                 bool /*recomputing: block scales keep no record*/) {
  if (!weights_.count(weight.unsafeGetTensorImpl())) return {};
  // An undefined tensor cannot be a custom Function's input; an empty optional can.
  return Mxfp8LinearFunction::apply(x, weight, bias.defined() ? c10::optional<torch::Tensor>(bias) : c10::nullopt);
}

}  // namespace mpt::precision
