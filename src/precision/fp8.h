// FP8 training of Linear layers (precision.mode fp8): each FP8 layer casts its input and weight to E4M3 and, in
// backward, its output gradient to E5M2, each with its own per-tensor scale, and multiplies with ops::scaled_gemm
// (outputs BF16; the weights, their gradients' accumulation and the optimizer stay FP32).
//
// A scale maps the tensor's largest magnitude (amax) near the format's max: scale = max / amax / 2^margin.
//  - delayed (Transformer Engine's recipe): amax from the last `history` steps' amaxes, the scale updated after
//    each step, so a step casts with a scale known before it ran (no pass over the tensor first);
//  - current (torchao's default): the amax of the tensor now.
// Every cast records its amax; casts beyond the range saturate and are counted.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "ops/float8.h"
#include "precision/fp8_config.h"
#include "precision/policy.h"

namespace mpt::precision {

// One tensor's scale and amax history, all on the device (no host sync in a step).
class Fp8Scale {
 public:
  Fp8Scale(ops::Float8 format, const Fp8Config& config, torch::Device device);
  // The scale to cast `x` with: delayed, the scale from the history; current, from x's amax. With `record`,
  // x's amax joins this step's and its saturated elements are counted.
  torch::Tensor scale_for(const torch::Tensor& x, bool record);
  // After a step: this step's amax enters the history (a non-finite one as 0, so an overflow step cannot
  // poison the window) and the delayed scale is recomputed; a history of zeros keeps the scale.
  void update();

  ops::Float8 format;
  torch::Tensor history;    // (config.amax_history,) FP32, newest first
  torch::Tensor scale;      // 0-dim FP32: what delayed casts use
  torch::Tensor step_amax;  // 0-dim FP32: the largest amax recorded this step
  torch::Tensor saturated;  // 0-dim int64: elements saturated since the last report

 private:
  const Fp8Config& config_;
};

// The FP8 state of one Linear layer.
struct Fp8Layer {
  std::string name;
  Fp8Scale input, weight, grad_output;
};

// Whether a Linear layer can run in FP8, and if not, why.
struct Fp8Eligibility {
  std::string name;
  int64_t in_features = 0, out_features = 0;
  bool fp8 = false;
  std::string why_not;  // what it runs in instead, and why: "BF16: in_features 30 not a multiple of 16", ...
};

// Every Linear layer of `model` with its verdict: FP8 unless the policy keeps it in FP32 or a dimension is not a
// multiple of 16 (what FP8 Tensor Cores need; the CPU emulation keeps the same rule so both pick the same layers).
std::vector<Fp8Eligibility> fp8_eligibility(torch::nn::Module& model, const ModulePolicy& policy);

// A scale changed by more than 2x since the last report, or casts saturated: one fp8_scale event's worth.
struct Fp8ScaleChange {
  std::string tensor;  // "hidden.0.input", "hidden.0.weight", "hidden.0.grad_output"
  double scale = 0.0, previous = 0.0, amax = 0.0;
  int64_t saturated = 0;
};

// The run's FP8 layers. While it lives, precision::linear routes their GEMMs through FP8.
class Fp8Training {
 public:
  Fp8Training(const Fp8Config& config, torch::nn::Module& model, const ModulePolicy& policy, torch::Device device);
  ~Fp8Training();
  Fp8Training(const Fp8Training&) = delete;
  Fp8Training& operator=(const Fp8Training&) = delete;

  const std::vector<Fp8Eligibility>& eligibility() const { return eligibility_; }
  // The layer whose weight is `weight`, or null.
  Fp8Layer* layer_for(const torch::Tensor& weight);
  // After each optimizer step (applied or skipped). Under data parallelism `agree_max` (an all-reduce max over
  // the ranks) makes every rank take the largest amax of the step, so all ranks cast with the same scales, as
  // Transformer Engine reduces amaxes over the data-parallel group.
  void after_step(const std::function<void(torch::Tensor&)>& agree_max = nullptr);
  // The scales and histories by name ("fp8.hidden.0.input.history", ...), saved in checkpoints and loaded on
  // resume in place, so that a resumed run casts with the same scales.
  std::vector<std::pair<std::string, torch::Tensor>> state();
  // Whether saved FP8 state (named as state() names it) may be resumed from: "" when it may, else the tensor and
  // why not (a non-finite or out-of-range scale, a negative or non-finite amax, a delayed scale its history
  // does not give).
  std::string check_state(const torch::OrderedDict<std::string, torch::Tensor>& saved) const;
  // Scales that moved by more than 2x since the last call, or saturated (syncs: call at log points).
  std::vector<Fp8ScaleChange> changes();
  // The smallest and largest current scale over the layers' inputs, weights and output gradients (syncs).
  struct Summary {
    double input_min = 0, input_max = 0, weight_min = 0, weight_max = 0, grad_min = 0, grad_max = 0;
  };
  Summary summary();

 private:
  Fp8Config config_;
  std::vector<Fp8Eligibility> eligibility_;
  std::vector<std::unique_ptr<Fp8Layer>> layers_;
  std::unordered_map<const void*, Fp8Layer*> by_weight_;  // the weight's TensorImpl
  std::vector<double> reported_;  // the scales at the last changes(), per layer x (input, weight, grad_output)
};

// y = x W^T + b: in FP8 when an Fp8Training holds W's layer, else ops::linear. Models call this for every
// projection a run might put in FP8.
torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias);

}  // namespace mpt::precision
