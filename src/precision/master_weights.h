// The master_weights strategy (Apex O2, the seed's "weights stored in FP16, the optimizer keeps an FP32 master
// copy"): parameters outside the FP32 islands live in BF16/FP16 in the model; the optimizer updates FP32 masters,
// which are copied back after every step and are what checkpoints hold.
#pragma once

#include <torch/torch.h>

#include <set>
#include <string>
#include <vector>

#include "ops/master_pair.h"
#include "precision/policy.h"

namespace mpt::precision {

using NamedTensors = torch::OrderedDict<std::string, torch::Tensor>;

using MasterPair = ops::MasterPair;

class MasterWeights {
 public:
  // Casts every parameter of `model` outside the policy's FP32 islands, its norm layers and `keep_fp32` (names of
  // parameters an island reads, models::ModelImpl::tied_to_fp32_islands) to `dtype` in place, keeping an FP32
  // master copy of each; FP32 parameters are their own masters.
  MasterWeights(torch::nn::Module& model, const ModulePolicy& policy, torch::ScalarType dtype,
                const std::set<std::string>& keep_fp32 = {});

  const NamedTensors& masters() const { return masters_; }  // FP32, named like the model's parameters
  const std::vector<MasterPair>& pairs() const { return pairs_; }

  // The copies around an optimizer step, which ops::step_masters (fused_optimizers.h) does without on the CPU.
  void grads_to_masters();  // after backward: FP32 copies of the model's low-precision gradients
  void masters_to_model();  // after an optimizer step or a checkpoint load

 private:
  std::vector<MasterPair> pairs_;
  NamedTensors masters_;
};

}  // namespace mpt::precision
