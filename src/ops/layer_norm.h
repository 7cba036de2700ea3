// LayerNorm over the last dimension in FP32 that also writes its output narrowed to the compute dtype, for a
// transformer whose norm output is both the FP32 residual stream and the input of the next BF16 GEMM.
#pragma once

#include <torch/torch.h>

namespace mpt::ops {

struct NormOutput {
  torch::Tensor fp32;    // layer_norm(x) in FP32
  torch::Tensor narrow;  // the same values rounded to the compute dtype
};

// Unfused, the narrow copy is a cast (one more read of the FP32 output) and backward a cast back plus an add of
// the two paths' gradients. On an AVX512-BF16 CPU, with x FP32 and contiguous, a hidden size that is a multiple
// of 16, FP32 affine parameters and a BF16 compute dtype, forward is one pass per row that writes both outputs,
// and backward one pass per row that takes both gradients (either may be absent). Otherwise torch::layer_norm
// and a cast; with an FP32 compute dtype `narrow` is `fp32` itself.
NormOutput layer_norm_and_narrow(const torch::Tensor& x, const torch::nn::LayerNormImpl& norm,
                                 torch::ScalarType compute_dtype);

}  // namespace mpt::ops
