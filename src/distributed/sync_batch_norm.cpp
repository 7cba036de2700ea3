// Synchronised batch norm (see sync_batch_norm.h). Forward all-reduces per-channel [sum, sum of squares, count];
// backward all-reduces [sum dy, sum dy * x_hat] and divides by the global count. Weight and bias gradients stay
// local: the gradient averager averages them like every other parameter, as DDP does with SyncBatchNorm.
#include "distributed/sync_batch_norm.h"

namespace mpt::distributed {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

torch::Tensor per_channel(const torch::Tensor& v) { return v.view({1, -1, 1, 1}); }

struct SyncBatchNormFunction : public torch::autograd::Function<SyncBatchNormFunction> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& weight,
                               const torch::Tensor& bias, const torch::Tensor& mean, const torch::Tensor& invstd,
                               const torch::Tensor& count, Group* group) {
    const torch::Tensor x_hat = (x.to(torch::kFloat) - per_channel(mean)) * per_channel(invstd);
    ctx->save_for_backward({x, weight, mean, invstd, count});
    ctx->saved_data["group"] = reinterpret_cast<int64_t>(group);
    return (x_hat * per_channel(weight.to(torch::kFloat)) + per_channel(bias.to(torch::kFloat))).to(x.scalar_type());
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &x = saved[0], &weight = saved[1], &mean = saved[2], &invstd = saved[3], &count = saved[4];
    Group* group = reinterpret_cast<Group*>(ctx->saved_data["group"].toInt());
    const torch::Tensor dy = grad_outputs[0].to(torch::kFloat);
    const torch::Tensor x_hat = (x.to(torch::kFloat) - per_channel(mean)) * per_channel(invstd);
    const torch::Tensor sum_dy = dy.sum({0, 2, 3}), sum_dy_x_hat = (dy * x_hat).sum({0, 2, 3});
    torch::Tensor global = torch::cat({sum_dy, sum_dy_x_hat});
    group->all_reduce({global}, "synchronised batch norm (backward)");
    const int64_t channels = sum_dy.size(0);
    const torch::Tensor mean_dy = global.narrow(0, 0, channels) / count;
    const torch::Tensor mean_dy_x_hat = global.narrow(0, channels, channels) / count;
    const torch::Tensor dx = (dy - per_channel(mean_dy) - x_hat * per_channel(mean_dy_x_hat)) *
                             per_channel(invstd * weight.to(torch::kFloat));
    return {dx.to(x.scalar_type()),
            sum_dy_x_hat.to(weight.scalar_type()),
            sum_dy.to(weight.scalar_type()),
            torch::Tensor(),
            torch::Tensor(),
            torch::Tensor(),
            torch::Tensor()};
  }
};

}  // namespace

torch::Tensor sync_batch_norm(torch::nn::BatchNorm2dImpl& norm, const torch::Tensor& x, Group* group) {
  if (!group || !group->distributed() || !norm.is_training()) return norm.forward(x);
  torch::Tensor mean, invstd, count;  // count stays a tensor: no host sync per layer on CUDA
  {
    torch::NoGradGuard no_grad;
    const torch::Tensor xf = x.to(torch::kFloat);
    const int64_t channels = xf.size(1);
    const torch::Tensor local_count = torch::full({1}, static_cast<double>(xf.numel() / channels), xf.options());
    torch::Tensor stats = torch::cat({xf.sum({0, 2, 3}), (xf * xf).sum({0, 2, 3}), local_count});
    group->all_reduce({stats}, "synchronised batch norm (forward)");
    count = stats.narrow(0, 2 * channels, 1);
    mean = stats.narrow(0, 0, channels) / count;
    const torch::Tensor variance = (stats.narrow(0, channels, channels) / count - mean * mean).clamp_min(0.0);
    invstd = torch::rsqrt(variance + norm.options.eps());
    const double momentum = norm.options.momentum().value_or(0.1);
    if (norm.options.track_running_stats()) {
      norm.running_mean.mul_(1.0 - momentum).add_(mean.to(norm.running_mean.dtype()), momentum);
      norm.running_var.mul_(1.0 - momentum)
          .add_((variance * (count / (count - 1.0).clamp_min(1.0))).to(norm.running_var.dtype()), momentum);
      norm.num_batches_tracked.add_(1);
    }
  }
  return SyncBatchNormFunction::apply(x, norm.weight, norm.bias, mean, invstd, count, group);
}

}  // namespace mpt::distributed
