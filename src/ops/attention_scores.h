// Attention scores for the FP32 softmax: mask_bias + scale * (Q K^T), widened to FP32, in one pass on CPU; and
// the whole path from the products to the probabilities the second product reads, in one pass.
#pragma once

#include <torch/torch.h>

namespace mpt::ops {

// products (B, h, S, S) in the compute dtype (BF16 under autocast, or FP32); mask_bias (B, 1, 1, S) FP32, 0 for
// attended keys and a large negative number for [PAD]. Returns FP32 (B, h, S, S). The unfused
// add(mask_bias, products, scale) widens BF16 products in a copy and adds in a second pass, and backward
// multiplies and casts in two more; here forward is one pass and backward one (scale * grad, narrowed to the
// products' dtype). The mask bias gets no gradient (it comes from the token ids). Other devices, shapes and
// dtypes take the unfused form.
torch::Tensor masked_scores(const torch::Tensor& products, const torch::Tensor& mask_bias, double scale);

// dropout(softmax(masked_scores(products, mask_bias, scale), -1), p, training).to(dtype): scaling, masking and
// the softmax in FP32, the dropout mask of ops::dropout_to under the same torch seed. On an AVX512-BF16 CPU
// with rows of a multiple of 16 keys it is one pass per row that reads the products and writes the
// probabilities and the FP32 softmax (kept for backward); backward is one pass per row back to the products'
// dtype, with the dropout mask recomputed from its seed. Unfused, the chain made five passes over FP32 (B, h,
// S, S) tensors each way. Everything else takes the three ops above.
torch::Tensor attention_probabilities(const torch::Tensor& products, const torch::Tensor& mask_bias, double scale,
                                      double p, bool training, torch::ScalarType dtype);

}  // namespace mpt::ops
