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
#include "precision/gemm_format.h"
#include "precision/low_precision_linear.h"
#include "precision/policy.h"

namespace mpt::precision {

// max / amax / 2^margin for `format` where the 0-dim `amax` is positive and finite, else `fallback`; past FP32's
// range, FP32's largest.
torch::Tensor scale_from_amax(const torch::Tensor& amax, const torch::Tensor& fallback, ops::Float8 format,
                              int64_t margin);

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

// The FP8 state of one Linear layer, and its GEMMs: x and W cast to E4M3 forward, the output gradient to E5M2 in
// backward, the FP8 operands (a quarter of FP32's bytes) saved for backward.
struct Fp8Layer : public LayerGemms {
  Fp8Layer(std::string name_, Fp8Scale input_, Fp8Scale weight_, Fp8Scale grad_output_)
      : name(std::move(name_)),
        input(std::move(input_)),
        weight(std::move(weight_)),
        grad_output(std::move(grad_output_)) {}
  torch::Tensor forward(const torch::Tensor& rows, const torch::Tensor& w, bool record,
                        torch::autograd::variable_list& saved) override;
  std::pair<torch::Tensor, torch::Tensor> backward(const torch::Tensor& grad_rows,
                                                   const torch::autograd::variable_list& saved,
                                                   torch::ScalarType x_dtype, torch::ScalarType w_dtype) override;

  std::string name;
  Fp8Scale input, weight, grad_output;
};

// Every Linear layer of `model` with its verdict: FP8 unless the policy keeps it in FP32 or a dimension is not a
// multiple of 16 (what FP8 Tensor Cores need; the CPU emulation keeps the same rule so both pick the same layers).
std::vector<GemmEligibility> fp8_eligibility(torch::nn::Module& model, const ModulePolicy& policy);

struct GemmFormatKind;
// FP8 with per-tensor scales as a GEMM format (precision/gemm_formats.h): recipes delayed and current.
GemmFormatKind fp8_format();

// The run's FP8 layers with per-tensor scales (precision.fp8.recipe delayed or current).
class Fp8Gemms : public LowPrecisionGemms {
 public:
  Fp8Gemms(const Fp8Config& config, torch::nn::Module& model, const ModulePolicy& policy, torch::Device device);

  const char* name() const override { return "FP8"; }
  const std::vector<GemmEligibility>& eligibility() const override { return eligibility_; }
  torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                       bool recomputing) override;
  // The scales and histories by name ("fp8.hidden.0.input.history", ...), saved in checkpoints and loaded on
  // resume in place, so that a resumed run casts with the same scales.
  std::vector<std::pair<std::string, torch::Tensor>> state() override;
  // Whether saved state (named as state() names it) may be resumed from: "" when it may, else the tensor and why
  // not (a non-finite or out-of-range scale, a negative or non-finite amax, a delayed scale its history does not
  // give).
  std::string check_state(const NamedTensors& saved) const override;
  // Under data parallelism `agree_max` (an all-reduce max over the ranks) makes every rank take the largest amax
  // of the step, so all ranks cast with the same scales, as Transformer Engine reduces amaxes over the
  // data-parallel group.
  void after_step(const AgreeMax& agree_max) override;
  // Scales that moved by more than 2x since the last report or saturated, and each role's range (syncs).
  GemmReport report() override;
  NamedTensors report_state() const override;
  void restore_report_state(const NamedTensors& saved) override;

  // The layer whose weight is `weight`, or null.
  Fp8Layer* layer_for(const torch::Tensor& weight);

 private:
  Fp8Config config_;
  std::vector<GemmEligibility> eligibility_;
  std::vector<std::unique_ptr<Fp8Layer>> layers_;
  std::unordered_map<const void*, Fp8Layer*> by_weight_;  // the weight's TensorImpl
  std::vector<double> reported_;  // the scales at the last report, per layer x (input, weight, grad_output)
};

}  // namespace mpt::precision
