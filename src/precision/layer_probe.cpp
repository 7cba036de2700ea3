// The numerics probe (see layer_probe.h).
#include "precision/layer_probe.h"

#include <cmath>
#include <limits>

#include "ops/linear.h"
#include "precision/autocast.h"
#include "precision/fp8.h"
#include "precision/mxfp8.h"

namespace mpt::precision {
namespace {

// y = x W^T + b under autocast in `dtype`, back in FP32: the kernels a mixed-precision run's projection takes.
// LibTorch has no FP16 GEMM on the CPU: there the FP16-rounded operands multiply in FP32 and the product is rounded
// to FP16, which is what an FP16 GEMM with FP32 accumulation returns.
torch::Tensor autocast_linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                              torch::ScalarType dtype) {
  if (dtype == torch::kHalf && x.device().is_cpu()) {
    const auto rounded = [&](const torch::Tensor& t) { return t.defined() ? t.to(dtype).to(torch::kFloat) : t; };
    return ops::linear(rounded(x), rounded(weight), rounded(bias)).to(dtype).to(torch::kFloat);
  }
  AutocastScope autocast(x.device().type(), dtype);
  return ops::linear(x, weight, bias).to(torch::kFloat);
}

std::unique_ptr<LowPrecisionGemms> format_gemms(NumericFormat format, torch::nn::Module& model, const Fp8Config& fp8,
                                                torch::Device device) {
  const ModulePolicy every_layer;  // islands are what the measurement decides, so none here
  if (format == NumericFormat::kFp8) return std::make_unique<Fp8Gemms>(fp8, model, every_layer, device);
  if (format == NumericFormat::kMxfp8) return std::make_unique<Mxfp8Gemms>(model, every_layer);
  return nullptr;  // BF16 and FP16: autocast's linear
}

}  // namespace

void ErrorSums::add(const torch::Tensor& reference, const torch::Tensor& candidate) {
  torch::NoGradGuard no_grad;
  // Norms accumulated in FP64 without an FP64 copy: a language model's logits are hundreds of MiB in FP32.
  const torch::Tensor r = reference.detach().to(torch::kFloat);
  const auto norm = [](const torch::Tensor& t) {
    return torch::linalg_vector_norm(t, 2, c10::nullopt, false, torch::kDouble);
  };
  const torch::Tensor norms = torch::stack({norm(r), norm(r - candidate.detach().to(torch::kFloat))}).cpu();
  signal += std::pow(norms[0].item<double>(), 2);
  const double difference = std::pow(norms[1].item<double>(), 2);
  noise += std::isfinite(difference) ? difference : std::numeric_limits<double>::infinity();  // Inf/NaN: all lost
  ++tensors;
}

double ErrorSums::sqnr_db() const {
  // Nothing compared, or only zeros (a zero-initialised head's logits): no ratio to give.
  if (tensors == 0 || (signal == 0 && noise == 0)) return std::numeric_limits<double>::quiet_NaN();
  if (noise == 0) return std::numeric_limits<double>::infinity();
  return 10.0 * std::log10(signal / noise);
}

double ErrorSums::relative() const {
  if (tensors == 0) return std::numeric_limits<double>::quiet_NaN();
  return signal > 0 ? std::sqrt(noise / signal) : (noise > 0 ? std::numeric_limits<double>::infinity() : 0.0);
}

LayerProbe::LayerProbe(torch::nn::Module& model, std::vector<NumericFormat> formats, const Fp8Config& fp8,
                       double loss_scale, torch::Device device)
    : formats_(std::move(formats)), fp8_(fp8), loss_scale_(loss_scale) {
  fp8_.recipe = "current";  // the scale delayed scaling reaches once its history holds this batch's amax
  for (NumericFormat format : formats_) format_gemms_.push_back(format_gemms(format, model, fp8_, device));
  for (const auto& item : model.named_modules("", /*include_self=*/false)) {
    modules_[item.key()] = item.value();
    const auto* linear = item.value()->as<torch::nn::Linear>();
    if (!linear) continue;
    LayerNumerics layer{item.key(), "Linear", linear->options.in_features(), linear->options.out_features()};
    layer.formats.resize(formats_.size());
    for (size_t f = 0; f < formats_.size(); ++f)
      if (format_gemms_[f])
        for (const GemmEligibility& verdict : format_gemms_[f]->eligibility())
          if (verdict.name == layer.name) layer.formats[f].why_not = verdict.why_not;
    by_weight_[linear->weight.unsafeGetTensorImpl()] = add_layer(std::move(layer), linear->weight);
  }
  // Projections by a weight of another module (a tied decoder reads the embeddings): found on their first call.
  for (const auto& item : model.named_parameters()) {
    if (by_weight_.count(item.value().unsafeGetTensorImpl()) || item.value().dim() != 2) continue;
    const std::string owner = item.key().substr(0, item.key().rfind('.'));
    functional_[item.value().unsafeGetTensorImpl()] = owner;
  }
}

