// MXFP8 casts and GEMM (see mxfp8.h), in LibTorch ops so that one code serves the CPU and a GPU: the reference,
// and the path wherever no device kernel supports the tensor (ops/cuda/cuda_ops.h).
#include "ops/mxfp8.h"

#include <cmath>
#include <limits>

#include "ops/cuda/cuda_ops.h"
#include "ops/dispatch.h"

namespace mpt::ops {
namespace {

constexpr int64_t kE4m3MaxExponent = 8;  // 448 = 1.75 x 2^8
constexpr double kE4m3Max = 448.0;

// 2^(e - 127) as FP32 from E8M0 bytes (an int32 tensor): e itself as the exponent field (2^-127 for e = 0 is a
// subnormal, exactly), and `for_nan` where e = 255. Casting divides a NaN block by +Inf, as torchao does, so its
// finite elements become 0; the values of such a block are NaN.
torch::Tensor scale_values(const torch::Tensor& e, float for_nan) {
  const torch::Tensor normal = e.clamp_min(1).bitwise_left_shift(23).view(torch::kFloat);
  const torch::Tensor value = torch::where(e.eq(0), torch::full_like(normal, std::ldexp(1.0f, -127)), normal);
  return torch::where(e.eq(255), torch::full_like(value, for_nan), value);
}

}  // namespace

MxTensor to_mxfp8(const torch::Tensor& x) {
  TORCH_CHECK(x.dim() >= 1 && x.size(-1) % kMxBlock == 0, "to_mxfp8: the last dimension (", x.size(-1),
              ") is not a multiple of ", kMxBlock);
  if (hand_kernels_enabled() && cuda::supports_to_mxfp8(x)) return cuda::to_mxfp8(x);
  std::vector<int64_t> blocked = x.sizes().vec();
  blocked.back() /= kMxBlock;
  blocked.push_back(kMxBlock);
  const torch::Tensor values = x.to(torch::kFloat).reshape(blocked);
  const torch::Tensor amax = values.abs().amax(-1);  // NaN when the block holds one
  // floor(log2(amax)) is amax's biased exponent field less 127; zero and subnormal amaxes take the smallest scale.
  const torch::Tensor exponent = amax.view(torch::kInt).bitwise_right_shift(23).bitwise_and(0xFF);
  torch::Tensor e = (exponent - kE4m3MaxExponent).clamp(0, 254);
  e = torch::where(torch::isnan(amax), torch::full_like(e, 255), e);
  const torch::Tensor scale = scale_values(e, std::numeric_limits<float>::infinity()).unsqueeze(-1);
  const torch::Tensor data = (values / scale).clamp(-kE4m3Max, kE4m3Max).to(torch::kFloat8_e4m3fn);
  return {data.reshape(x.sizes()), e.to(torch::kByte)};
}

torch::Tensor from_mxfp8(const MxTensor& t) {
  std::vector<int64_t> blocked = t.scales.sizes().vec();
  blocked.push_back(kMxBlock);
  const torch::Tensor scale =
      scale_values(t.scales.to(torch::kInt), std::numeric_limits<float>::quiet_NaN()).unsqueeze(-1);
  return (t.data.to(torch::kFloat).reshape(blocked) * scale).reshape(t.data.sizes());
}

torch::Tensor mxfp8_mm(const MxTensor& a, const MxTensor& b, torch::ScalarType out_dtype) {
  return torch::mm(from_mxfp8(a), from_mxfp8(b).t()).to(out_dtype);
}

}  // namespace mpt::ops
