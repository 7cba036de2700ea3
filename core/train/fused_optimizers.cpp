// The fused optimizer updates (see fused_optimizers.h). Same arithmetic as LibTorch's steps:
// Adam/AdamW:
//   g' = g + wd * p (Adam's L2) | p *= 1 - lr * wd (AdamW's decoupled decay)
//   m = b1 m + (1 - b1) g';  v = b2 v + (1 - b2) g'^2
//   p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
// SGD:
//   g' = g + wd * p;  b = g' on the first step, else momentum * b + (1 - dampening) g'
//   p -= lr * (nesterov ? g' + momentum * b : b)      (p -= lr * g' without momentum)
#include "core/train/fused_optimizers.h"

#include <ATen/Parallel.h>

#include <cmath>
#include <type_traits>

namespace mpt::train {
namespace {

struct Update {
  double lr, beta1, beta2, eps, l2_decay, decoupled_decay;
};

// The key of a parameter in Optimizer::state_: a string of its TensorImpl address in LibTorch 1.13, the
// address itself in later versions.
template <typename Map>
typename Map::key_type state_key(const torch::Tensor& p) {
  using Key = typename Map::key_type;
  if constexpr (std::is_same_v<Key, std::string>) return c10::guts::to_string(p.unsafeGetTensorImpl());
  else return static_cast<Key>(p.unsafeGetTensorImpl());
}

// The loops walk the weight, its gradient and its state as flat arrays, so all must be dense FP32 CPU tensors
// laid out alike (any one layout: NHWC convolution weights qualify). Strides of size-1 dimensions do not matter:
// a (256, 64, 1, 1) NHWC weight may come as strides (64, 1, 1, 1) and its gradient as (64, 1, 64, 64).
bool strides_match(const torch::Tensor& a, const torch::Tensor& b) {
  if (a.sizes() != b.sizes()) return false;
  for (int64_t d = 0; d < a.dim(); ++d)
    if (a.size(d) > 1 && a.stride(d) != b.stride(d)) return false;
  return true;
}

bool same_layout(const torch::Tensor& p, const torch::Tensor& other) {
  return other.scalar_type() == torch::kFloat && other.is_non_overlapping_and_dense() && strides_match(p, other);
}

// A state tensor laid out like its weight: as it is, or copied once into the weight's strides (state saved by
// another layout or LibTorch version); the values are unchanged.
const torch::Tensor& in_layout_of(const torch::Tensor& p, torch::Tensor& state) {
  if (!same_layout(p, state))
    state = torch::empty_like(p, torch::MemoryFormat::Preserve).copy_(state);
  return state;
}

bool fusable(const torch::Tensor& p) {
  return p.device().is_cpu() && p.scalar_type() == torch::kFloat && p.is_non_overlapping_and_dense() &&
         p.grad().defined() && !p.grad().is_sparse() && same_layout(p, p.grad());
}

// Whether every parameter with a gradient can take the fused loop; when one cannot, the base class steps them all.
template <typename Optimizer>
bool every_gradient_fusable(Optimizer& optimizer) {
  for (auto& group : optimizer.param_groups())
    for (auto& p : group.params())
      if (p.grad().defined() && !fusable(p)) return false;
  return true;
}

// The parameter's state in the optimizer's map, made by `make()` on its first step (`created` then true).
template <typename State, typename States, typename Make>
State& state_of(States& states, const torch::Tensor& p, Make&& make, bool& created) {
  const auto key = state_key<States>(p);
  auto found = states.find(key);
  created = found == states.end();
  if (created) found = states.emplace(key, make()).first;
  return static_cast<State&>(*found->second);
}

// The element loop, vectorised: this file is compiled with -O3 -fno-math-errno (CMakeLists.txt) so that sqrt
// and the division become packed instructions, and cloned for AVX-512, AVX2 and baseline x86-64, picked at load
// time for the CPU it runs on.
__attribute__((target_clones("avx512f", "avx2", "default"))) void adam_elements(
    float* __restrict w, const float* __restrict g, float* __restrict m, float* __restrict v, int64_t count, float keep,
    float l2, float b1, float b2, float step_size, float inv_sqrt_bias2, float eps) {
  for (int64_t i = 0; i < count; ++i) {
    const float weight = w[i] * keep;
    const float grad = g[i] + l2 * weight;
    const float mean = b1 * m[i] + (1.0f - b1) * grad;
    const float variance = b2 * v[i] + (1.0f - b2) * grad * grad;
    m[i] = mean;
    v[i] = variance;
    w[i] = weight - step_size * mean / (std::sqrt(variance) * inv_sqrt_bias2 + eps);
  }
}

void update_one(const torch::Tensor& p, torch::optim::AdamParamState& state, const Update& u) {
  state.step(state.step() + 1);
  const double bias1 = 1.0 - std::pow(u.beta1, static_cast<double>(state.step()));
  const double bias2 = 1.0 - std::pow(u.beta2, static_cast<double>(state.step()));
  const auto step_size = static_cast<float>(u.lr / bias1), inv_sqrt_bias2 = static_cast<float>(1.0 / std::sqrt(bias2));
  const auto b1 = static_cast<float>(u.beta1), b2 = static_cast<float>(u.beta2), eps = static_cast<float>(u.eps);
  const auto l2 = static_cast<float>(u.l2_decay), keep = static_cast<float>(1.0 - u.lr * u.decoupled_decay);
  float* w = p.data_ptr<float>();
  const float* g = p.grad().data_ptr<float>();
  float* m = in_layout_of(p, state.exp_avg()).data_ptr<float>();
  float* v = in_layout_of(p, state.exp_avg_sq()).data_ptr<float>();
  at::parallel_for(0, p.numel(), 1 << 16, [&](int64_t begin, int64_t end) {
    adam_elements(w + begin, g + begin, m + begin, v + begin, end - begin, keep, l2, b1, b2, step_size,
                  inv_sqrt_bias2, eps);
  });
}

// One fused step over every group; false (and nothing done) when some parameter cannot take the fused loop, so
// that the base class steps them all.
template <typename Options, typename Optimizer>
bool fused_step(Optimizer& optimizer, bool decoupled) {
  for (auto& group : optimizer.param_groups())
    if (static_cast<Options&>(group.options()).amsgrad()) return false;
  if (!every_gradient_fusable(optimizer)) return false;
  torch::NoGradGuard no_grad;
  auto& states = optimizer.state();
  for (auto& group : optimizer.param_groups()) {
    auto& options = static_cast<Options&>(group.options());
    const Update update{options.lr(), std::get<0>(options.betas()), std::get<1>(options.betas()), options.eps(),
                        decoupled ? 0.0 : options.weight_decay(), decoupled ? options.weight_decay() : 0.0};
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      bool created = false;
      auto& state = state_of<torch::optim::AdamParamState>(states, p, [&] {
        auto fresh = std::make_unique<torch::optim::AdamParamState>();
        fresh->step(0);
        fresh->exp_avg(torch::zeros_like(p, torch::MemoryFormat::Preserve));
        fresh->exp_avg_sq(torch::zeros_like(p, torch::MemoryFormat::Preserve));
        return fresh;
      }, created);
      update_one(p, state, update);
    }
  }
  return true;
}

__attribute__((target_clones("avx512f", "avx2", "default"))) void sgd_elements(
    float* __restrict w, const float* __restrict g, float* __restrict buffer, int64_t count, float decay, float lr,
    float momentum, float dampened, bool first, bool nesterov) {
  for (int64_t i = 0; i < count; ++i) {
    const float grad = g[i] + decay * w[i];
    float update = grad;
    if (buffer) {
      const float velocity = first ? grad : momentum * buffer[i] + dampened * grad;
      buffer[i] = velocity;
      update = nesterov ? grad + momentum * velocity : velocity;
    }
    w[i] -= lr * update;
  }
}

bool fused_sgd_step(torch::optim::SGD& optimizer) {
  if (!every_gradient_fusable(optimizer)) return false;
  torch::NoGradGuard no_grad;
  auto& states = optimizer.state();
  for (auto& group : optimizer.param_groups()) {
    auto& options = static_cast<torch::optim::SGDOptions&>(group.options());
    const auto decay = static_cast<float>(options.weight_decay()), lr = static_cast<float>(options.lr()),
               momentum = static_cast<float>(options.momentum()),
               dampened = static_cast<float>(1.0 - options.dampening());
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      float* buffer = nullptr;
      bool first = false;
      if (options.momentum() != 0.0) {
        auto& state = state_of<torch::optim::SGDParamState>(states, p, [&] {
          auto fresh = std::make_unique<torch::optim::SGDParamState>();
          fresh->momentum_buffer(torch::empty_like(p, torch::MemoryFormat::Preserve));  // filled on this step
          return fresh;
        }, first);
        buffer = in_layout_of(p, state.momentum_buffer()).data_ptr<float>();
      }
      float* w = p.data_ptr<float>();
      const float* g = p.grad().data_ptr<float>();
      at::parallel_for(0, p.numel(), 1 << 16, [&](int64_t begin, int64_t end) {
        sgd_elements(w + begin, g + begin, buffer ? buffer + begin : nullptr, end - begin, decay, lr, momentum,
                     dampened, first, options.nesterov());
      });
    }
  }
  return true;
}

}  // namespace

torch::Tensor FusedSgd::step(LossClosure closure) {
  TORCH_CHECK(!closure, "mpt's fused SGD takes no closure");
  if (!fused_sgd_step(*this)) return torch::optim::SGD::step();
  return {};
}

torch::Tensor FusedAdam::step(LossClosure closure) {
  TORCH_CHECK(!closure, "mpt's fused Adam takes no closure");
  if (!fused_step<torch::optim::AdamOptions>(*this, /*decoupled=*/false)) return torch::optim::Adam::step();
  return {};
}

torch::Tensor FusedAdamW::step(LossClosure closure) {
  TORCH_CHECK(!closure, "mpt's fused AdamW takes no closure");
  if (!fused_step<torch::optim::AdamWOptions>(*this, /*decoupled=*/true)) return torch::optim::AdamW::step();
  return {};
}

}  // namespace mpt::train
