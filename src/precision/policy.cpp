// Precision policy: module-name matching and mode -> dtype.
#include "precision/policy.h"

#include "common/error.h"
#include "ops/linear.h"

namespace mpt::precision {

bool glob_match(const std::string& pattern, const std::string& text) {
  size_t p = 0, t = 0, star = std::string::npos, resume = 0;
  while (t < text.size()) {
    if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      resume = t;
    } else if (p < pattern.size() && pattern[p] == text[t]) {
      ++p, ++t;
    } else if (star != std::string::npos) {
      p = star + 1;
      t = ++resume;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

bool ModulePolicy::keeps_fp32(const std::string& module_name) const {
  for (const auto& pattern : patterns_)
    if (glob_match(pattern, module_name)) return true;
  return false;
}

bool ModulePolicy::runs_in_fp32(const std::string& module_name) const {
  for (size_t end = module_name.find('.'); end != std::string::npos; end = module_name.find('.', end + 1))
    if (keeps_fp32(module_name.substr(0, end))) return true;
  return keeps_fp32(module_name);
}

torch::ScalarType projection_dtype(torch::DeviceType device) {
  return autocast_enabled(device) ? autocast_dtype(device) : torch::kFloat;
}

torch::Tensor as_projection_input(const torch::Tensor& x) {
  return x.scalar_type() == torch::kFloat ? x.to(projection_dtype(x.device().type())) : x;
}

torch::Tensor GemmRouter::linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias) const {
  if (gemms_)
    if (torch::Tensor y = gemms_->linear(x, weight, bias, recomputing_ > 0); y.defined()) return y;
  return ops::linear(x, weight, bias);
}

}  // namespace mpt::precision
