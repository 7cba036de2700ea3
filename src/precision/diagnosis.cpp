// Overflow diagnosis over named gradients.
#include "precision/diagnosis.h"

#include <algorithm>
#include <sstream>

namespace mpt::precision {

std::vector<NonfiniteGrad> find_nonfinite_grads(const torch::OrderedDict<std::string, torch::Tensor>& parameters,
                                                size_t limit) {
  std::vector<NonfiniteGrad> culprits;
  for (const auto& item : parameters) {
    const torch::Tensor& grad = item.value().grad();
    if (!grad.defined()) continue;
    torch::Tensor finite = torch::isfinite(grad);
    const int64_t bad = grad.numel() - finite.sum().item<int64_t>();
    if (bad == 0) continue;
    const double max_abs = torch::where(finite, grad.abs(), torch::zeros_like(grad)).max().item<double>();
    culprits.push_back({item.key(), bad, max_abs});
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

}  // namespace mpt::precision