size_t LayerProbe::add_layer(LayerNumerics layer, const torch::Tensor& weight) {
  layers_.push_back(std::move(layer));
  weights_.push_back(weight);
  reference_input_grads_.emplace_back();
  return layers_.size() - 1;
}

LayerProbe::~LayerProbe() = default;

void LayerProbe::reference(bool measure) {
  format_.reset();
  measure_ = measure;
  candidate_layers_.clear();
}

void LayerProbe::candidate(size_t format, std::set<std::string> layers, double grad_scale) {
  format_ = format;
  grad_scale_ = grad_scale;
  measure_ = false;
  candidate_layers_ = std::move(layers);
}

std::set<std::string> LayerProbe::eligible(size_t format) const {
  std::set<std::string> names;
  for (const LayerNumerics& layer : layers_)
    if (layer.formats[format].why_not.empty()) names.insert(layer.name);
  return names;
}

std::optional<size_t> LayerProbe::layer_index(const torch::Tensor& weight) {
  const void* impl = weight.unsafeGetTensorImpl();
  if (const auto found = by_weight_.find(impl); found != by_weight_.end()) return found->second;
  const auto owner = functional_.find(impl);
  if (owner == functional_.end()) return std::nullopt;
  LayerNumerics layer{owner->second, "Linear", weight.size(1), weight.size(0)};
  layer.formats.resize(formats_.size());
  for (size_t f = 0; f < formats_.size(); ++f)
    if (format_gemms_[f]) layer.formats[f].why_not = "BF16: not a Linear module (" + owner->second + " is reused)";
  return by_weight_[impl] = add_layer(std::move(layer), weight);
}

torch::Tensor LayerProbe::in_format(size_t format, const torch::Tensor& x, const torch::Tensor& weight,
                                    const torch::Tensor& bias) {
  if (format_gemms_[format]) {
    const torch::Tensor y = format_gemms_[format]->linear(x, weight, bias, /*recomputing=*/false);
    return y.defined() ? y.to(torch::kFloat) : y;
  }
  return autocast_linear(x, weight, bias, formats_[format] == NumericFormat::kBf16 ? torch::kBFloat16 : torch::kHalf);
}

torch::Tensor LayerProbe::watch_input_grad(size_t layer, size_t input, const torch::Tensor& x) {
  if (!x.requires_grad() || !torch::GradMode::is_enabled()) return x;
  torch::Tensor own = x.view_as(x);  // a view of its own, so the hook sees this layer's share of x's gradient
  own.register_hook([this, layer, input, format = format_, scale = grad_scale_](const torch::Tensor& grad) {
    std::vector<torch::Tensor>& reference = reference_input_grads_[layer];
    if (reference.size() <= input) reference.resize(input + 1);
    if (!format)
      reference[input] = grad.detach().clone();
    else if (reference[input].defined())
      layers_[layer].formats[*format].input_grad.add(reference[input], grad / scale);
  });
  return own;
}

void LayerProbe::watch_grad_output(size_t layer, const torch::Tensor& y) {
  if (!y.requires_grad()) return;
  y.register_hook([this, layer](const torch::Tensor& grad) {
    for (size_t f = 0; f < formats_.size(); ++f)
      if (layers_[layer].formats[f].why_not.empty())
        layers_[layer].formats[f].grad_output.merge(
            range_stats(grad, formats_[f], TensorRole::kGradOutput, fp8_.margin, loss_scale_));
  });
}

void LayerProbe::measure_local(size_t layer, const torch::Tensor& x, const torch::Tensor& weight,
                               const torch::Tensor& bias, const torch::Tensor& reference) {
  torch::NoGradGuard no_grad;
  layers_[layer].macs = x.numel() / x.size(-1) * weight.size(0) * weight.size(1);
  for (size_t f = 0; f < formats_.size(); ++f) {
    LayerInFormat& in = layers_[layer].formats[f];
    if (!in.why_not.empty()) continue;
    in.local.add(reference, in_format(f, x.detach(), weight, bias));  // the formats know a layer by its weight
    in.input.merge(range_stats(x, formats_[f], TensorRole::kInput, fp8_.margin, loss_scale_));
    in.weight.merge(range_stats(weight, formats_[f], TensorRole::kWeight, fp8_.margin, loss_scale_));
  }
}

torch::Tensor LayerProbe::linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                                 bool /*recomputing*/) {
  const std::optional<size_t> layer = layer_index(weight);
  if (!layer) return {};
  ++gemm_calls_;
  const torch::Tensor input = watch_input_grad(*layer, 0, x);
  if (format_ && candidate_layers_.count(layers_[*layer].name))
    if (torch::Tensor y = in_format(*format_, input, weight, bias); y.defined()) return y;
  torch::Tensor y = ops::linear(input, weight, bias);
  if (format_ || !measure_) return y;
  measure_local(*layer, x, weight, bias, y);
  watch_grad_output(*layer, y);
  return y;
}

}  // namespace mpt::precision
