// a @ b over leading batch dimensions for FP32 on a multi-core CPU: the batch's products shared among the
// threads, each one single-threaded GEMM, in forward and backward.
//
// Why: without MKL (Debian's LibTorch 1.13), ATen runs an FP32 bmm as one threaded BLAS call per batch entry,
// one after the other, each behind a select() through the dispatcher. BERT-base's attention products at b8 are
// 96 GEMMs of 128 x 64 x 128 per call: the two threads met, split and re-joined for every 2-MFLOP product, and
// the 72 calls per step (forward and backward) took 233 ms of self time plus ~56 ms of select/as_strided, about
// 62 GFLOP/s against the 365-400 of a large FP32 GEMM. That slowed the FP32 baseline that mixed precision is
// measured against; BF16 products already go to oneDNN's batched matmul.
#pragma once

#include <torch/torch.h>

namespace mpt::models {

// Whether `batched_matmul` runs its own kernel for these operands: FP32 CPU tensors of the same rank >= 3 with
// equal batch dimensions (no broadcasting), autocast off for the CPU, more than one thread outside a parallel
// region, at least as many products as threads, mpt built with OpenMP and a CBLAS sgemm in the process.
bool splits_batched_matmul(const torch::Tensor& a, const torch::Tensor& b);

// torch::matmul(a, b)'s result and gradients for a (..., M, K) and b (..., K, N); any strides whose last two
// dimensions have a unit stride (transposed views included) are read in place.
torch::Tensor batched_matmul(const torch::Tensor& a, const torch::Tensor& b);

}  // namespace mpt::models
