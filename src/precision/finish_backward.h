// Finishing the backward: everything between the scaled backward and the optimizer step, decided in one place.
// The gradients are unscaled, checked for Inf/NaN, clipped, and the step is applied or skipped; the loss scale
// then grows or backs off. Four paths do it, picked per step by where the gradients are:
//   one-pass     the fused CPU optimizer multiplies by the factor as it reads the gradients: only a check here
//   single pass  one process, CPU gradients: one read for the check and the norm, one write (gradient_check.h)
//   tensor ops   one process elsewhere (a GPU): the fused unscale kernel, one host sync, clip_grad_norm
//   across ranks data parallelism: the overflow flag all-reduced (max) so that every rank skips the same steps
#pragma once

#include <torch/torch.h>

#include <functional>
#include <vector>

#include "precision/loss_scaler.h"

namespace mpt::precision {

struct FinishedBackward {
  bool skip = false;          // some gradient was Inf/NaN: no optimizer step; the gradients are left as they were
  double grad_factor = 1.0;   // one-pass: what the optimizer multiplies each gradient by; else 1 (already applied)
  torch::Tensor grad_norm;    // before clipping, when clipping is on and the step applies; undefined otherwise
  ScaleUpdate scale_update;   // the loss scale's rule applied to this step's verdict
  double grads_scaled_by = 1.0;  // the loss scale still in the gradients (a skip leaves the one-pass paths' so)
  bool stop_agreed = false;   // across ranks: some rank asked to stop, so all stop after this step
};

// Data parallelism's all-reduce (max) over a small FP32 tensor of per-rank flags.
using AgreeMax = std::function<void(torch::Tensor& flags)>;

class BackwardFinisher {
 public:
  // `agree_max` is null in one process. `max_norm` 0 turns clipping off.
  BackwardFinisher(LossScaler& scaler, double max_norm, AgreeMax agree_max = nullptr);

  // `grads` still carry the loss scale. `deferred`: the optimizer takes the factor as it reads them (the
  // one-pass step), so nothing is written here. `stop_requested` rides along with the overflow flag across ranks.
  FinishedBackward finish(const std::vector<torch::Tensor>& grads, bool deferred, bool stop_requested = false);

 private:
  LossScaler& scaler_;
  double max_norm_;
  AgreeMax agree_max_;
};

}  // namespace mpt::precision
