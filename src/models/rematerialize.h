// Selective activation checkpointing of a cheap operation's output that a GEMM saved for its backward (a GELU's
// output, a LayerNorm's narrow copy): its memory is let go after the forward and filled again just before backward
// reaches the GEMM, from tensors backward keeps anyway. The GEMM, its saved-tensor bookkeeping and its backward
// kernels are untouched, so its gradients are bit for bit those of the run that kept the tensor.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <vector>

namespace mpt::models {

// Computes a tensor again, bit for bit, from tensors that backward keeps anyway.
using Recomputation = std::function<torch::Tensor()>;

// `again` run with `device`'s generator at its state of now and put back after: the same dropout masks as a forward
// that runs next.
Recomputation with_generator_of_now(Recomputation again, torch::DeviceType device);

// Lets go of `value`'s memory now and refills it with `again()` - under the autocast state of now - just before
// backward reaches any of `readers`, the outputs of the operations that saved `value`. Returns the readers, which
// the caller uses from here on in their place (through one node whose backward refills). The forward must not read
// `value` after this call. Without gradients, without `again`, or for a value that does not own its whole storage
// it does nothing and returns `readers`.
std::vector<torch::Tensor> refill_in_backward(const torch::Tensor& value, Recomputation again,
                                              const std::vector<torch::Tensor>& readers);

}  // namespace mpt::models
