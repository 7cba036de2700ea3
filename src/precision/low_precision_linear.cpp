#include "precision/low_precision_linear.h"

#include <ATen/autocast_mode.h>

namespace mpt::precision {
namespace {

struct LowPrecisionLinearFunction : public torch::autograd::Function<LowPrecisionLinearFunction> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& weight, const c10::optional<torch::Tensor>& bias, LayerGemms* gemms,
                               bool record) {
    c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);  // the format picks its dtypes
    torch::autograd::variable_list saved;
    torch::Tensor out = gemms->forward(x.reshape({-1, x.size(-1)}), weight, record, saved);  // (M, N)
    if (bias) out.add_(bias->to(torch::kBFloat16));
    ctx->save_for_backward(saved);
    ctx->saved_data["gemms"] = reinterpret_cast<int64_t>(gemms);
    ctx->saved_data["x_shape"] = x.sizes().vec();
    ctx->saved_data["x_dtype"] = x.scalar_type();
    ctx->saved_data["w_dtype"] = weight.scalar_type();
    ctx->saved_data["out_features"] = weight.size(0);
    ctx->saved_data["bias_dtype"] = bias ? bias->scalar_type() : torch::kFloat;
    ctx->saved_data["has_bias"] = bias.has_value();
    std::vector<int64_t> shape = x.sizes().vec();
    shape.back() = weight.size(0);
    return out.view(shape);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    auto* gemms = reinterpret_cast<LayerGemms*>(ctx->saved_data["gemms"].toInt());
    const torch::Tensor g = grads[0].reshape({-1, ctx->saved_data["out_features"].toInt()});  // (M, N)
    auto [grad_x, grad_w] = gemms->backward(g, ctx->get_saved_variables(), ctx->saved_data["x_dtype"].toScalarType(),
                                            ctx->saved_data["w_dtype"].toScalarType());
    torch::Tensor grad_b;
    if (ctx->saved_data["has_bias"].toBool())
      grad_b = g.to(torch::kFloat).sum(0).to(ctx->saved_data["bias_dtype"].toScalarType());
    return {grad_x.view(ctx->saved_data["x_shape"].toIntVector()), grad_w, grad_b, torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor low_precision_linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                                   LayerGemms& gemms, bool record) {
  // An undefined tensor cannot be a custom Function's input; an empty optional can.
  return LowPrecisionLinearFunction::apply(
      x, weight, bias.defined() ? c10::optional<torch::Tensor>(bias) : c10::nullopt, &gemms, record);
}

std::vector<GemmEligibility> linear_eligibility(torch::nn::Module& model, const ModulePolicy& policy,
                                                const ShapeRule& shape_rule) {
  std::vector<GemmEligibility> layers;
  for (const auto& item : model.named_modules("", /*include_self=*/false)) {
    const auto* linear = item.value()->as<torch::nn::Linear>();
    if (!linear) continue;
    GemmEligibility layer{item.key(), linear->options.in_features(), linear->options.out_features(), false, ""};
    layer.why_not = policy.runs_in_fp32(layer.name) ? "FP32: an FP32 island (precision.fp32_modules)"
                                                    : shape_rule(layer.in_features, layer.out_features);
    layer.low_precision = layer.why_not.empty();
    layers.push_back(std::move(layer));
  }
  return layers;
}

}  // namespace mpt::precision
