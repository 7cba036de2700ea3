// The step between backward and the optimizer, for one process on the CPU: unscale the gradients, check them for
// Inf/NaN, clip their global norm. Done as separate tensor ops this reads every gradient three times (the sum
// of the overflow check, LibTorch's norm, the clip's multiply) and writes it twice (unscale, clip). Here one read
// computes the global L2 norm of the still-scaled gradients, which answers both questions: it is non-finite
// exactly when an element is Inf or NaN (squares are summed in FP32 blocks joined in double, and a block whose
// FP32 sum is not finite is summed again in double, so no finite FP32 gradient reads as an overflow), and
// divided by the scale it is the norm clipping needs. One write then applies a single factor, clip / scale,
// and none is needed when that factor is 1, or when the update applies it as it reads the gradients
// (check_gradients: the trainer's one-pass optimizer step, ops::step_masters; under master_weights its
// gradients are BF16).
#pragma once

#include <torch/torch.h>

#include <vector>

namespace mpt::ops {

struct GradientCheck {
  bool nonfinite = false;  // some element is Inf/NaN: skip the step (the gradients are left as they were)
  double norm = 0.0;       // the unscaled gradients' global L2 norm before clipping (when finite)
  double factor = 1.0;     // what the gradients are multiplied by: 1 / scale, times the clip factor when below 1
};

// Whether these functions can take the gradients: dense FP32 or BF16 CPU tensors. (CUDA has LibTorch's fused
// unscale-and-check kernel instead.)
bool single_pass_applies(const std::vector<torch::Tensor>& grads);

// The check alone: reads the gradients once and returns what unscale_check_and_clip would apply, writing nothing.
GradientCheck check_gradients(const std::vector<torch::Tensor>& grads, double scale, double max_norm);

// Divides every gradient by `scale` and, when max_norm > 0, scales them down to a global norm of at most max_norm
// (LibTorch's clip_grad_norm_ rule: factor max_norm / (norm + 1e-6) when below 1), unless an element is Inf/NaN.
GradientCheck unscale_check_and_clip(const std::vector<torch::Tensor>& grads, double scale, double max_norm);

// The global L2 norm of the gradients, summed in double; Inf/NaN when an element is.
double global_l2_norm(const std::vector<torch::Tensor>& grads);

// For gradients the single pass does not take (a GPU's, data parallelism's): LibTorch's clip_grad_norm_ rule
// (multiply by min(1, max_norm / (norm + 1e-6))) in tensor ops alone. The norm comes back as an FP32 scalar
// tensor on the gradients' device, read when a log line needs it: clip_grad_norm_ returns a double, and on a GPU
// that read is a second host sync every step.
torch::Tensor clip_grad_norm(const std::vector<torch::Tensor>& grads, double max_norm);

}  // namespace mpt::ops
