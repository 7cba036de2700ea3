// The numerics probe's other modules (see layer_probe.h): convolutions, norms, attention cores and the loss, which
// reach it through their runners. In a candidate format each runs as autocast runs it, from inputs in the format.
#include "precision/autocast.h"
#include "precision/layer_probe.h"

namespace mpt::precision {
namespace {

// The module with its floating inputs rounded to the format's dtype, under autocast in it, its output back in FP32:
// what a run's module computes when its inputs arrive in the compute dtype and no FP32 island holds it.
torch::Tensor module_in_format(NumericFormat format, const Tensors& inputs, const ModuleProbe::Forward& forward) {
  const torch::ScalarType dtype = format == NumericFormat::kFp16 ? torch::kHalf : torch::kBFloat16;
  Tensors narrow;
  for (const torch::Tensor& x : inputs) narrow.push_back(x.is_floating_point() ? x.to(dtype) : x);
  AutocastScope autocast(inputs.front().device().type(), dtype);
  return forward(narrow).to(torch::kFloat);
}

// What the runner calls it, else the module's class ("torch::nn::Conv2dImpl" -> "Conv2d").
std::string kind_of(const std::string& kind, const torch::nn::Module* module) {
  if (!kind.empty() || !module) return kind.empty() ? "function" : kind;
  std::string name = module->name();
  name = name.substr(name.rfind(':') + 1);
  if (name.size() > 4 && name.compare(name.size() - 4, 4, "Impl") == 0) name.resize(name.size() - 4);
  return name;
}

// Multiply-adds of one forward: a Linear's or convolution's (each output value reads in_features inputs), an attention
// core's (q k^T and p v over q (B, h, S, d) and k (B, h, T, d)); none for norms and the loss.
int64_t module_macs(const LayerNumerics& layer, const Tensors& inputs, const torch::Tensor& output) {
  if (layer.in_features) return output.numel() / layer.out_features * layer.in_features * layer.out_features;
  if (layer.kind == "attention" && inputs.size() >= 2) return 2 * inputs[0].numel() * inputs[1].size(-2);
  return 0;
}

}  // namespace

std::optional<size_t> LayerProbe::module_row(const std::string& module, const std::string& kind, const Tensors& inputs,
                                             const Forward& forward, torch::Tensor& first_output) {
  if (const auto found = by_module_.find(module); found != by_module_.end()) return found->second;
  // First sight: a module whose forward makes projections (an output head with its transform) leaves them to the
  // GEMM route, which measures each.
  const int64_t calls = gemm_calls_;
  first_output = forward(inputs);
  if (gemm_calls_ != calls) {
    containers_.insert(module);
    return std::nullopt;
  }
  for (size_t i = 0; i < layers_.size(); ++i)
    if (layers_[i].name == module) return by_module_[module] = reached_outside_route(i);
  const auto found = modules_.find(module);
  const torch::nn::Module* m = found == modules_.end() ? nullptr : found->second.get();
  LayerNumerics layer{module, kind_of(kind, m)};
  torch::Tensor weight;
  if (const torch::Tensor* w = m ? m->named_parameters(/*recurse=*/false).find("weight") : nullptr) weight = *w;
  if (layer.kind == "Conv2d") layer.in_features = weight[0].numel(), layer.out_features = weight.size(0);
  layer.formats.resize(formats_.size());
  for (size_t f = 0; f < formats_.size(); ++f)
    if (formats_[f] == NumericFormat::kFp8 || formats_[f] == NumericFormat::kMxfp8)
      layer.formats[f].why_not = layer.kind == "tied Linear"
                                     ? "BF16: the model runs it outside its GEMM route"
                                     : std::string(layer.kind == "loss" ? "FP32" : "BF16") + ": " +
                                           (formats_[f] == NumericFormat::kFp8 ? "FP8" : "MXFP8") +
                                           " takes projections only";
  return by_module_[module] = add_layer(std::move(layer), weight);
}

size_t LayerProbe::reached_outside_route(size_t layer) {
  for (size_t f = 0; f < formats_.size(); ++f)
    if (format_gemms_[f] && layers_[layer].formats[f].why_not.empty())
      layers_[layer].formats[f].why_not = "BF16: the model runs it outside its GEMM route";
  return layer;
}

void LayerProbe::measure_module(size_t layer, const Tensors& inputs, const Forward& forward,
                                const torch::Tensor& reference) {
  torch::NoGradGuard no_grad;
  Tensors detached;
  for (const torch::Tensor& x : inputs) detached.push_back(x.detach());
  if (layers_[layer].kind == "tied Linear")  // a product with another module's weight: its shape from the tensors
    layers_[layer].in_features = inputs[0].size(-1), layers_[layer].out_features = reference.size(-1);
  layers_[layer].macs = module_macs(layers_[layer], inputs, reference);
  for (size_t f = 0; f < formats_.size(); ++f) {
    LayerInFormat& in = layers_[layer].formats[f];
    if (!in.why_not.empty()) continue;
    in.local.add(reference, module_in_format(formats_[f], detached, forward));
    for (const torch::Tensor& x : detached)
      if (x.is_floating_point())
        in.input.merge(range_stats(x, formats_[f], TensorRole::kInput, fp8_.margin, loss_scale_));
    if (weights_[layer].defined())
      in.weight.merge(range_stats(weights_[layer], formats_[f], TensorRole::kWeight, fp8_.margin, loss_scale_));
  }
}

torch::Tensor LayerProbe::run(const std::string& module, const std::string& kind, const Tensors& inputs,
                              const Forward& forward) {
  if (containers_.count(module)) return forward(inputs);
  torch::Tensor first_output;
  const std::optional<size_t> row = module_row(module, kind, inputs, forward, first_output);
  if (!row) return first_output;
  Tensors watched;
  for (size_t i = 0; i < inputs.size(); ++i)
    watched.push_back(inputs[i].is_floating_point() ? watch_input_grad(*row, i, inputs[i]) : inputs[i]);
  if (format_ && candidate_layers_.count(module)) return module_in_format(formats_[*format_], watched, forward);
  torch::Tensor y = forward(watched);
  if (format_ || !measure_) return y;
  measure_module(*row, inputs, forward, y);
  watch_grad_output(*row, y);
  return y;
}

}  // namespace mpt::precision
