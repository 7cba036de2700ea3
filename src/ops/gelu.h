// GELU (the exact, erf form: x * Phi(x)) as one vectorised pass each way on CPU.
#pragma once

#include <torch/torch.h>

namespace mpt::ops {

// torch::gelu(x). On an AVX512-BF16 CPU, for contiguous FP32 or BF16 x, forward and backward are each one pass over
// the elements with Phi computed in FP32 (absolute error below 1e-7); LibTorch runs BF16 GELU through oneDNN's
// eltwise primitives, whose backward cost more than one pass when measured (docs/findings.md), and FP32 GELU
// through ATen's loops. Everything else takes torch::gelu.
torch::Tensor gelu(const torch::Tensor& x);

}  // namespace mpt::ops
