// FP8 casts and the scaled GEMM (see float8.h).
#include "ops/float8.h"

#include "hardware/hardware.h"

namespace mpt::ops {

const Float8Format& float8_format(Float8 format) {
  static const Float8Format e4m3{torch::kFloat8_e4m3fn, 448.0, "e4m3"};
  static const Float8Format e5m2{torch::kFloat8_e5m2, 57344.0, "e5m2"};
  return format == Float8::kE4M3 ? e4m3 : e5m2;
}

torch::Tensor to_float8(const torch::Tensor& x, const torch::Tensor& scale, Float8 format) {
  const Float8Format& f = float8_format(format);
  return (x.to(torch::kFloat) * scale).clamp(-f.max, f.max).to(f.dtype);
}

torch::Tensor count_saturated(const torch::Tensor& x, const torch::Tensor& scale, Float8 format) {
  return (x.to(torch::kFloat).abs() * scale).gt(float8_format(format).max).sum();
}

bool scaled_gemm_on_tensor_cores(const torch::Tensor& a, const torch::Tensor& b) {
  if (!a.is_cuda()) return false;
  static const int capability = hardware::cuda_compute_capability();
  return capability >= 89 && a.size(1) % 16 == 0 && b.size(0) % 16 == 0;
}

torch::Tensor scaled_gemm(const torch::Tensor& a, const torch::Tensor& scale_a, const torch::Tensor& b,
                          const torch::Tensor& scale_b, torch::ScalarType out_dtype) {
  if (scaled_gemm_on_tensor_cores(a, b)) {
    // _scaled_mm multiplies by its scales (dequantization), wants the second operand column-major, and takes an
    // E5M2 operand only as the first.
    return at::_scaled_mm(a, b.t(), scale_a.reciprocal(), scale_b.reciprocal(), std::nullopt, std::nullopt, out_dtype);
  }
  const torch::Tensor product = torch::mm(a.to(torch::kFloat), b.to(torch::kFloat).t());
  return product.mul_(scale_a.mul(scale_b).reciprocal()).to(out_dtype);
}

}  // namespace mpt::ops
