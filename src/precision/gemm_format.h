// How the GEMMs of a run's Linear layers leave BF16 (precision.mode fp8): a format (precision.fp8.recipe: FP8 with
// per-tensor scales, or a block-scaled one) decides which layers it takes, owns their state, and computes
// y = x W^T + b for them. Models reach it through the module policy's GemmRouter.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace mpt::precision {

using NamedTensors = torch::OrderedDict<std::string, torch::Tensor>;

// Data parallelism's all-reduce (max) over a small FP32 tensor of per-rank values.
using AgreeMax = std::function<void(torch::Tensor& values)>;

// Whether a Linear layer runs in the format, and if not, what it runs in instead and why.
struct GemmEligibility {
  std::string name;
  int64_t in_features = 0, out_features = 0;
  bool low_precision = false;
  std::string why_not;  // "BF16: in_features 30 not a multiple of 16", "FP32: an FP32 island ..."
};

// A tensor's scale moved by more than 2x since its last report, or its casts saturated: an fp8_scale event.
struct GemmScaleEvent {
  std::string tensor;  // "hidden.0.input", "hidden.0.weight", "hidden.0.grad_output"
  double scale = 0.0, previous = 0.0, amax = 0.0;
  int64_t saturated = 0;
};

// What a log point reports of the format's scales: events, and named values for metrics.jsonl and TensorBoard.
struct GemmReport {
  std::vector<GemmScaleEvent> events;
  std::vector<std::pair<std::string, std::pair<double, double>>> ranges;  // "input_scale" -> (min, max)
};

class LowPrecisionGemms {
 public:
  virtual ~LowPrecisionGemms() = default;
  virtual const char* name() const = 0;  // what inspect and the logs call it: "FP8", ...
  virtual const std::vector<GemmEligibility>& eligibility() const = 0;
  // y = x W^T + b when `weight` belongs to one of the format's layers; an undefined tensor otherwise. `recomputing`:
  // activation checkpointing's second forward, whose tensors the first one already recorded.
  virtual torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                               bool recomputing) = 0;
  // State a checkpoint keeps so that a resumed run casts as it would have, and its check before a resume.
  virtual std::vector<std::pair<std::string, torch::Tensor>> state() { return {}; }
  virtual std::string check_state(const NamedTensors& /*saved*/) const { return ""; }
  // After each optimizer step, applied or skipped (delayed scales take this step's amaxes).
  virtual void after_step(const AgreeMax& /*agree_max*/) {}
  // At a log point (may read the device).
  virtual GemmReport report() { return {}; }
  // What report() compares against (the scales last reported, the saturations since), so that a resumed run
  // reports what the uninterrupted one would have; restore ignores a state of another shape.
  virtual NamedTensors report_state() const { return NamedTensors(); }
  virtual void restore_report_state(const NamedTensors& /*saved*/) {}
};

// The module policy's route from a projection to its GEMM: the format's when one is attached and takes the
// layer, else ops::linear. One per model, shared by the policy's copies; attached after the model is built.
class GemmRouter {
 public:
  void attach(LowPrecisionGemms* gemms) { gemms_ = gemms; }
  torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias) const;

  // While one lives, the projections are a block's recomputation in backward (models/recompute.h).
  class RecomputeScope {
   public:
    explicit RecomputeScope(const GemmRouter& router) : router_(router) { ++router_.recomputing_; }
    ~RecomputeScope() { --router_.recomputing_; }
    RecomputeScope(const RecomputeScope&) = delete;
    RecomputeScope& operator=(const RecomputeScope&) = delete;

   private:
    const GemmRouter& router_;
  };

 private:
  LowPrecisionGemms* gemms_ = nullptr;
  mutable int recomputing_ = 0;
};

}  // namespace mpt::precision
