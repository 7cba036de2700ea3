// Training batch norm on BF16 channels-last activations, with the ReLU and the residual add that follow it in a
// ResNet block done in the same passes, hand-vectorised for CPUs with AVX512-BF16.
//
// Why: LibTorch's CPU kernels for these ops ran no faster on BF16 than on FP32 when measured (batch norm's forward
// as slow in both, BF16 ReLU and add slower than FP32 on their own; docs/findings.md has the runs), because each
// element is widened and rounded back by scalar-like code. Here a widening is two instructions per 16 elements and the
// rounding one (vcvtneps2bf16), so the passes run at the speed of memory, which is half FP32's traffic.
//
// Numerics match LibTorch's batch norm: statistics and normalisation in FP32 (sums in FP32 over blocks of rows,
// joined in double), the result rounded once to BF16; the backward is batch norm's full input gradient. ReLU
// keeps NaN and passes the gradient where its output is not <= 0, as threshold_backward does.
#pragma once

#include <torch/torch.h>

namespace mpt::ops {

// Whether fused_batch_norm runs this: training with affine FP32 parameters and running statistics, x a BF16
// channels-last CPU tensor with a multiple of 16 channels (residual, when defined, alike), on a CPU with
// AVX512-BF16. Otherwise the caller runs LibTorch's ops.
bool can_fuse_batch_norm(const torch::nn::BatchNorm2dImpl& norm, const torch::Tensor& x, const torch::Tensor& residual);

// relu?(batch_norm(x) + residual?), updating norm's running statistics and batch count as its forward does.
// `residual` may be undefined (no add).
torch::Tensor fused_batch_norm(torch::nn::BatchNorm2dImpl& norm, const torch::Tensor& x, const torch::Tensor& residual,
                               bool relu);

}  // namespace mpt::ops
