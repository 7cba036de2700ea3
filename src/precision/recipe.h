// A run's precision recipe, built once from the resolved precision section: FP32; autocast (FP32 weights, BF16 or
// FP16 compute); master weights (BF16/FP16 weights in the model, FP32 masters in the optimizer); FP8 hybrid (FP8 or
// block-scaled GEMMs in the Linear layers, BF16 elsewhere, with either weight storage). It owns the compute dtype, the
// weight casts and masters, the loss scaler, the FP8 formats' scales and the checkpoint state they add; the trainer,
// the models (through the policy's GemmRouter) and the tools ask it instead of reading precision.mode.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "precision/gemm_format.h"
#include "precision/loss_scaler.h"
#include "precision/master_weights.h"
#include "precision/mode.h"
#include "precision/policy.h"

namespace mpt::precision {

class Recipe {
 public:
  // Casts `model`'s weights under master_weights (keeping FP32 the islands, the norms and `keep_fp32`: parameters an
  // island reads) and routes its eligible Linear layers through the FP8 format under mode fp8, via `policy`'s router.
  Recipe(const PrecisionConfig& config, torch::nn::Module& model, const ModulePolicy& policy,
         const std::set<std::string>& keep_fp32, torch::Device device);

  Mode mode() const { return mode_; }
  Strategy strategy() const { return strategy_; }
  torch::ScalarType compute_dtype() const { return precision::compute_dtype(mode_); }
  std::string describe() const;  // "mixed_bf16 (master_weights)", ...

  // The FP32 tensors the optimizer updates and checkpoints hold, named like the model's parameters: the masters, or
  // the parameters themselves. `pairs` gives each with the parameter whose gradient it takes.
  const NamedTensors& weights() const { return weights_; }
  const std::vector<MasterPair>& pairs() const { return pairs_; }
  bool has_masters() const { return masters_ != nullptr; }
  void grads_to_masters();  // the unfused update: FP32 copies of the model's low-precision gradients
  void masters_to_model();  // after an unfused optimizer step or a checkpoint load

  LossScaler& scaler() { return scaler_; }
  const LossScaler& scaler() const { return scaler_; }
  LowPrecisionGemms* gemms() const { return gemms_.get(); }  // null unless mode fp8

  // Checkpoint state beyond the weights (the FP8 scales), its check before a resume, and the update after each step.
  std::vector<std::pair<std::string, torch::Tensor>> state() const;
  std::string check_state(const NamedTensors& saved) const;
  void after_step(const AgreeMax& agree_max);

  // Whether the layer holding `parameter` computes in FP32: the whole run, or an FP32 island (the diverged advice).
  bool computes_in_fp32(const std::string& parameter) const;

 private:
  Mode mode_;
  Strategy strategy_;
  ModulePolicy policy_;
  LossScaler scaler_;
  std::unique_ptr<MasterWeights> masters_;
  std::unique_ptr<LowPrecisionGemms> gemms_;
  NamedTensors weights_;
  std::vector<MasterPair> pairs_;
};

// The low-precision GEMM format `config` names ("FP8", ...; "" unless mode fp8) and every Linear layer of
// `model` with its verdict: what mpt inspect reports without building the recipe.
struct GemmPlan {
  std::string format;
  std::vector<GemmEligibility> layers;
};
GemmPlan gemm_plan(const PrecisionConfig& config, torch::nn::Module& model, const ModulePolicy& policy);

}  // namespace mpt::precision
