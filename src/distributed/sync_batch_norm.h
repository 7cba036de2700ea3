// Synchronised batch norm: in training, the batch statistics of a norm layer are those of the global batch
// (all ranks together), as PyTorch's SyncBatchNorm computes them, so N ranks of B normalise exactly as one
// process of N x B. Statistics and their gradients are computed in FP32 whatever the input's dtype. In
// evaluation, and in a single process, it is the layer's own forward.
#pragma once

#include <torch/torch.h>

#include "distributed/process_group.h"

namespace mpt::distributed {

// x: (N, C, H, W). Updates `norm`'s running statistics (from the global batch) in training.
torch::Tensor sync_batch_norm(torch::nn::BatchNorm2dImpl& norm, const torch::Tensor& x, Group* group);

}  // namespace mpt::distributed
