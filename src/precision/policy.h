// The precision policy a run trains under: the compute dtype autocast uses, which modules stay FP32, and the
// optional numerics check. Models run each named submodule through a ModuleRunner; they never pick dtypes.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

#include "precision/autocast.h"
#include "precision/gemm_format.h"
#include "precision/numerics.h"
#include "precision/precision_config.h"

namespace mpt::precision {

// How a model runs one named submodule under the policy: in FP32 when the policy keeps it there, and
// with its output checked when debug.check_numerics is on.
struct ModuleRunner {
  std::string name;
  bool keep_fp32 = false;
  NumericsMonitor* monitor = nullptr;
  std::shared_ptr<const GemmRouter> gemms;

  // y = x W^T + b for this module's projection: through the run's FP8 format when it takes the layer.
  torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias) const {
    return gemms->linear(x, weight, bias);
  }

  template <typename Forward>
  torch::Tensor operator()(const torch::Tensor& x, Forward&& module_forward) const {
    torch::Tensor out = forward_maybe_fp32(keep_fp32, x, std::forward<Forward>(module_forward));
    if (monitor) monitor->check(name, x, out);
    return out;
  }
};

class ModulePolicy {
 public:
  explicit ModulePolicy(std::vector<std::string> fp32_patterns = {}, NumericsMonitor* monitor = nullptr)
      : patterns_(std::move(fp32_patterns)), monitor_(monitor), gemms_(std::make_shared<GemmRouter>()) {}
  bool keeps_fp32(const std::string& module_name) const;
  // Whether a module runs in FP32: kept itself, or inside a kept module ("cls.predictions.transform.dense" runs
  // within "cls.predictions"), whose runner has switched autocast off and widened the input.
  bool runs_in_fp32(const std::string& module_name) const;
  ModuleRunner runner(const std::string& module_name) const {
    return {module_name, keeps_fp32(module_name), monitor_, gemms_};
  }
  // The route of the models' projections to their GEMMs, shared by every copy of this policy: the precision recipe
  // attaches its FP8 format here once the model is built.
  GemmRouter& router() const { return *gemms_; }
  torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias) const {
    return gemms_->linear(x, weight, bias);
  }

 private:
  std::vector<std::string> patterns_;
  NumericsMonitor* monitor_;  // not owned; null unless debug.check_numerics
  std::shared_ptr<GemmRouter> gemms_;
};

// The dtype a projection (a GEMM) at this point of a forward computes in: the run's compute dtype under
// autocast, FP32 inside an FP32 island or without autocast. Models ask this; they never read autocast's state.
torch::ScalarType projection_dtype(torch::DeviceType device);

// `x` as a projection here reads it: an FP32 tensor in projection_dtype, anything else as it is.
torch::Tensor as_projection_input(const torch::Tensor& x);

// Glob match where '*' matches any run of characters (including dots): "layer*.bn*", "head".
bool glob_match(const std::string& pattern, const std::string& text);

}  // namespace mpt::precision
