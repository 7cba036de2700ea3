// FP8 Linear layers (see fp8.h): the scales, the layers a model puts in FP8, and their GEMMs on FP8 operands.
#include "precision/fp8.h"

#include "precision/gemm_formats.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

namespace mpt::precision {
namespace {

constexpr float kFp32Max = std::numeric_limits<float>::max();

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

// max / amax / 2^margin where amax is positive and finite, else `fallback`. As Transformer Engine does, a scale
// past FP32's range (an amax below ~1e-36) is FP32's largest: an infinite one would cast a zero to 0 x Inf = NaN.
torch::Tensor scale_from_amax(const torch::Tensor& amax, const torch::Tensor& fallback, ops::Float8 format,
                              int64_t margin) {
  const double max = ops::float8_format(format).max / std::ldexp(1.0, static_cast<int>(margin));
  const torch::Tensor usable = amax.gt(0).logical_and(torch::isfinite(amax));
  return torch::where(usable, (max / amax).clamp_max(kFp32Max), fallback);
}

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
  return linear_eligibility(model, policy, [](int64_t in_features, int64_t out_features) {
    if (in_features % 16 != 0) return fmt::format("BF16: in_features {} not a multiple of 16", in_features);
    if (out_features % 16 != 0) return fmt::format("BF16: out_features {} not a multiple of 16", out_features);
    return std::string();
  });
}

torch::Tensor Fp8Layer::forward(const torch::Tensor& rows, const torch::Tensor& w, bool record,
                                torch::autograd::variable_list& saved) {
  const torch::Tensor x_scale = input.scale_for(rows, record);
  const torch::Tensor w_scale = weight.scale_for(w, record);
  const torch::Tensor x_fp8 = ops::to_float8(rows, x_scale, ops::Float8::kE4M3);
  const torch::Tensor w_fp8 = ops::to_float8(w, w_scale, ops::Float8::kE4M3);
  saved = {x_fp8, w_fp8, x_scale, w_scale};
  return ops::scaled_gemm(x_fp8, x_scale, w_fp8, w_scale, torch::kBFloat16);
}

std::pair<torch::Tensor, torch::Tensor> Fp8Layer::backward(const torch::Tensor& g,
                                                           const torch::autograd::variable_list& saved,
                                                           torch::ScalarType x_dtype, torch::ScalarType w_dtype) {
  const torch::Tensor &x_fp8 = saved[0], &w_fp8 = saved[1], &x_scale = saved[2], &w_scale = saved[3];
  const torch::Tensor g_scale = grad_output.scale_for(g, /*record=*/true);
  const torch::Tensor g_fp8 = ops::to_float8(g, g_scale, ops::Float8::kE5M2);
  // dX = dY W (M, K); dW = dY^T X (N, K): scaled_gemm takes both operands row-major, the second transposed.
  return {ops::scaled_gemm(g_fp8, g_scale, w_fp8.t().contiguous(), w_scale, x_dtype),
          ops::scaled_gemm(g_fp8.t().contiguous(), g_scale, x_fp8.t().contiguous(), x_scale, w_dtype)};
}

Fp8Gemms::Fp8Gemms(const Fp8Config& config, torch::nn::Module& model, const ModulePolicy& policy, torch::Device device)
    : config_(config), eligibility_(fp8_eligibility(model, policy)) {
  const auto modules = model.named_modules("", /*include_self=*/false);
  for (const GemmEligibility& verdict : eligibility_) {
    if (!verdict.low_precision) continue;
    auto layer = std::make_unique<Fp8Layer>(verdict.name, Fp8Scale(ops::Float8::kE4M3, config_, device),
                                            Fp8Scale(ops::Float8::kE4M3, config_, device),
                                            Fp8Scale(ops::Float8::kE5M2, config_, device));
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

GemmFormatKind fp8_format() {
  return {"FP8",
          {"delayed", "current"},
          fp8_eligibility,
          [](const Fp8Config& config, torch::nn::Module& model, const ModulePolicy& policy, torch::Device device) {
            return std::make_unique<Fp8Gemms>(config, model, policy, device);
          }};
}

torch::Tensor Fp8Gemms::linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                               bool recomputing) {
  Fp8Layer* layer = layer_for(weight);
  if (!layer) return {};
  return low_precision_linear(x, weight, bias, *layer, torch::GradMode::is_enabled() && !recomputing);
}

}  // namespace mpt::precision
