// debug.check_numerics: every named module's output is checked for Inf/NaN during the forward pass, and the
// first module that produced one is reported with its dtype and input range (the seed's check_numerics), so
// a user sees which layer to keep in FP32. One host sync per module: a debugging tool, off by default.
#pragma once

#include <torch/torch.h>

#include <optional>
#include <string>

namespace mpt::precision {

struct NonfiniteActivation {
  std::string module;  // e.g. "hidden.0"
  std::string dtype;   // the output's dtype, e.g. "BFloat16"
  double input_min = 0.0;
  double input_max = 0.0;
};

class NumericsMonitor {
 public:
  // Records `module` if its output holds Inf/NaN and nothing was recorded since the last take().
  void check(const std::string& module, const torch::Tensor& input, const torch::Tensor& output);
  // The first offender since the last call, if any; clears it.
  std::optional<NonfiniteActivation> take();

 private:
  std::optional<NonfiniteActivation> first_;
};

std::string describe(const NonfiniteActivation& activation);

}  // namespace mpt::precision
