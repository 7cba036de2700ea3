// The precision policy a run trains under: the compute dtype autocast uses, which modules stay FP32, and the
// optional numerics check. Models run each named submodule through a ModuleRunner; they never pick dtypes.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "precision/autocast.h"
#include "precision/gemm_format.h"
#include "precision/numerics.h"
#include "precision/precision_config.h"

namespace mpt::precision {

using Tensors = std::vector<torch::Tensor>;

// What `mpt numerics` attaches to see every module a model runs through its runners (a norm, a convolution, an
// attention core) and to run it again in other formats. Run-time: one pointer test per module when none is attached.
class ModuleProbe {
 public:
  using Forward = std::function<torch::Tensor(const Tensors&)>;
  virtual ~ModuleProbe() = default;
  // The module's output for this pass: forward(inputs) as the probe's pass has the module compute it.
  virtual torch::Tensor run(const std::string& module, const std::string& kind, const Tensors& inputs,
                            const Forward& forward) = 0;
};

// Where a probe is attached, shared by a policy's copies and their runners.
struct ProbeSlot {
  ModuleProbe* probe = nullptr;
};

// How a model runs one named submodule under the policy: in FP32 when the policy keeps it there, with its
// output checked when debug.check_numerics is on, and through numerics' probe when one is attached.
struct ModuleRunner {
  std::string name;
  bool keep_fp32 = false;
  NumericsMonitor* monitor = nullptr;
  std::shared_ptr<const GemmRouter> gemms;
  std::shared_ptr<const ProbeSlot> probes;
  std::string kind;  // what numerics calls a module that is not one of torch's ("attention", "RMSNorm"); "" otherwise

  // y = x W^T + b for this module's projection: through the run's FP8 format when it takes the layer.
  torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias) const {
    return gemms->linear(x, weight, bias);
  }

  bool probed() const { return probes && probes->probe; }

  template <typename Forward>
  torch::Tensor operator()(const torch::Tensor& x, Forward&& module_forward) const {
    if (probed()) return (*this)(Tensors{x}, [&](const Tensors& inputs) { return module_forward(inputs[0]); });
    torch::Tensor out = forward_maybe_fp32(keep_fp32, x, std::forward<Forward>(module_forward));
    if (monitor) monitor->check(name, x, out);
    return out;
  }

  // A module of several inputs (q, k and v of an attention core).
  template <typename Forward>
  torch::Tensor operator()(const Tensors& inputs, Forward&& module_forward) const {
    const auto run = [&](const Tensors& in) { return forward_maybe_fp32(keep_fp32, in, module_forward); };
    torch::Tensor out = probed() ? probes->probe->run(name, kind, inputs, run) : run(inputs);
    if (monitor) monitor->check(name, inputs.front(), out);
    return out;
  }
};

class ModulePolicy {
 public:
  explicit ModulePolicy(std::vector<std::string> fp32_patterns = {}, NumericsMonitor* monitor = nullptr)
      : patterns_(std::move(fp32_patterns)),
        monitor_(monitor),
        gemms_(std::make_shared<GemmRouter>()),
        probes_(std::make_shared<ProbeSlot>()) {}
  bool keeps_fp32(const std::string& module_name) const;
  // Whether a module runs in FP32: kept itself, or inside a kept module ("cls.predictions.transform.dense" runs
  // within "cls.predictions"), whose runner has switched autocast off and widened the input.
  bool runs_in_fp32(const std::string& module_name) const;
  // `kind`: see ModuleRunner.
  ModuleRunner runner(const std::string& module_name, std::string kind = "") const {
    return {module_name, keeps_fp32(module_name), monitor_, gemms_, probes_, std::move(kind)};
  }
  // The route of the models' projections to their GEMMs, shared by every copy of this policy: the precision recipe
  // attaches its FP8 format here once the model is built.
  GemmRouter& router() const { return *gemms_; }
  torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias) const {
    return gemms_->linear(x, weight, bias);
  }
  // Numerics attaches its probe once the model is built (null: detach).
  void attach_probe(ModuleProbe* probe) const { probes_->probe = probe; }

 private:
  std::vector<std::string> patterns_;
  NumericsMonitor* monitor_;  // not owned; null unless debug.check_numerics
  std::shared_ptr<GemmRouter> gemms_;
  std::shared_ptr<ProbeSlot> probes_;
};

// The dtype a projection (a GEMM) at this point of a forward computes in: the run's compute dtype under
// autocast, FP32 inside an FP32 island or without autocast. Models ask this; they never read autocast's state.
torch::ScalarType projection_dtype(torch::DeviceType device);

// `x` as a projection here reads it: an FP32 tensor in projection_dtype, anything else as it is.
torch::Tensor as_projection_input(const torch::Tensor& x);

// Glob match where '*' matches any run of characters (including dots): "layer*.bn*", "head".
bool glob_match(const std::string& pattern, const std::string& text);

}  // namespace mpt::precision
