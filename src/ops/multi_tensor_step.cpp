// The multi-tensor optimizer step (see multi_tensor_step.h).
#include "ops/multi_tensor_step.h"

#include <cmath>

#include "ops/optimizer_state.h"

namespace mpt::ops {
namespace {

// The multi-tensor steps. Each collects a group's parameters with gradients, their gradients and state, then
// applies LibTorch's per-parameter arithmetic (torch/csrc/api/src/optim/{adam,adamw,sgd}.cpp) list by list;
// per-parameter scalars (bias corrections, which depend on each parameter's own step count) go in as scalar lists.
bool multi_tensor_covers(torch::optim::Optimizer& optimizer) {
  for (auto& group : optimizer.param_groups()) {
    auto& options = group.options();
    if (auto* adam = dynamic_cast<torch::optim::AdamOptions*>(&options); adam && adam->amsgrad()) return false;
    if (auto* adamw = dynamic_cast<torch::optim::AdamWOptions*>(&options); adamw && adamw->amsgrad()) return false;
    for (auto& p : group.params())
      if (p.grad().defined() && (p.grad().is_sparse() || p.grad().scalar_type() != p.scalar_type())) return false;
  }
  return true;
}

template <typename Options>
void multi_tensor_adam(torch::optim::Optimizer& optimizer, bool decoupled) {
  torch::NoGradGuard no_grad;
  auto& states = optimizer.state();
  for (auto& group : optimizer.param_groups()) {
    auto& options = static_cast<Options&>(group.options());
    const double lr = options.lr(), decay = options.weight_decay();
    const double beta1 = std::get<0>(options.betas()), beta2 = std::get<1>(options.betas());
    std::vector<torch::Tensor> params, grads, exp_avgs, exp_avg_sqs;
    std::vector<c10::Scalar> bias2_roots, neg_step_sizes;
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      auto& state = adam_state_of(states, p);
      state.step(state.step() + 1);
      const auto step = static_cast<double>(state.step());
      params.push_back(p);
      grads.push_back(p.grad());
      exp_avgs.push_back(state.exp_avg());
      exp_avg_sqs.push_back(state.exp_avg_sq());
      bias2_roots.emplace_back(std::sqrt(1.0 - std::pow(beta2, step)));
      neg_step_sizes.emplace_back(-lr / (1.0 - std::pow(beta1, step)));
    }
    if (params.empty()) continue;
    if (decay != 0.0) {
      if (decoupled)
        at::_foreach_mul_(params, 1.0 - lr * decay);
      else
        grads = at::_foreach_add(grads, params, decay);  // new tensors: the stored gradients stay as they are
    }
    at::_foreach_mul_(exp_avgs, beta1);
    at::_foreach_add_(exp_avgs, grads, 1.0 - beta1);
    at::_foreach_mul_(exp_avg_sqs, beta2);
    at::_foreach_addcmul_(exp_avg_sqs, grads, grads, 1.0 - beta2);
    std::vector<torch::Tensor> denominators = at::_foreach_sqrt(exp_avg_sqs);
    at::_foreach_div_(denominators, bias2_roots);
    at::_foreach_add_(denominators, options.eps());
    at::_foreach_addcdiv_(params, exp_avgs, denominators, neg_step_sizes);
  }
}

void multi_tensor_sgd(torch::optim::SGD& optimizer) {
  torch::NoGradGuard no_grad;
  auto& states = optimizer.state();
  for (auto& group : optimizer.param_groups()) {
    auto& options = static_cast<torch::optim::SGDOptions&>(group.options());
    std::vector<torch::Tensor> params, grads;
    for (auto& p : group.params())
      if (p.grad().defined()) params.push_back(p), grads.push_back(p.grad());
    if (params.empty()) continue;
    if (options.weight_decay() != 0.0) grads = at::_foreach_add(grads, params, options.weight_decay());
    if (options.momentum() != 0.0) {
      // A first step's buffer is a copy of the gradient; later ones decay and accumulate it.
      std::vector<torch::Tensor> buffers, continuing, continuing_grads;
      for (size_t i = 0; i < params.size(); ++i) {
        bool created = false;
        auto& state = state_of<torch::optim::SGDParamState>(
            states, params[i],
            [&] {
              auto fresh = std::make_unique<torch::optim::SGDParamState>();
              fresh->momentum_buffer(torch::clone(grads[i]).detach());
              return fresh;
            },
            created);
        buffers.push_back(state.momentum_buffer());
        if (!created) continuing.push_back(state.momentum_buffer()), continuing_grads.push_back(grads[i]);
      }
      if (!continuing.empty()) {
        at::_foreach_mul_(continuing, options.momentum());
        at::_foreach_add_(continuing, continuing_grads, 1.0 - options.dampening());
      }
      if (options.nesterov())
        grads = at::_foreach_add(grads, buffers, options.momentum());
      else
        grads = buffers;
    }
    at::_foreach_add_(params, grads, -options.lr());
  }
}

}  // namespace

bool multi_tensor_step(torch::optim::Optimizer& optimizer) {
  if (!multi_tensor_covers(optimizer)) return false;
  if (dynamic_cast<torch::optim::Adam*>(&optimizer))
    multi_tensor_adam<torch::optim::AdamOptions>(optimizer, /*decoupled=*/false);
  else if (dynamic_cast<torch::optim::AdamW*>(&optimizer))
    multi_tensor_adam<torch::optim::AdamWOptions>(optimizer, /*decoupled=*/true);
  else if (auto* sgd = dynamic_cast<torch::optim::SGD*>(&optimizer))
    multi_tensor_sgd(*sgd);
  else
    return false;
  return true;
}

}  // namespace mpt::ops
