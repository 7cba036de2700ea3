// The numerics monitor.
#include "precision/numerics.h"

#include <sstream>

namespace mpt::precision {

void NumericsMonitor::check(const std::string& module, const torch::Tensor& input, const torch::Tensor& output) {
  if (first_ || torch::isfinite(output).all().item<bool>()) return;
  torch::Tensor in = input.detach().to(torch::kDouble);
  first_ = NonfiniteActivation{module, std::string(c10::toString(output.scalar_type())), in.min().item<double>(),
                               in.max().item<double>()};
}

std::optional<NonfiniteActivation> NumericsMonitor::take() {
  auto found = first_;
  first_.reset();
  return found;
}

std::string describe(const NonfiniteActivation& activation) {
  std::ostringstream out;
  out << activation.module << " produced Inf/NaN in " << activation.dtype << " from inputs in [" << activation.input_min
      << ", " << activation.input_max << "]";
  return out.str();
}

}  // namespace mpt::precision
