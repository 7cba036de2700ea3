// Attention scores for the FP32 softmax: mask_bias + scale * (Q K^T), widened to FP32, in one pass on CPU.
#pragma once

#include <torch/torch.h>

namespace mpt::models {

// products (B, h, S, S) in the compute dtype (BF16 under autocast, or FP32); mask_bias (B, 1, 1, S) FP32, 0 for
// attended keys and a large negative number for [PAD]. Returns FP32 (B, h, S, S). The unfused
// add(mask_bias, products, scale) widens BF16 products in a copy and adds in a second pass, and backward
// multiplies and casts in two more; here forward is one pass and backward one (scale * grad, narrowed to the
// products' dtype). The mask bias gets no gradient (it comes from the token ids). Other devices, shapes and
// dtypes take the unfused form.
torch::Tensor masked_scores(const torch::Tensor& products, const torch::Tensor& mask_bias, double scale);

}  // namespace mpt::models
