// The multi-tensor optimizer step: what the fused optimizers (fused_optimizers.h) take for parameters on a GPU.
#pragma once

#include <torch/torch.h>

namespace mpt::ops {

// The step of an Adam, AdamW or SGD (mpt's or LibTorch's) in LibTorch's multi-tensor `_foreach` ops: the same
// arithmetic, state and serialisation as LibTorch's step, in a few kernel launches per group instead of about eight
// per parameter, which made LibTorch's C++ Adam a costly part of a GPU step for a model of many tensors such as
// ResNet-50 (docs/findings.md). The fused optimizers take it when their parameters are on a GPU; tests run it on
// CPU tensors, where the ops run tensor by tensor. Returns false and does nothing for what it does not cover
// (amsgrad, sparse gradients, another optimizer).
bool multi_tensor_step(torch::optim::Optimizer& optimizer);

}  // namespace mpt::ops
