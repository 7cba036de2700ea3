// Fused BF16 training batch norm (see fused_batch_norm.h). A channels-last (N, C, H, W) tensor is, in memory,
// an (M = N*H*W, C) matrix: the elementwise passes run over rows and, within a row, over 16-channel vectors;
// the per-channel sums keep a tile of up to 64 channels in registers while they walk a block of rows, so no
// accumulator goes through memory per row. Each thread takes its own block of rows.
#include "ops/fused_batch_norm.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "common/error.h"
#include "ops/avx512.h"
#include "ops/dispatch.h"

namespace mpt::ops {

#if MPT_AVX512_KERNELS
namespace {

using avx512::kLanes;  // channels per vector
using avx512::load;
using avx512::store;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

constexpr int64_t kTileVectors = 4;        // channels summed at once: 64, eight accumulators
constexpr int64_t kBlockRows = 64;         // rows summed in FP32 before the block's sums join the double totals
constexpr int64_t kGrainElements = 16384;  // elements per parallel task in the elementwise passes

// The gradient reaching the norm's output: dy where the ReLU's output y is not <= 0 (so NaN passes), else 0,
// as LibTorch's threshold_backward computes it.
template <bool kRelu>
MPT_AVX512_BF16 inline __m512 passed_gradient(const uint16_t* dy, const uint16_t* y) {
  const __m512 g = load(dy);
  if constexpr (!kRelu) {
    return g;
  } else {
    const __mmask16 passed = _mm512_cmp_ps_mask(load(y), _mm512_setzero_ps(), _CMP_NLE_UQ);
    return _mm512_maskz_mov_ps(passed, g);
  }
}

// Forward statistics: d = x - shift and d^2, the shift being x's first row. Deviations from a value near the
// mean do not cancel the way sum(x^2) - M mean^2 can.
struct ShiftedTerms {
  const uint16_t* x;
  const float* shift;
  int64_t channels;
  MPT_AVX512_BF16 void operator()(int64_t row, int64_t c, __m512& sum, __m512& sum_sq) const {
    const __m512 d = _mm512_sub_ps(load(x + row * channels + c), _mm512_loadu_ps(shift + c));
    sum = _mm512_add_ps(sum, d);
    sum_sq = _mm512_fmadd_ps(d, d, sum_sq);
  }
};

// Backward statistics: g (the gradient past the ReLU) and g * (x - mean).
template <bool kRelu>
struct GradientTerms {
  const uint16_t *dy, *y, *x;
  const float* mean;
  int64_t channels;
  MPT_AVX512_BF16 void operator()(int64_t row, int64_t c, __m512& sum_g, __m512& sum_g_centered) const {
    const int64_t at = row * channels + c;
    const __m512 g = passed_gradient<kRelu>(dy + at, y + at);
    sum_g = _mm512_add_ps(sum_g, g);
    sum_g_centered = _mm512_fmadd_ps(g, _mm512_sub_ps(load(x + at), _mm512_loadu_ps(mean + c)), sum_g_centered);
  }
};

// Adds the two sums of `terms` over rows [begin, end) for channels [c0, c0 + 16 kVectors) into first and second.
template <int64_t kVectors, typename Terms>
MPT_AVX512_BF16 void tile_sums(const Terms& terms, int64_t begin, int64_t end, int64_t c0, double* first,
                               double* second) {
  __m512 a[kVectors], b[kVectors];
  for (int64_t v = 0; v < kVectors; ++v) a[v] = b[v] = _mm512_setzero_ps();
  for (int64_t row = begin; row < end; ++row)
    for (int64_t v = 0; v < kVectors; ++v) terms(row, c0 + v * kLanes, a[v], b[v]);
  alignas(64) float lanes[kLanes];
  for (int64_t v = 0; v < kVectors; ++v) {
    _mm512_store_ps(lanes, a[v]);
    for (int64_t i = 0; i < kLanes; ++i) first[c0 + v * kLanes + i] += lanes[i];
    _mm512_store_ps(lanes, b[v]);
    for (int64_t i = 0; i < kLanes; ++i) second[c0 + v * kLanes + i] += lanes[i];
  }
}

// Two per-channel sums over all rows, [first sums..., second sums...]: each thread walks its rows in blocks of
// kBlockRows, summing every channel tile of a block in FP32 registers and adding those into its own double
// totals; the threads' totals are added in thread order, so the result is the same on every run.
template <typename Terms>
std::vector<double> sum_over_rows(const Terms& terms, int64_t rows, int64_t channels) {
  const int64_t tasks = std::clamp<int64_t>((rows + kBlockRows - 1) / kBlockRows, 1, at::get_num_threads());
  std::vector<double> partial(tasks * 2 * channels, 0.0);
  at::parallel_for(0, tasks, 1, [&](int64_t first_task, int64_t last_task) {
    for (int64_t t = first_task; t < last_task; ++t) {
      double* first = partial.data() + t * 2 * channels;
      double* second = first + channels;
      const int64_t end = rows * (t + 1) / tasks;
      for (int64_t begin = rows * t / tasks; begin < end; begin += kBlockRows) {
        const int64_t block_end = std::min(end, begin + kBlockRows);
        int64_t c0 = 0;
        for (; c0 + kTileVectors * kLanes <= channels; c0 += kTileVectors * kLanes)
          tile_sums<kTileVectors>(terms, begin, block_end, c0, first, second);
        for (; c0 < channels; c0 += kLanes) tile_sums<1>(terms, begin, block_end, c0, first, second);
      }
    }
  });
  std::vector<double> totals(2 * channels, 0.0);
  for (int64_t t = 0; t < tasks; ++t)
    for (int64_t c = 0; c < 2 * channels; ++c) totals[c] += partial[t * 2 * channels + c];
  return totals;
}

// y = relu?(x * alpha + beta + residual?) over rows [begin, end), rounded once to BF16, with alpha = weight *
// invstd and beta = bias - mean * alpha as LibTorch's kernel computes them. max(0, v) returns v when v is NaN,
// so an overflow still reaches the loss scaler's check.
template <bool kResidual, bool kRelu>
MPT_AVX512_BF16 void normalize_rows(const uint16_t* x, const uint16_t* residual, uint16_t* y, int64_t begin,
                                    int64_t end, int64_t channels, const float* alpha, const float* beta) {
  for (int64_t row = begin; row < end; ++row) {
    for (int64_t c = 0; c < channels; c += kLanes) {
      const int64_t at = row * channels + c;
      __m512 v = _mm512_fmadd_ps(load(x + at), _mm512_loadu_ps(alpha + c), _mm512_loadu_ps(beta + c));
      if constexpr (kResidual) v = _mm512_add_ps(v, load(residual + at));
      if constexpr (kRelu) v = _mm512_max_ps(_mm512_setzero_ps(), v);
      store(y + at, v);
    }
  }
}

// dx = a (g - mean_g) + b (x - mean), batch norm's input gradient with a = weight * invstd and
// b = -a * invstd^2 * mean(g * (x - mean)); the residual's gradient is g itself (exact in BF16: dy or 0).
template <bool kResidual, bool kRelu>
MPT_AVX512_BF16 void gradient_rows(const uint16_t* dy, const uint16_t* y, const uint16_t* x, uint16_t* dx,
                                   uint16_t* d_residual, int64_t begin, int64_t end, int64_t channels,
                                   const float* mean, const float* a, const float* mean_g, const float* b) {
  for (int64_t row = begin; row < end; ++row) {
    for (int64_t c = 0; c < channels; c += kLanes) {
      const int64_t at = row * channels + c;
      const __m512 g = passed_gradient<kRelu>(dy + at, y + at);
      if constexpr (kResidual) store(d_residual + at, g);
      const __m512 centered = _mm512_sub_ps(load(x + at), _mm512_loadu_ps(mean + c));
      const __m512 from_g = _mm512_mul_ps(_mm512_loadu_ps(a + c), _mm512_sub_ps(g, _mm512_loadu_ps(mean_g + c)));
      store(dx + at, _mm512_fmadd_ps(_mm512_loadu_ps(b + c), centered, from_g));
    }
  }
}

// Calls f with std::integral_constant<bool, ...> for each flag, so the loops get them as template arguments.
template <typename F>
void with_flags(bool first, bool second, F&& f) {
  using Yes = std::true_type;
  using No = std::false_type;
  if (first && second)
    f(Yes{}, Yes{});
  else if (first)
    f(Yes{}, No{});
  else if (second)
    f(No{}, Yes{});
  else
    f(No{}, No{});
}

const uint16_t* bits(const torch::Tensor& t) { return reinterpret_cast<const uint16_t*>(t.data_ptr<at::BFloat16>()); }
uint16_t* mutable_bits(torch::Tensor& t) { return reinterpret_cast<uint16_t*>(t.data_ptr<at::BFloat16>()); }
int64_t rows_of(const torch::Tensor& x) { return x.numel() / x.size(1); }
// Rows per parallel task: wide layers (2,048 channels of a 2 x 2 image) have few rows, and both threads need some.
int64_t grain_rows(int64_t channels) { return std::max<int64_t>(1, kGrainElements / channels); }
torch::Tensor per_channel_floats(int64_t channels) { return torch::empty({channels}, torch::kFloat); }

// Normalisation and its gradient; the batch statistics (mean, invstd) come in as constants, computed without
// autograd as LibTorch's own batch norm does. Without a residual, `residual` is an empty placeholder (LibTorch
// 1.13's custom functions take no undefined inputs) and has_residual is false.
struct FusedBatchNormFunction : public torch::autograd::Function<FusedBatchNormFunction> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& weight,
                               const torch::Tensor& bias, const torch::Tensor& residual, const torch::Tensor& mean,
                               const torch::Tensor& invstd, bool has_residual, bool relu) {
    const int64_t channels = x.size(1), rows = rows_of(x);
    const torch::Tensor alpha = invstd * weight.detach();
    const torch::Tensor beta = bias.detach() - mean * alpha;
    torch::Tensor y = torch::empty_like(x, torch::MemoryFormat::ChannelsLast);
    const uint16_t* x_bits = bits(x);
    const uint16_t* residual_bits = has_residual ? bits(residual) : nullptr;
    uint16_t* y_bits = mutable_bits(y);
    with_flags(has_residual, relu, [&](auto with_residual, auto with_relu) {
      at::parallel_for(0, rows, grain_rows(channels), [&](int64_t begin, int64_t end) {
        normalize_rows<decltype(with_residual)::value, decltype(with_relu)::value>(
            x_bits, residual_bits, y_bits, begin, end, channels, alpha.data_ptr<float>(), beta.data_ptr<float>());
      });
    });
    ctx->saved_data["relu"] = relu;
    ctx->saved_data["residual"] = has_residual;
    ctx->save_for_backward({x, relu ? y : torch::Tensor(), weight, mean, invstd});
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &x = saved[0], &y = saved[1], &weight = saved[2], &mean = saved[3], &invstd = saved[4];
    const bool relu = ctx->saved_data["relu"].toBool(), has_residual = ctx->saved_data["residual"].toBool();
    const torch::Tensor dy = grad_outputs[0].to(torch::kBFloat16).contiguous(torch::MemoryFormat::ChannelsLast);
    const int64_t channels = x.size(1), rows = rows_of(x);
    const uint16_t *dy_bits = bits(dy), *x_bits = bits(x);
    const uint16_t* y_bits = relu ? bits(y) : nullptr;  // read only for the ReLU's mask

    std::vector<double> sums;
    if (relu)
      sums =
          sum_over_rows(GradientTerms<true>{dy_bits, y_bits, x_bits, mean.data_ptr<float>(), channels}, rows, channels);
    else
      sums = sum_over_rows(GradientTerms<false>{dy_bits, y_bits, x_bits, mean.data_ptr<float>(), channels}, rows,
                           channels);

    torch::Tensor d_weight = per_channel_floats(channels), d_bias = per_channel_floats(channels);
    torch::Tensor a = per_channel_floats(channels), mean_g = per_channel_floats(channels);
    torch::Tensor b = per_channel_floats(channels);
    const float* w = weight.data_ptr<float>();
    const float* inv = invstd.data_ptr<float>();
    for (int64_t c = 0; c < channels; ++c) {
      const double sum_g = sums[c], sum_g_centered = sums[channels + c];
      d_weight.data_ptr<float>()[c] = static_cast<float>(sum_g_centered * inv[c]);
      d_bias.data_ptr<float>()[c] = static_cast<float>(sum_g);
      const double a_c = static_cast<double>(w[c]) * inv[c];
      a.data_ptr<float>()[c] = static_cast<float>(a_c);
      mean_g.data_ptr<float>()[c] = static_cast<float>(sum_g / rows);
      b.data_ptr<float>()[c] = static_cast<float>(-a_c * inv[c] * inv[c] * sum_g_centered / rows);
    }

    torch::Tensor dx = torch::empty_like(x, torch::MemoryFormat::ChannelsLast);
    // Without a ReLU the residual's gradient is dy itself; with one, the masked copy the loop writes.
    const bool write_residual = has_residual && relu;
    torch::Tensor d_residual = write_residual ? torch::empty_like(x, torch::MemoryFormat::ChannelsLast)
                               : has_residual ? dy
                                              : torch::Tensor();  // the placeholder gets none
    uint16_t* dx_bits = mutable_bits(dx);
    uint16_t* d_residual_bits = write_residual ? mutable_bits(d_residual) : nullptr;
    with_flags(write_residual, relu, [&](auto with_residual, auto with_relu) {
      at::parallel_for(0, rows, grain_rows(channels), [&](int64_t begin, int64_t end) {
        gradient_rows<decltype(with_residual)::value, decltype(with_relu)::value>(
            dy_bits, y_bits, x_bits, dx_bits, d_residual_bits, begin, end, channels, mean.data_ptr<float>(),
            a.data_ptr<float>(), mean_g.data_ptr<float>(), b.data_ptr<float>());
      });
    });
    return {dx, d_weight, d_bias, d_residual, torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

bool fusable_activation(const torch::Tensor& t, const torch::Tensor& like) {
  return t.defined() && t.device().is_cpu() && t.scalar_type() == torch::kBFloat16 && t.sizes() == like.sizes() &&
         t.is_contiguous(torch::MemoryFormat::ChannelsLast);
}

}  // namespace

bool can_fuse_batch_norm(const torch::nn::BatchNorm2dImpl& norm, const torch::Tensor& x,
                         const torch::Tensor& residual) {
  const auto& o = norm.options;
  if (!avx512_bf16_kernels() || !norm.is_training() || !o.affine() || !o.track_running_stats()) return false;
  for (const torch::Tensor& t : {norm.weight, norm.bias, norm.running_mean, norm.running_var})
    if (!t.defined() || t.scalar_type() != torch::kFloat || !t.device().is_cpu() || !t.is_contiguous()) return false;
  if (!x.defined() || x.dim() != 4 || !fusable_activation(x, x) || x.size(1) % kLanes != 0 || x.size(1) == 0 ||
      x.size(1) != norm.weight.size(0) || rows_of(x) < 2)
    return false;
  return !residual.defined() || fusable_activation(residual, x);
}

torch::Tensor fused_batch_norm(torch::nn::BatchNorm2dImpl& norm, const torch::Tensor& x, const torch::Tensor& residual,
                               bool relu) {
  const int64_t channels = x.size(1), rows = rows_of(x);
  const uint16_t* x_bits = bits(x);
  std::vector<float> shift(channels);
  for (int64_t c = 0; c < channels; ++c) shift[c] = at::BFloat16(x_bits[c], at::BFloat16::from_bits());
  const std::vector<double> sums = sum_over_rows(ShiftedTerms{x_bits, shift.data(), channels}, rows, channels);

  torch::Tensor mean = per_channel_floats(channels), invstd = per_channel_floats(channels);
  torch::Tensor unbiased_var = per_channel_floats(channels);
  for (int64_t c = 0; c < channels; ++c) {
    const double mean_shift = sums[c] / rows;
    const double var = std::max(sums[channels + c] / rows - mean_shift * mean_shift, 0.0);
    mean.data_ptr<float>()[c] = static_cast<float>(shift[c] + mean_shift);
    invstd.data_ptr<float>()[c] = static_cast<float>(1.0 / std::sqrt(var + norm.options.eps()));
    unbiased_var.data_ptr<float>()[c] = static_cast<float>(var * rows / (rows - 1));
  }

  {  // Running statistics and the batch count, as BatchNormImplBase::forward updates them.
    torch::NoGradGuard no_grad;
    norm.num_batches_tracked += 1;
    const double factor =
        norm.options.momentum().has_value() ? *norm.options.momentum() : 1.0 / norm.num_batches_tracked.item<double>();
    norm.running_mean.mul_(1.0 - factor).add_(mean, factor);
    norm.running_var.mul_(1.0 - factor).add_(unbiased_var, factor);
  }
  const bool has_residual = residual.defined();
  return FusedBatchNormFunction::apply(x, norm.weight, norm.bias,
                                       has_residual ? residual : torch::empty({0}, x.options()), mean, invstd,
                                       has_residual, relu);
}

#else  // not x86-64 with GCC or Clang: LibTorch's ops run instead

bool can_fuse_batch_norm(const torch::nn::BatchNorm2dImpl&, const torch::Tensor&, const torch::Tensor&) {
  return false;
}

torch::Tensor fused_batch_norm(torch::nn::BatchNorm2dImpl&, const torch::Tensor&, const torch::Tensor&, bool) {
  throw Error("fused_batch_norm: built without x86-64 vector support");
}

#endif

}  // namespace mpt::ops
