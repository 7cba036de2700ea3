// y = x W^T + b for FP32 on a multi-core CPU, whose backward gives each thread its own share of the gradient
// GEMMs instead of letting the BLAS thread one small GEMM.
//
// Why: OpenBLAS's own threading of a small GEMM leaves much of the second core's time unused. For a layer the size
// of the MLP's, single-threaded calls on a share of the rows each, run side by side, beat one threaded call for
// both the weight and the input gradient (docs/findings.md). From about 2^28 multiply-adds (BERT-base's projections
// at b8) the threaded call is as fast, so larger layers keep LibTorch's path. The forward GEMM showed no such gain
// and stays LibTorch's `addmm`.
#pragma once

#include <torch/torch.h>

namespace mpt::ops {

// Whether `linear` runs its own backward for these operands: FP32 CPU tensors, x 2-D, autocast off for the CPU,
// more than one thread outside a parallel region, mpt built with OpenMP, and a GEMM small enough to gain.
bool splits_linear_backward(const torch::Tensor& x, const torch::Tensor& weight);

// torch::nn::functional::linear's result and gradients; `bias` may be undefined.
torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias);

}  // namespace mpt::ops
