// FP8 Linear layers (see fp8.h): the scales, the layers a model puts in FP8, and the autograd function whose
// forward and backward GEMMs run on FP8 operands.
#include "precision/fp8.h"

#include <ATen/autocast_mode.h>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

namespace mpt::precision {
namespace {

constexpr float kFp32Max = std::numeric_limits<float>::max();

// max / amax / 2^margin where amax is positive and finite, else `fallback`. As Transformer Engine does, a scale
// past FP32's range (an amax below ~1e-36) is FP32's largest: an infinite one would cast a zero to 0 x Inf = NaN.
torch::Tensor scale_from_amax(const torch::Tensor& amax, const torch::Tensor& fallback, ops::Float8 format,
                              int64_t margin) {
  const double max = ops::float8_format(format).max / std::ldexp(1.0, static_cast<int>(margin));
  const torch::Tensor usable = amax.gt(0).logical_and(torch::isfinite(amax));
  return torch::where(usable, (max / amax).clamp_max(kFp32Max), fallback);
}

// Why a saved scale or amax history cannot be resumed from, or "".
std::string state_problem(const std::string& name, const torch::Tensor& tensor, bool is_scale) {
  const torch::Tensor values = tensor.detach().to(torch::kCPU, torch::kDouble).reshape({-1});
  const auto* v = values.data_ptr<double>();
  for (int64_t i = 0; i < values.numel(); ++i) {
    const bool ok =
        is_scale ? v[i] >= std::numeric_limits<float>::min() && v[i] <= kFp32Max : v[i] >= 0 && v[i] <= kFp32Max;
    if (!ok)
      return fmt::format(
          "tensor '{}'{} = {:g}: expected {}", name, is_scale ? "" : fmt::format(" [{}]", i), v[i],
          is_scale ? "a scale in FP32's normal positive range [1.17549e-38, 3.40282e+38]" : "an amax >= 0 and finite");
  }
  return "";
}

// A layer's three scales with the names they go by in checkpoints and events.
std::array<std::pair<const char*, Fp8Scale*>, 3> roles(Fp8Layer& layer) {
  return {{{"input", &layer.input}, {"weight", &layer.weight}, {"grad_output", &layer.grad_output}}};
}

}  // namespace

Fp8Scale::Fp8Scale(ops::Float8 format_, const Fp8Config& config, torch::Device device)
    : format(format_),
      history(torch::zeros({config.amax_history}, torch::TensorOptions().dtype(torch::kFloat).device(device))),
      scale(torch::ones({}, torch::TensorOptions().dtype(torch::kFloat).device(device))),
      step_amax(torch::zeros({}, torch::TensorOptions().dtype(torch::kFloat).device(device))),
      saturated(torch::zeros({}, torch::TensorOptions().dtype(torch::kLong).device(device))),
      config_(config) {}

torch::Tensor Fp8Scale::scale_for(const torch::Tensor& x, bool record) {
  const bool current = config_.recipe == "current";
  torch::Tensor amax;
  if (record || current) amax = x.detach().abs().amax().to(torch::kFloat);
  torch::Tensor use = scale;
  if (current) {
    use = scale_from_amax(amax, scale, format, config_.margin);
    if (record) scale.copy_(use);
  }
  if (record) {
    step_amax = torch::fmax(step_amax, amax);  // fmax: a NaN amax does not hide the finite ones
    saturated.add_(ops::count_saturated(x.detach(), use, format));
  }
  return use;
}

void Fp8Scale::update() {
  const torch::Tensor amax = torch::where(torch::isfinite(step_amax), step_amax, torch::zeros_like(step_amax));
  history.copy_(torch::cat({amax.view({1}), history.slice(0, 0, history.size(0) - 1)}));
  if (config_.recipe == "delayed") scale.copy_(scale_from_amax(history.max(), scale, format, config_.margin));
  step_amax.zero_();
}

std::vector<GemmEligibility> fp8_eligibility(torch::nn::Module& model, const ModulePolicy& policy) {
  std::vector<GemmEligibility> layers;
  for (const auto& item : model.named_modules("", /*include_self=*/false)) {
    const auto* linear = item.value()->as<torch::nn::Linear>();
    if (!linear) continue;
    GemmEligibility layer{item.key(), linear->options.in_features(), linear->options.out_features(), false, ""};
    if (policy.runs_in_fp32(layer.name))
      layer.why_not = "FP32: an FP32 island (precision.fp32_modules)";
    else if (layer.in_features % 16 != 0)
      layer.why_not = fmt::format("BF16: in_features {} not a multiple of 16", layer.in_features);
    else if (layer.out_features % 16 != 0)
      layer.why_not = fmt::format("BF16: out_features {} not a multiple of 16", layer.out_features);
    layer.low_precision = layer.why_not.empty();
    layers.push_back(std::move(layer));
  }
  return layers;
}

Fp8Gemms::Fp8Gemms(const Fp8Config& config, torch::nn::Module& model, const ModulePolicy& policy, torch::Device device)
    : config_(config), eligibility_(fp8_eligibility(model, policy)) {
  const auto modules = model.named_modules("", /*include_self=*/false);
  for (const GemmEligibility& verdict : eligibility_) {
    if (!verdict.low_precision) continue;
    auto layer = std::make_unique<Fp8Layer>(Fp8Layer{verdict.name, Fp8Scale(ops::Float8::kE4M3, config_, device),
                                                     Fp8Scale(ops::Float8::kE4M3, config_, device),
                                                     Fp8Scale(ops::Float8::kE5M2, config_, device)});
    const torch::Tensor& weight = modules[verdict.name]->as<torch::nn::Linear>()->weight;
    by_weight_[weight.unsafeGetTensorImpl()] = layer.get();
    layers_.push_back(std::move(layer));
  }
  reported_.assign(layers_.size() * 3, 1.0);
}

Fp8Layer* Fp8Gemms::layer_for(const torch::Tensor& weight) {
  const auto found = by_weight_.find(weight.unsafeGetTensorImpl());
  return found == by_weight_.end() ? nullptr : found->second;
}

void Fp8Gemms::after_step(const AgreeMax& agree_max) {
  std::vector<Fp8Scale*> scales;
  for (auto& layer : layers_)
    for (const auto& [role, scale] : roles(*layer)) scales.push_back(scale);
  if (agree_max && !scales.empty()) {
    std::vector<torch::Tensor> amaxes;
    for (Fp8Scale* scale : scales) amaxes.push_back(scale->step_amax.view({1}));
    torch::Tensor all = torch::cat(amaxes);
    agree_max(all);  // one all-reduce for every tensor of the model
    for (size_t i = 0; i < scales.size(); ++i) scales[i]->step_amax = all[static_cast<int64_t>(i)].clone();
  }
  for (Fp8Scale* scale : scales) scale->update();
}

std::vector<std::pair<std::string, torch::Tensor>> Fp8Gemms::state() {
  std::vector<std::pair<std::string, torch::Tensor>> named;
  for (auto& layer : layers_) {
    for (const auto& [role, scale] : roles(*layer)) {
      named.emplace_back(fmt::format("fp8.{}.{}.history", layer->name, role), scale->history);
      named.emplace_back(fmt::format("fp8.{}.{}.scale", layer->name, role), scale->scale);
    }
  }
  return named;
}

std::string Fp8Gemms::check_state(const NamedTensors& saved) const {
  for (const auto& layer : layers_) {
    for (const auto& [role, scale] : roles(*layer)) {
      const std::string history_name = fmt::format("fp8.{}.{}.history", layer->name, role);
      const std::string scale_name = fmt::format("fp8.{}.{}.scale", layer->name, role);
      const torch::Tensor* history = saved.find(history_name);
      const torch::Tensor* value = saved.find(scale_name);
      if (!history || !value) continue;  // the loader names a missing tensor itself
      for (const auto& problem :
           {state_problem(history_name, *history, false), state_problem(scale_name, *value, true)})
        if (!problem.empty()) return problem;
      // Delayed scaling derives the scale from the history it was saved with: any other value was not written by mpt.
      if (config_.recipe != "delayed" || history->max().item<float>() == 0.0f) continue;
      const torch::Tensor expected =
          scale_from_amax(history->max().to(torch::kFloat), *value, scale->format, config_.margin);
      if (!torch::equal(expected, value->to(torch::kFloat)))
        return fmt::format(
            "tensor '{}' = {:g}, but its amax history gives {:g} (delayed scaling): the FP8 state "
            "was not written by mpt",
            scale_name, value->item<double>(), expected.item<double>());
    }
  }
  return "";
}

GemmReport Fp8Gemms::report() {
  GemmReport report;
  std::array<std::vector<double>, 3> scales;  // per role, over the layers
  for (size_t i = 0; i < layers_.size(); ++i) {
    const auto named = roles(*layers_[i]);
    for (size_t r = 0; r < named.size(); ++r) {
      Fp8Scale& scale = *named[r].second;
      const double now = scale.scale.item<double>();
      scales[r].push_back(now);
      const int64_t saturated = scale.saturated.item<int64_t>();
      double& before = reported_[i * 3 + r];
      if (saturated > 0 || now > 2 * before || now < before / 2) {
        report.events.push_back({fmt::format("{}.{}", layers_[i]->name, named[r].first), now, before,
                                 scale.history[0].item<double>(), saturated});
        before = now;
      }
      scale.saturated.zero_();
    }
  }
  const char* keys[] = {"input_scale", "weight_scale", "grad_output_scale"};
  for (size_t r = 0; r < scales.size() && !layers_.empty(); ++r)
    report.ranges.push_back({keys[r],
                             {*std::min_element(scales[r].begin(), scales[r].end()),
                              *std::max_element(scales[r].begin(), scales[r].end())}});
  return report;
}

NamedTensors Fp8Gemms::report_state() const {
  std::vector<int64_t> saturated;
  for (const auto& layer : layers_)
    for (const auto& [role, scale] : roles(*layer)) saturated.push_back(scale->saturated.item<int64_t>());
  NamedTensors state;
  state.insert("fp8.reported", torch::tensor(reported_, torch::kDouble));
  state.insert("fp8.saturated", torch::tensor(saturated, torch::kLong));
  return state;
}

void Fp8Gemms::restore_report_state(const NamedTensors& saved) {
  const torch::Tensor* reported = saved.find("fp8.reported");
  const torch::Tensor* saturated = saved.find("fp8.saturated");
  const auto count = static_cast<int64_t>(reported_.size());
  if (!reported || !saturated || reported->numel() != count || saturated->numel() != count) return;
  const torch::Tensor values = reported->to(torch::kDouble).contiguous(), counts = saturated->to(torch::kLong);
  for (int64_t i = 0; i < count; ++i) reported_[static_cast<size_t>(i)] = values[i].item<double>();
  int64_t i = 0;
  for (auto& layer : layers_)
    for (const auto& [role, scale] : roles(*layer)) scale->saturated.fill_(counts[i++].item<int64_t>());
}

namespace {

// y = x W^T + b with x and W cast to E4M3; backward casts the output gradient to E5M2. Saves the FP8 operands
// (a quarter of FP32's bytes) for backward.
struct Fp8LinearFunction : public torch::autograd::Function<Fp8LinearFunction> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& weight, const c10::optional<torch::Tensor>& bias, Fp8Layer* layer,
                               bool record) {
    c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);  // our GEMM picks its dtypes
    const torch::Tensor rows = x.reshape({-1, x.size(-1)});
    const torch::Tensor x_scale = layer->input.scale_for(rows, record);
    const torch::Tensor w_scale = layer->weight.scale_for(weight, record);
    const torch::Tensor x_fp8 = ops::to_float8(rows, x_scale, ops::Float8::kE4M3);
    const torch::Tensor w_fp8 = ops::to_float8(weight, w_scale, ops::Float8::kE4M3);
    torch::Tensor out = ops::scaled_gemm(x_fp8, x_scale, w_fp8, w_scale, torch::kBFloat16);
    if (bias) out.add_(bias->to(torch::kBFloat16));
    ctx->save_for_backward({x_fp8, w_fp8, x_scale, w_scale});
    ctx->saved_data["layer"] = reinterpret_cast<int64_t>(layer);
    ctx->saved_data["x_shape"] = x.sizes().vec();
    ctx->saved_data["x_dtype"] = x.scalar_type();
    ctx->saved_data["w_dtype"] = weight.scalar_type();
    ctx->saved_data["bias_dtype"] = bias ? bias->scalar_type() : torch::kFloat;
    ctx->saved_data["has_bias"] = bias.has_value();
    std::vector<int64_t> shape = x.sizes().vec();
    shape.back() = weight.size(0);
    return out.view(shape);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &x_fp8 = saved[0], &w_fp8 = saved[1], &x_scale = saved[2], &w_scale = saved[3];
    auto* layer = reinterpret_cast<Fp8Layer*>(ctx->saved_data["layer"].toInt());
    const torch::Tensor g = grads[0].reshape({-1, w_fp8.size(0)});
    const torch::Tensor g_scale = layer->grad_output.scale_for(g, /*record=*/true);
    const torch::Tensor g_fp8 = ops::to_float8(g, g_scale, ops::Float8::kE5M2);
    const auto x_dtype = ctx->saved_data["x_dtype"].toScalarType();
    const auto w_dtype = ctx->saved_data["w_dtype"].toScalarType();
    // dX = dY W (M, K); dW = dY^T X (N, K): scaled_gemm takes both operands row-major, the second transposed.
    torch::Tensor grad_x = ops::scaled_gemm(g_fp8, g_scale, w_fp8.t().contiguous(), w_scale, x_dtype)
                               .view(ctx->saved_data["x_shape"].toIntVector());
    torch::Tensor grad_w = ops::scaled_gemm(g_fp8.t().contiguous(), g_scale, x_fp8.t().contiguous(), x_scale, w_dtype);
    torch::Tensor grad_b;
    if (ctx->saved_data["has_bias"].toBool())
      grad_b = grads[0]
                   .reshape({-1, w_fp8.size(0)})
                   .to(torch::kFloat)
                   .sum(0)
                   .to(ctx->saved_data["bias_dtype"].toScalarType());
    return {grad_x, grad_w, grad_b, torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor Fp8Gemms::linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                               bool recomputing) {
  Fp8Layer* layer = layer_for(weight);
  if (!layer) return {};
  // An undefined tensor cannot be a custom Function's input; an empty optional can.
  return Fp8LinearFunction::apply(x, weight, bias.defined() ? c10::optional<torch::Tensor>(bias) : c10::nullopt, layer,
                                  torch::GradMode::is_enabled() && !recomputing);
}

}  // namespace mpt::precision
