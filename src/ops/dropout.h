// Dropout whose CPU mask is counter-based: one 64-bit seed drawn from torch's default generator per call, then an
// independent hash of (seed, element index) per element, filled on all threads. LibTorch's CPU dropout draws every
// element from one mt19937 in sequence (without MKL, as in Debian's build), which made it a large part of a
// BERT-base BF16 step (docs/findings.md). Reproducible under torch::manual_seed and across a checkpoint resume (the
// generator's state is checkpointed); CUDA keeps LibTorch's own parallel Philox dropout, and so does every device
// under MPT_PORTABLE_KERNELS=1 (ops/dispatch.h): another mask, the same distribution.
#pragma once

#include <torch/torch.h>

namespace mpt::ops {

// Zeroes each element with probability p and scales the rest by 1 / (1 - p) when training; x itself otherwise.
torch::Tensor dropout(const torch::Tensor& x, double p, bool training);

// residual + dropout(y, p, training) in one pass on CPU, for the residual connection after a projection. With y
// BF16/FP16 and the residual FP32 (autocast), the unfused form rounds y * mask to BF16, widens it to FP32 in a
// copy and adds in a third pass, and backward runs a cast and a multiply; here forward reads y and the residual
// once and backward writes y's gradient once (the mask is recomputed from its seed, not stored). The result has
// the residual's dtype and equals dropout(y) + residual for FP32 y under the same torch seed. Other devices,
// layouts and dtypes take the unfused form.
torch::Tensor dropout_add(const torch::Tensor& y, const torch::Tensor& residual, double p, bool training);

// dropout(x, p, training).to(dtype) in one pass on CPU, for attention probabilities computed in FP32 and
// multiplied in BF16: one read of x, one write of the result, and in backward one pass back to x's dtype.
// Same mask as dropout under the same torch seed. Other devices, layouts and dtypes take the unfused form.
torch::Tensor dropout_to(const torch::Tensor& x, double p, bool training, torch::ScalarType dtype);

}  // namespace mpt::ops
