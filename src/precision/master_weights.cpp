// FP32 master weights: grads flow model (low precision) -> masters (FP32); values flow masters -> model.
#include "precision/master_weights.h"

#include <set>

namespace mpt::precision {
namespace {

// Norm layers keep FP32 weights in every strategy, as their statistics are FP32: batch norm's kernels take
// BF16/FP16 activations with FP32 parameters and compute in FP32 (see src/models/resnet.cpp).
std::set<std::string> norm_modules(torch::nn::Module& model) {
  std::set<std::string> names;
  for (const auto& item : model.named_modules("", /*include_self=*/false)) {
    const auto& m = item.value();
    if (m->as<torch::nn::BatchNorm1d>() || m->as<torch::nn::BatchNorm2d>() || m->as<torch::nn::LayerNorm>() ||
        m->as<torch::nn::GroupNorm>())
      names.insert(item.key());
  }
  return names;
}

}  // namespace

MasterWeights::MasterWeights(torch::nn::Module& model, const ModulePolicy& policy, torch::ScalarType dtype,
                             const std::set<std::string>& keep_fp32) {
  torch::NoGradGuard no_grad;
  const std::set<std::string> norms = norm_modules(model);
  for (auto& item : model.named_parameters()) {
    const std::string& name = item.key();
    torch::Tensor& param = item.value();
    const std::string module = name.substr(0, name.rfind('.'));  // "hidden.0.weight" -> "hidden.0"
    if (policy.runs_in_fp32(module) || norms.count(module) || keep_fp32.count(name)) {
      pairs_.push_back({param, param, true});
      masters_.insert(name, param);
      continue;
    }
    torch::Tensor master = param.detach().clone().to(torch::kFloat);
    master.set_requires_grad(true);
    param.set_data(param.data().to(dtype));
    pairs_.push_back({param, master, false});
    masters_.insert(name, master);
  }
}

void MasterWeights::grads_to_masters() {
  for (auto& pair : pairs_) {
    if (pair.shared) continue;
    torch::Tensor& grad = pair.model_param.mutable_grad();
    pair.master.mutable_grad() = grad.defined() ? grad.to(torch::kFloat) : torch::Tensor();
    grad = torch::Tensor();  // free the low-precision copy at once: only one tensor's worth is ever doubled
  }
}

void MasterWeights::masters_to_model() {
  torch::NoGradGuard no_grad;
  for (auto& pair : pairs_)
    if (!pair.shared) pair.model_param.copy_(pair.master);
}

}  // namespace mpt::precision
