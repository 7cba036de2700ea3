// BF16 as raw bits for hand-written CPU loops: a BF16 is the top half of an FP32, so widening is a shift and
// narrowing a rounding add. Written out (not through c10::BFloat16) so that the loops using them vectorise.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <cstring>

namespace mpt::bf16 {

inline float widen(uint16_t bits) {
  const uint32_t word = static_cast<uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &word, sizeof(value));
  return value;
}
inline float widen(float value) { return value; }

// Round to nearest even, as c10::BFloat16 does; NaN stays NaN (a select, not a branch).
inline uint16_t narrow(float value) {
  uint32_t word;
  std::memcpy(&word, &value, sizeof(word));
  const uint32_t rounded = (word + 0x7fffU + ((word >> 16) & 1U)) >> 16;
  const uint32_t quiet_nan = (word >> 16) | 0x40U;
  return static_cast<uint16_t>((word & 0x7fffffffU) > 0x7f800000U ? quiet_nan : rounded);
}

// Stores a float as FP32 or, into uint16_t bits, as BF16.
inline void store(float* out, float value) { *out = value; }
inline void store(uint16_t* out, float value) { *out = narrow(value); }

// The dtypes these loops take: FP32 and BF16.
inline bool fp32_or_bf16(const torch::Tensor& t) {
  return t.scalar_type() == torch::kFloat || t.scalar_type() == torch::kBFloat16;
}

inline const uint16_t* bits(const torch::Tensor& t) {
  return reinterpret_cast<const uint16_t*>(t.data_ptr<at::BFloat16>());
}
inline uint16_t* bits(torch::Tensor& t) { return reinterpret_cast<uint16_t*>(t.data_ptr<at::BFloat16>()); }

// Calls body with t's data as const float* (FP32) or as const uint16_t* (BF16 bits); t is one of the two.
template <typename Body>
void with_data(const torch::Tensor& t, Body&& body) {
  if (t.scalar_type() == torch::kBFloat16)
    body(bits(t));
  else
    body(t.data_ptr<float>());
}

// The same for writing: float* or uint16_t*.
template <typename Body>
void with_mutable_data(torch::Tensor& t, Body&& body) {
  if (t.scalar_type() == torch::kBFloat16)
    body(bits(t));
  else
    body(t.data_ptr<float>());
}

}  // namespace mpt::bf16
