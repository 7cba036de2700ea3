// MXFP8, the OCP Microscaling format (MX v1.0): blocks of kMxBlock consecutive elements along a tensor's last
// dimension share one power-of-two scale X = 2^(e - 127), stored as an E8M0 byte e, and each element is E4M3.
// The scale follows the spec's rule: e - 127 = floor(log2(amax of the block)) - 8 (E4M3's largest exponent),
// clamped to [-127, 127]; elements are V / X rounded to nearest even and saturated to +-448. A block holding a NaN
// gets e = 255 (NaN); an all-zero block the smallest scale. torchao's prototype.mx_formats (FLOOR mode) computes
// the same bytes; its 0.18 release divides blocks below 2^-118 by 2^-126 instead of their scale 2^-127.
// The GEMM dequantizes both operands to FP32 (exact: E4M3 times a power of two) and multiplies in FP32 on every
// device, which is what Hopper does too; Blackwell's native block-scaled Tensor Cores are not used yet.
#pragma once

#include <torch/torch.h>

namespace mpt::ops {

inline constexpr int64_t kMxBlock = 32;

struct MxTensor {
  torch::Tensor data;    // float8_e4m3fn, the input's shape
  torch::Tensor scales;  // uint8 E8M0 biased exponents, (..., K / kMxBlock)
};

// `x` (..., K), FP32 or BF16, K a multiple of kMxBlock, blocked along its last dimension.
MxTensor to_mxfp8(const torch::Tensor& x);

// The values an MxTensor stands for, in FP32: data x 2^(e - 127), NaN where e = 255.
torch::Tensor from_mxfp8(const MxTensor& t);

// a (M, K) times b (N, K) transposed, both blocked along K, accumulated in FP32 and returned as `out_dtype`.
torch::Tensor mxfp8_mm(const MxTensor& a, const MxTensor& b, torch::ScalarType out_dtype);

}  // namespace mpt::ops
