// Overflow diagnosis over named gradients.
#include "precision/diagnosis.h"

#include <algorithm>
#include <sstream>

namespace mpt::precision {

std::vector<NonfiniteGrad> find_nonfinite_grads(const torch::OrderedDict<std::string, torch::Tensor>& parameters,
                                                size_t limit, double grad_scale) {
  std::vector<NonfiniteGrad> culprits;
  for (const auto& item : parameters) {
    const torch::Tensor& grad = item.value().grad();
    if (!grad.defined()) continue;
    torch::Tensor finite = torch::isfinite(grad);
    const int64_t bad = grad.numel() - finite.sum().item<int64_t>();
    if (bad == 0) continue;
    const double max_abs = torch::where(finite, grad.abs(), torch::zeros_like(grad)).max().item<double>();
    culprits.push_back({item.key(), bad, max_abs / grad_scale});
  }
  std::stable_sort(culprits.begin(), culprits.end(),
                   [](const NonfiniteGrad& a, const NonfiniteGrad& b) { return a.nonfinite > b.nonfinite; });
  if (culprits.size() > limit) culprits.resize(limit);
  return culprits;
}

std::string describe(const std::vector<NonfiniteGrad>& culprits) {
  if (culprits.empty()) return "no parameter gradient held Inf/NaN";
  std::ostringstream out;
  for (size_t i = 0; i < culprits.size(); ++i)
    out << (i ? ", " : "") << culprits[i].name << " (" << culprits[i].nonfinite << " non-finite, max finite |g| "
        << culprits[i].max_abs_finite << ")";
  return out.str();
}

std::string divergence_advice(const std::vector<NonfiniteGrad>& culprits,
                              const std::function<bool(const std::string&)>& computes_in_fp32) {
  std::vector<std::string> low, fp32;
  for (const auto& culprit : culprits) {
    const size_t dot = culprit.name.rfind('.');
    const std::string module = dot == std::string::npos ? culprit.name : culprit.name.substr(0, dot);
    auto& list = computes_in_fp32 && computes_in_fp32(culprit.name) ? fp32 : low;
    if (std::find(list.begin(), list.end(), module) == list.end()) list.push_back(module);
  }
  auto joined = [](const std::vector<std::string>& names) {
    std::string text;
    for (const auto& name : names) text += (text.empty() ? "" : ", ") + name;
    return text;
  };
  std::string advice;
  if (!low.empty())
    advice = "Keeping " + joined(low) +
             " in FP32 (add to precision.fp32_modules), lowering the learning rate or "
             "clipping gradients (train.grad_clip_norm) can help";
  if (!fp32.empty())
    advice += std::string(advice.empty() ? "" : ". ") + "Layers already computing in FP32 (" + joined(fp32) +
              ") gain nothing from a wider dtype: lower the learning rate or clip gradients (train.grad_clip_norm)";
  if (advice.empty()) advice = "Lowering the learning rate or clipping gradients (train.grad_clip_norm) can help";
  return advice;
}

}  // namespace mpt::precision
