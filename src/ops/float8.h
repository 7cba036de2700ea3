// FP8 numerics: the two formats of FP8 training, the saturating scaled cast into them, and the scaled GEMM.
// E4M3 (max 448, no infinities) carries weights and activations, E5M2 (max 57344) gradients: the "hybrid" recipe.
// On a GPU with FP8 Tensor Cores the GEMM is LibTorch's _scaled_mm; everywhere else it dequantizes the FP8
// operands (exact in FP32) and multiplies in FP32, so the CPU emulation and the GPU share one numerics.
#pragma once

#include <torch/torch.h>

namespace mpt::ops {

enum class Float8 { kE4M3, kE5M2 };

struct Float8Format {
  torch::ScalarType dtype;  // kFloat8_e4m3fn or kFloat8_e5m2
  double max;               // the largest finite value: 448 or 57344
  const char* name;         // "e4m3" or "e5m2"
};
const Float8Format& float8_format(Float8 format);

// x * scale rounded to the nearest FP8 value (ties to even), saturated to +-max: a plain cast would turn E4M3's
// overflow into NaN and E5M2's into Inf. NaN stays NaN. `scale` is a 0-dim FP32 tensor on x's device.
torch::Tensor to_float8(const torch::Tensor& x, const torch::Tensor& scale, Float8 format);

// The elements of x * scale beyond the format's range (those to_float8 saturates), as a 0-dim int64 tensor.
torch::Tensor count_saturated(const torch::Tensor& x, const torch::Tensor& scale, Float8 format);

// (a / scale_a) (b / scale_b)^T for FP8 a (M, K) and b (N, K), accumulated in FP32, returned in `out_dtype`:
// _scaled_mm where it applies (scaled_gemm_on_tensor_cores), else FP32 matmul of the dequantized operands.
torch::Tensor scaled_gemm(const torch::Tensor& a, const torch::Tensor& scale_a, const torch::Tensor& b,
                          const torch::Tensor& scale_b, torch::ScalarType out_dtype);

// Whether scaled_gemm runs on FP8 Tensor Cores for these operands: a CUDA device of compute capability 8.9 or
// later, and K and N multiples of 16 (what _scaled_mm requires).
bool scaled_gemm_on_tensor_cores(const torch::Tensor& a, const torch::Tensor& b);

}  // namespace mpt::ops
