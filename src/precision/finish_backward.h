// Finishing the backward: everything between the scaled backward and the optimizer step. The gradients are
// unscaled, checked for Inf/NaN and clipped, the step is applied or skipped, and the loss scale grows or backs off.
// One function per update path (train/update_path.h picks one when the trainer is built):
//   for the one-pass step  the fused CPU optimizer multiplies by the factor as it reads: only a check here
//   in place               one process: unscale, check and clip the gradients (one read and one write of CPU
//                          gradients, gradient_check.h; LibTorch's fused unscale kernel and one host sync on a GPU)
//   across ranks           data parallelism: the overflow flag all-reduced (max) so that every rank skips alike
#pragma once

#include <torch/torch.h>

#include <functional>
#include <vector>

#include "precision/gemm_format.h"
#include "precision/loss_scaler.h"

namespace mpt::precision {

struct FinishedBackward {
  bool skip = false;             // some gradient was Inf/NaN: no optimizer step; the gradients are left as they were
  double grad_factor = 1.0;      // one-pass: what the optimizer multiplies each gradient by; else 1 (already applied)
  torch::Tensor grad_norm;       // before clipping, when clipping is on and the step applies; undefined otherwise
  ScaleUpdate scale_update;      // the loss scale's rule applied to this step's verdict
  double grads_scaled_by = 1.0;  // the loss scale still in the gradients (a skip leaves the one-pass paths' so)
  bool stop_agreed = false;      // across ranks: some rank asked to stop, so all stop after this step
};

// `grads` carry the loss scale; `max_norm` 0 turns clipping off. Each ends with the scaler's update.
FinishedBackward finish_for_one_pass(const std::vector<torch::Tensor>& grads, LossScaler& scaler, double max_norm);
FinishedBackward finish_in_place(const std::vector<torch::Tensor>& grads, LossScaler& scaler, double max_norm);
// `stop_requested` rides along with the overflow flag in the one all-reduce.
FinishedBackward finish_across_ranks(const std::vector<torch::Tensor>& grads, LossScaler& scaler, double max_norm,
                                     const AgreeMax& agree_max, bool stop_requested);

}  // namespace mpt::precision
