// LayerNorm with a narrowed copy of its output (see layer_norm.h). Rows are the tokens: each row of H values
// stays in L1 while forward computes its mean and variance and writes both outputs, and while backward reduces
// and writes the input gradient. The weight and bias gradients are per-column sums over all rows; each thread
// adds its rows into its own pair of H-float accumulators, summed at the end.
#include "ops/layer_norm.h"

#include <ATen/Parallel.h>

#include "ops/avx512.h"
#include "ops/bf16_bits.h"
#include "ops/dispatch.h"

namespace mpt::ops {
namespace {

#if MPT_AVX512_KERNELS
using avx512::kLanes;
using avx512::load;
using avx512::store;

constexpr int64_t kGrainElements = 1 << 14;

// Rows [begin, end): y = (x - mean) * rstd * weight + bias, written as FP32 and as BF16; mean and rstd saved.
MPT_AVX512_BF16 void norm_forward(const float* __restrict x, const float* __restrict weight,
                                  const float* __restrict bias, float* __restrict y, uint16_t* __restrict narrow,
                                  float* __restrict mean_out, float* __restrict rstd_out, int64_t begin, int64_t end,
                                  int64_t hidden, float eps) {
  const __m512 inverse_hidden = _mm512_set1_ps(1.0f / static_cast<float>(hidden));
  for (int64_t row = begin; row < end; ++row) {
    const float* in = x + row * hidden;
    __m512 sum = _mm512_setzero_ps();
    for (int64_t j = 0; j < hidden; j += kLanes) sum = _mm512_add_ps(sum, load(in + j));
    const __m512 mean = _mm512_mul_ps(avx512::horizontal_sum(sum), inverse_hidden);
    __m512 squares = _mm512_setzero_ps();
    for (int64_t j = 0; j < hidden; j += kLanes) {
      const __m512 centred = _mm512_sub_ps(load(in + j), mean);
      squares = _mm512_fmadd_ps(centred, centred, squares);
    }
    const __m512 variance = _mm512_mul_ps(avx512::horizontal_sum(squares), inverse_hidden);
    const __m512 rstd =
        _mm512_div_ps(_mm512_set1_ps(1.0f), _mm512_sqrt_ps(_mm512_add_ps(variance, _mm512_set1_ps(eps))));
    for (int64_t j = 0; j < hidden; j += kLanes) {
      const __m512 normed = _mm512_mul_ps(_mm512_sub_ps(load(in + j), mean), rstd);
      const __m512 out = _mm512_fmadd_ps(normed, load(weight + j), load(bias + j));
      store(y + row * hidden + j, out);
      store(narrow + row * hidden + j, out);
    }
    mean_out[row] = _mm512_cvtss_f32(mean);
    rstd_out[row] = _mm512_cvtss_f32(rstd);
  }
}

// The gradient reaching the output: the FP32 path's plus the narrowed path's (either pointer may be null).
MPT_AVX512_BF16 inline __m512 output_gradient(const float* grad, const uint16_t* grad_narrow, int64_t i) {
  __m512 g = grad ? load(grad + i) : _mm512_setzero_ps();
  if (grad_narrow) g = _mm512_add_ps(g, load(grad_narrow + i));
  return g;
}

// Rows [begin, end): dx = rstd * (g w - mean(g w) - x^ mean(g w x^)), and g x^, g added into this thread's
// weight and bias accumulators.
MPT_AVX512_BF16 void norm_backward(const float* __restrict grad, const uint16_t* __restrict grad_narrow,
                                   const float* __restrict x, const float* __restrict weight,
                                   const float* __restrict mean, const float* __restrict rstd, float* __restrict dx,
                                   float* __restrict d_weight, float* __restrict d_bias, int64_t begin, int64_t end,
                                   int64_t hidden) {
  const __m512 inverse_hidden = _mm512_set1_ps(1.0f / static_cast<float>(hidden));
  for (int64_t row = begin; row < end; ++row) {
    const int64_t first = row * hidden;
    const __m512 row_mean = _mm512_set1_ps(mean[row]), row_rstd = _mm512_set1_ps(rstd[row]);
    __m512 sum_gw = _mm512_setzero_ps(), sum_gwx = _mm512_setzero_ps();
    for (int64_t j = 0; j < hidden; j += kLanes) {
      const __m512 g = output_gradient(grad, grad_narrow, first + j);
      const __m512 normed = _mm512_mul_ps(_mm512_sub_ps(load(x + first + j), row_mean), row_rstd);
      const __m512 gw = _mm512_mul_ps(g, load(weight + j));
      sum_gw = _mm512_add_ps(sum_gw, gw);
      sum_gwx = _mm512_fmadd_ps(gw, normed, sum_gwx);
      store(d_weight + j, _mm512_fmadd_ps(g, normed, load(d_weight + j)));
      store(d_bias + j, _mm512_add_ps(g, load(d_bias + j)));
    }
    const __m512 a = _mm512_mul_ps(avx512::horizontal_sum(sum_gw), inverse_hidden);
    const __m512 b = _mm512_mul_ps(avx512::horizontal_sum(sum_gwx), inverse_hidden);
    for (int64_t j = 0; j < hidden; j += kLanes) {
      const __m512 g = output_gradient(grad, grad_narrow, first + j);
      const __m512 normed = _mm512_mul_ps(_mm512_sub_ps(load(x + first + j), row_mean), row_rstd);
      const __m512 gw = _mm512_mul_ps(g, load(weight + j));
      const __m512 centred = _mm512_sub_ps(_mm512_sub_ps(gw, a), _mm512_mul_ps(normed, b));
      store(dx + first + j, _mm512_mul_ps(row_rstd, centred));
    }
  }
}

struct LayerNormNarrowFunction : public torch::autograd::Function<LayerNormNarrowFunction> {
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                                                const torch::Tensor& weight, const torch::Tensor& bias, double eps) {
    const int64_t hidden = x.size(-1), rows = x.numel() / hidden;
    torch::Tensor y = torch::empty_like(x);
    torch::Tensor narrow = torch::empty(x.sizes(), x.options().dtype(torch::kBFloat16));
    torch::Tensor mean = torch::empty({rows}, x.options()), rstd = torch::empty({rows}, x.options());
    at::parallel_for(0, rows, std::max<int64_t>(1, kGrainElements / hidden), [&](int64_t begin, int64_t end) {
      norm_forward(x.data_ptr<float>(), weight.data_ptr<float>(), bias.data_ptr<float>(), y.data_ptr<float>(),
                   bf16::bits(narrow), mean.data_ptr<float>(), rstd.data_ptr<float>(), begin, end, hidden,
                   static_cast<float>(eps));
    });
    ctx->save_for_backward({x, weight, mean, rstd});
    return {y, narrow};
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &x = saved[0], &weight = saved[1], &mean = saved[2], &rstd = saved[3];
    const torch::Tensor grad = grad_outputs[0].defined() ? grad_outputs[0].contiguous() : torch::Tensor();
    const torch::Tensor grad_narrow = grad_outputs[1].defined() ? grad_outputs[1].contiguous() : torch::Tensor();
    const int64_t hidden = x.size(-1), rows = x.numel() / hidden;
    torch::Tensor dx = torch::empty_like(x);
    // One pair of accumulators per thread that may run a share (at::parallel_for numbers them from 0).
    const int64_t threads = at::get_num_threads();
    torch::Tensor partial = torch::zeros({threads, 2, hidden}, x.options());
    at::parallel_for(0, rows, std::max<int64_t>(1, kGrainElements / hidden), [&](int64_t begin, int64_t end) {
      float* sums = partial.data_ptr<float>() + at::get_thread_num() * 2 * hidden;
      norm_backward(grad.defined() ? grad.data_ptr<float>() : nullptr,
                    grad_narrow.defined() ? bf16::bits(grad_narrow) : nullptr, x.data_ptr<float>(),
                    weight.data_ptr<float>(), mean.data_ptr<float>(), rstd.data_ptr<float>(), dx.data_ptr<float>(),
                    sums, sums + hidden, begin, end, hidden);
    });
    const torch::Tensor totals = partial.sum(0);  // (2, H)
    return {dx, totals[0], totals[1], torch::Tensor()};
  }
};

bool fusable(const torch::Tensor& x, const torch::nn::LayerNormImpl& norm, torch::ScalarType compute_dtype) {
  const auto& shape = norm.options.normalized_shape();
  if (!avx512_bf16_kernels() || compute_dtype != torch::kBFloat16 || !norm.options.elementwise_affine()) return false;
  if (!x.device().is_cpu() || x.scalar_type() != torch::kFloat || !x.is_contiguous() || x.dim() < 2 || x.numel() == 0 ||
      shape.size() != 1 || shape[0] != x.size(-1) || x.size(-1) % kLanes != 0)
    return false;
  for (const torch::Tensor& p : {norm.weight, norm.bias})
    if (!p.defined() || p.scalar_type() != torch::kFloat || !p.device().is_cpu() || !p.is_contiguous()) return false;
  return true;
}
#endif  // MPT_AVX512_KERNELS

}  // namespace

NormOutput layer_norm_and_narrow(const torch::Tensor& x, const torch::nn::LayerNormImpl& norm,
                                 torch::ScalarType compute_dtype) {
#if MPT_AVX512_KERNELS
  if (fusable(x, norm, compute_dtype)) {
    const torch::autograd::variable_list out =
        LayerNormNarrowFunction::apply(x, norm.weight, norm.bias, norm.options.eps());
    return {out[0], out[1]};
  }
#endif
  const auto& o = norm.options;
  torch::Tensor y = torch::layer_norm(x, o.normalized_shape(), norm.weight, norm.bias, o.eps());
  return {y, y.scalar_type() == compute_dtype ? y : y.to(compute_dtype)};
}

}  // namespace mpt::ops
