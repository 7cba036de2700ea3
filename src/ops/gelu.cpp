// GELU in one pass each way (see gelu.h).
#include "ops/gelu.h"

#include <ATen/Parallel.h>

#include <type_traits>

#include "ops/avx512.h"
#include "ops/bf16_bits.h"
#include "ops/dispatch.h"

namespace mpt::ops {
namespace {

#if MPT_AVX512_KERNELS
using avx512::kLanes;
using avx512::load;
using avx512::load_first;
using avx512::store;
using avx512::store_first;

constexpr int64_t kGrain = 1 << 14;

// Phi(x), the standard normal CDF, and phi(x), its density, sharing one exp: with z = |x| / sqrt 2,
// erfc(z) = t (a1 + t (a2 + t (a3 + t (a4 + t a5)))) exp(-z^2), t = 1 / (1 + p z) (Abramowitz & Stegun 7.1.26,
// absolute error below 1.5e-7), and exp(-z^2) = exp(-x^2 / 2) is phi's too. Phi is erfc(z) / 2 below 0 and
// 1 minus that above. In the lower tail this is at least as accurate as ATen's 1 + erf(x / sqrt 2), which
// cancels to 0 in FP32 below x = -5.5; the Numerical Recipes erfc (relative accuracy) cost a second exp and a
// division and made the pass slower than oneDNN's.
struct NormalTerms {
  __m512 cdf, density;
};

MPT_AVX512_BF16 inline NormalTerms normal_terms(__m512 x) {
  const __m512 half_square = _mm512_mul_ps(_mm512_mul_ps(x, x), _mm512_set1_ps(0.5f));
  const __m512 gaussian = avx512::exp(_mm512_sub_ps(_mm512_setzero_ps(), half_square));  // exp(-x^2 / 2)
  const __m512 z = _mm512_mul_ps(_mm512_abs_ps(x), _mm512_set1_ps(0.70710678118654752f));
  const __m512 d = _mm512_fmadd_ps(z, _mm512_set1_ps(0.3275911f), _mm512_set1_ps(1.0f));
  __m512 t = _mm512_rcp14_ps(d);  // 2^-14, then one Newton step: 2^-28
  t = _mm512_mul_ps(t, _mm512_fnmadd_ps(d, t, _mm512_set1_ps(2.0f)));
  __m512 poly = _mm512_set1_ps(1.061405429f);
  for (const float a : {-1.453152027f, 1.421413741f, -0.284496736f, 0.254829592f})
    poly = _mm512_fmadd_ps(poly, t, _mm512_set1_ps(a));
  const __m512 tail = _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(0.5f), _mm512_mul_ps(t, poly)), gaussian);
  const __mmask16 negative = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ);
  const __m512 cdf = _mm512_mask_blend_ps(negative, _mm512_sub_ps(_mm512_set1_ps(1.0f), tail), tail);
  return {cdf, _mm512_mul_ps(gaussian, _mm512_set1_ps(0.39894228040143268f))};
}

MPT_AVX512_BF16 inline __m512 gelu_value(__m512 x) { return _mm512_mul_ps(x, normal_terms(x).cdf); }

// d gelu / dx = Phi(x) + x phi(x).
MPT_AVX512_BF16 inline __m512 gelu_slope(__m512 x) {
  const NormalTerms terms = normal_terms(x);
  return _mm512_fmadd_ps(x, terms.density, terms.cdf);
}

template <typename T>
MPT_AVX512_BF16 void gelu_forward(const T* __restrict x, T* __restrict y, int64_t begin, int64_t end) {
  int64_t i = begin;
  for (; i + kLanes <= end; i += kLanes) store(y + i, gelu_value(load(x + i)));
  if (i < end) store_first(y + i, gelu_value(load_first(x + i, end - i)), end - i);
}

template <typename T>
MPT_AVX512_BF16 void gelu_backward(const T* __restrict grad, const T* __restrict x, T* __restrict dx, int64_t begin,
                                   int64_t end) {
  int64_t i = begin;
  for (; i + kLanes <= end; i += kLanes) store(dx + i, _mm512_mul_ps(load(grad + i), gelu_slope(load(x + i))));
  if (i < end) {
    const int64_t n = end - i;
    store_first(dx + i, _mm512_mul_ps(load_first(grad + i, n), gelu_slope(load_first(x + i, n))), n);
  }
}

// in's element type, for an output of the same dtype.
template <typename In>
using Element = std::remove_const_t<std::remove_pointer_t<In>>;

struct GeluFunction : public torch::autograd::Function<GeluFunction> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x) {
    torch::Tensor y = torch::empty_like(x);
    bf16::with_data(x, [&](const auto* in) {
      auto* out = static_cast<Element<decltype(in)>*>(y.data_ptr());
      at::parallel_for(0, x.numel(), kGrain, [&](int64_t begin, int64_t end) { gelu_forward(in, out, begin, end); });
    });
    ctx->save_for_backward({x});
    return y;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    const torch::Tensor x = ctx->get_saved_variables()[0];
    const torch::Tensor grad = grad_outputs[0].contiguous().to(x.scalar_type());
    torch::Tensor dx = torch::empty_like(x);
    bf16::with_data(x, [&](const auto* in) {
      auto* out = static_cast<Element<decltype(in)>*>(dx.data_ptr());
      const auto* g = static_cast<decltype(in)>(grad.data_ptr());
      at::parallel_for(0, x.numel(), kGrain,
                       [&](int64_t begin, int64_t end) { gelu_backward(g, in, out, begin, end); });
    });
    return {dx};
  }
};
#endif  // MPT_AVX512_KERNELS

}  // namespace

torch::Tensor gelu(const torch::Tensor& x) {
#if MPT_AVX512_KERNELS
  if (avx512_bf16_kernels() && x.device().is_cpu() && bf16::fp32_or_bf16(x) && x.is_contiguous())
    return GeluFunction::apply(x);
#endif
  return torch::gelu(x);
}

}  // namespace mpt::ops
