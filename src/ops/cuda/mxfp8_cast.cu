// The MXFP8 cast on a GPU: one warp per block of 32 values, each lane one value. The rule is ops/mxfp8.cpp's
// (the OCP MX v1.0 scale from the block's amax, elements divided by it, saturated to +-448 and rounded to nearest
// even into E4M3), computed here in one pass over the input instead of LibTorch's several.
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include "ops/cuda/launchers.h"

namespace mpt::ops::cuda {
namespace {

constexpr int kBlock = 32;
constexpr int kE4m3MaxExponent = 8;  // 448 = 1.75 x 2^8
constexpr float kE4m3Max = 448.0f;

__device__ float scale_of(unsigned e) {
  if (e == 255) return __int_as_float(0x7f800000);  // +Inf: a NaN block's finite elements become 0, as torchao
  if (e == 0) return __int_as_float(0x00400000);    // 2^-127, a subnormal, exactly
  return __int_as_float(static_cast<int>(e << 23));
}

__global__ void to_mxfp8_kernel(const float* x, uint8_t* data, uint8_t* scales, int64_t blocks) {
  const int64_t block = static_cast<int64_t>(blockIdx.x) * (blockDim.x / kBlock) + threadIdx.x / kBlock;
  const int lane = threadIdx.x % kBlock;
  if (block >= blocks) return;
  const float v = x[block * kBlock + lane];
  float amax = fabsf(v);
  bool nan = isnan(v);
  for (int offset = kBlock / 2; offset > 0; offset /= 2) {
    amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, offset));
    nan = __any_sync(0xffffffffu, nan);
  }
  // floor(log2(amax)) is amax's biased exponent field less 127; zero and subnormal amaxes take the smallest scale.
  const int exponent = (__float_as_int(amax) >> 23) & 0xff;
  const unsigned e = nan ? 255u : static_cast<unsigned>(min(max(exponent - kE4m3MaxExponent, 0), 254));
  const float scaled = fminf(fmaxf(__fdiv_rn(v, scale_of(e)), -kE4m3Max), kE4m3Max);
  // E4M3FN's NaN is S.1111.111, its sign the value's, as LibTorch casts it.
  data[block * kBlock + lane] = isnan(scaled) ? static_cast<uint8_t>(signbit(scaled) ? 0xff : 0x7f)
                                              : __nv_cvt_float_to_fp8(scaled, __NV_SATFINITE, __NV_E4M3);
  if (lane == 0) scales[block] = static_cast<uint8_t>(e);
}

}  // namespace

int launch_to_mxfp8(const float* x, uint8_t* data, uint8_t* scales, int64_t blocks, void* stream) {
  constexpr int kThreads = 256;  // eight blocks of 32 per CUDA block
  const int64_t grid = (blocks * kBlock + kThreads - 1) / kThreads;
  if (grid > 0)
    to_mxfp8_kernel<<<static_cast<unsigned>(grid), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(x, data, scales,
                                                                                                     blocks);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace mpt::ops::cuda
