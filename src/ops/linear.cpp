// Linear layer with a thread-split backward. B = batch rows, D = input features, N = output features.
#include "ops/linear.h"

#include <ATen/Parallel.h>
#include <ATen/autocast_mode.h>

#include "ops/dispatch.h"

namespace mpt::ops {
namespace {

// Multiply-adds from which one threaded BLAS call is as fast as the split (found at 2 threads; docs/findings.md).
constexpr int64_t kSplitMaxMacs = int64_t{1} << 28;
// Rows per share are a multiple of this, so that no thread gets a sliver of rows (the GEMM kernels' tile height).
constexpr int64_t kRowAlign = 16;

// a @ b with the result's rows shared among the threads, each share one single-threaded BLAS call (the OpenMP
// OpenBLAS runs one thread inside a parallel region), into a fresh contiguous (M, N) tensor. Gradients only:
// `mm_out` records no history, so the operands are detached (the backward is not itself differentiable).
torch::Tensor split_mm(const torch::Tensor& a_in, const torch::Tensor& b_in) {
  const torch::Tensor a = a_in.detach(), b = b_in.detach();
  torch::Tensor out = torch::empty({a.size(0), b.size(1)}, a.options());
  const int64_t rows = out.size(0), threads = at::get_num_threads();
  const int64_t share = (rows + threads - 1) / threads;
  const int64_t rows_per_share = (share + kRowAlign - 1) / kRowAlign * kRowAlign;
  const int64_t shares = (rows + rows_per_share - 1) / rows_per_share;
  at::parallel_for(0, shares, 1, [&](int64_t first, int64_t last) {
    for (int64_t s = first; s < last; ++s) {
      const int64_t begin = s * rows_per_share, count = std::min(rows_per_share, rows - begin);
      torch::Tensor part = out.narrow(0, begin, count);
      at::mm_out(part, a.narrow(0, begin, count), b);
    }
  });
  return out;
}

struct SplitLinearFunction : public torch::autograd::Function<SplitLinearFunction> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& weight, const c10::optional<torch::Tensor>& bias) {
    ctx->save_for_backward({x, weight});
    ctx->saved_data["has_bias"] = bias.has_value();
    return bias ? at::addmm(*bias, x, weight.t()) : at::mm(x, weight.t());  // (B, N)
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor& x = saved[0];                        // (B, D)
    const torch::Tensor& weight = saved[1];                   // (N, D)
    const torch::Tensor grad = grad_outputs[0].contiguous();  // (B, N)
    const bool has_bias = ctx->saved_data["has_bias"].toBool();
    return {ctx->needs_input_grad(0) ? split_mm(grad, weight) : torch::Tensor(),    // (B, D)
            ctx->needs_input_grad(1) ? split_mm(grad.t(), x) : torch::Tensor(),     // (N, D)
            has_bias && ctx->needs_input_grad(2) ? grad.sum(0) : torch::Tensor()};  // (N)
  }
};

}  // namespace

bool splits_linear_backward(const torch::Tensor& x, const torch::Tensor& weight) {
#ifdef _OPENMP  // without it at::parallel_for in this file runs the shares one after the other
  const bool fp32_cpu = x.device().is_cpu() && x.scalar_type() == torch::kFloat &&
                        weight.scalar_type() == torch::kFloat && !at::autocast::is_autocast_enabled(torch::kCPU);
  return hand_kernels_enabled() && fp32_cpu && x.dim() == 2 && weight.dim() == 2 && at::get_num_threads() > 1 &&
         !at::in_parallel_region() && x.size(0) * x.size(1) * weight.size(0) < kSplitMaxMacs &&
         torch::GradMode::is_enabled();
#else
  (void)x, (void)weight;
  return false;
#endif
}

torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias) {
  if (!splits_linear_backward(x, weight)) return torch::nn::functional::linear(x, weight, bias);
  // An undefined tensor cannot be a custom Function's input; an empty optional can.
  return SplitLinearFunction::apply(x, weight, bias.defined() ? c10::optional<torch::Tensor>(bias) : c10::nullopt);
}

}  // namespace mpt::ops
