// Building blocks of the hand-vectorised CPU kernels (fused batch norm, attention probabilities, GELU): BF16
// loads and stores, and exp and erf on 16 FP32 lanes. Every function that touches a vector is compiled for
// AVX512-BF16 alone (MPT_AVX512_BF16) and may only run where ops::avx512_bf16_kernels() says yes (dispatch.h); callers
// keep LibTorch's ops as the path for every other CPU and build.
#pragma once

#if defined(__x86_64__) && defined(__GNUC__)
// GCC 12's _mm512_undefined_* initialise a variable from itself, which -Wall reports wherever a widening, a
// min or a max is inlined (GCC bug 105593, fixed in GCC 13).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <cstdint>

#define MPT_AVX512_KERNELS 1
#define MPT_AVX512_BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")))

namespace mpt::ops::avx512 {

constexpr int64_t kLanes = 16;  // FP32 lanes in a vector

// 16 BF16 values widened to FP32 (a BF16 is the top half of an FP32), or 16 FP32 values.
MPT_AVX512_BF16 inline __m512 load(const uint16_t* p) {
  const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16));
}
MPT_AVX512_BF16 inline __m512 load(const float* p) { return _mm512_loadu_ps(p); }

// The first n < 16 of them; the other lanes read as 0.
MPT_AVX512_BF16 inline __m512 load_first(const uint16_t* p, int64_t n) {
  const __m256i bits = _mm256_maskz_loadu_epi16(static_cast<__mmask16>((1U << n) - 1), p);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16));
}
MPT_AVX512_BF16 inline __m512 load_first(const float* p, int64_t n) {
  return _mm512_maskz_loadu_ps(static_cast<__mmask16>((1U << n) - 1), p);
}

// 16 FP32 values rounded to nearest even BF16 (NaN stays NaN) by vcvtneps2bf16, or stored as they are.
MPT_AVX512_BF16 inline void store(uint16_t* p, __m512 v) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(v)));
}
MPT_AVX512_BF16 inline void store(float* p, __m512 v) { _mm512_storeu_ps(p, v); }

MPT_AVX512_BF16 inline void store_first(uint16_t* p, __m512 v, int64_t n) {
  _mm256_mask_storeu_epi16(p, static_cast<__mmask16>((1U << n) - 1), reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(v)));
}
MPT_AVX512_BF16 inline void store_first(float* p, __m512 v, int64_t n) {
  _mm512_mask_storeu_ps(p, static_cast<__mmask16>((1U << n) - 1), v);
}

// e^x within 2 ulp: x = n ln2 + r with |r| <= ln2 / 2 (ln2 split in two so that n ln2 is exact for |n| < 2^15),
// e^r by its Taylor series to r^7 (truncation below 2^-27), times 2^n by vscalefps, which also gives 0 below
// e^-104 and inf above e^89. NaN stays NaN: max and min return their second operand when either is NaN.
MPT_AVX512_BF16 inline __m512 exp(__m512 x) {
  x = _mm512_min_ps(_mm512_set1_ps(89.0f), _mm512_max_ps(_mm512_set1_ps(-104.0f), x));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.0f / 5040.0f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(p, n);
}

MPT_AVX512_BF16 inline __m512 horizontal_sum(__m512 v) { return _mm512_set1_ps(_mm512_reduce_add_ps(v)); }
MPT_AVX512_BF16 inline __m512 horizontal_max(__m512 v) { return _mm512_set1_ps(_mm512_reduce_max_ps(v)); }

}  // namespace mpt::ops::avx512

#else
#define MPT_AVX512_KERNELS 0
#endif
