// Adam, AdamW and SGD with a one-pass CPU update. LibTorch's C++ Adam runs five tensor ops per parameter (two for
// each moment, one for the denominator, one for the update), SGD with momentum and weight decay four, reading and
// writing the 4-byte weights and state several times more than needed; the update is memory-bound, so those extra
// passes made Adam a large part of a BERT-base step (docs/findings.md). These subclasses keep LibTorch's state
// (AdamParamState: step, exp_avg, exp_avg_sq; SGDParamState: momentum_buffer), options and serialisation, so
// checkpoints are unchanged, and update FP32 CPU parameters in one fused loop on all threads. Parameters on a GPU
// take a multi-tensor step instead (multi_tensor_step.h); anything else (other dtypes or layouts on the CPU,
// amsgrad) the base class's step.
//
// The trainer steps them through a MasterStepper, which takes the whole step between the gradient check and the
// next forward in one pass: each gradient is unscaled and clipped by one factor as it is read, so no pass writes
// the gradients first. Under precision.strategy = master_weights each FP32 master reads its BF16 model
// parameter's gradient and writes its new value, rounded, into that parameter; the unfused path copies every
// gradient to FP32 before the step and every master back after it: two more passes over the weights, and an FP32
// gradient per parameter held at once. Otherwise each parameter is its own master.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <vector>

#include "ops/master_pair.h"

namespace mpt::ops {

class FusedAdam : public torch::optim::Adam {
 public:
  using torch::optim::Adam::Adam;
  torch::Tensor step(LossClosure closure = nullptr) override;
};

class FusedAdamW : public torch::optim::AdamW {
 public:
  using torch::optim::AdamW::AdamW;
  torch::Tensor step(LossClosure closure = nullptr) override;
};

class FusedSgd : public torch::optim::SGD {
 public:
  using torch::optim::SGD::SGD;
  torch::Tensor step(LossClosure closure = nullptr) override;
};

// The one-pass step of one of the optimizers above over master pairs (see above), resolved once, when the trainer's
// update path is chosen; `grad_factor` (GradientCheck::factor) is applied to every gradient as it is read, the
// gradients are left as they are, and a master of a BF16 parameter gets none.
class MasterStepper {
 public:
  virtual ~MasterStepper() = default;
  virtual void step(const std::vector<MasterPair>& pairs, double grad_factor) = 0;
};

// The stepper for `optimizer` over the masters of `pairs`, or null when the one-pass loop cannot take them: not one
// of the optimizers above, AMSGrad, the portable kernels forced (MPT_PORTABLE_KERNELS), or a master that is not a
// dense CPU FP32 tensor laid out like its BF16 model parameter.
std::unique_ptr<MasterStepper> master_stepper(torch::optim::Optimizer& optimizer, const std::vector<MasterPair>& pairs);

}  // namespace mpt::ops
