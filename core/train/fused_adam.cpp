// The fused Adam update (see fused_adam.h). Same arithmetic as LibTorch's Adam/AdamW step:
//   g' = g + wd * p (Adam's L2) | p *= 1 - lr * wd (AdamW's decoupled decay)
//   m = b1 m + (1 - b1) g';  v = b2 v + (1 - b2) g'^2
//   p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
#include "core/train/fused_adam.h"

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

bool fusable(const torch::Tensor& p) {
  return p.device().is_cpu() && p.scalar_type() == torch::kFloat && p.is_contiguous() && p.grad().is_contiguous() &&
         p.grad().scalar_type() == torch::kFloat && !p.grad().is_sparse();
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
  float* m = state.exp_avg().data_ptr<float>();
  float* v = state.exp_avg_sq().data_ptr<float>();
  at::parallel_for(0, p.numel(), 1 << 16, [&](int64_t begin, int64_t end) {
    adam_elements(w + begin, g + begin, m + begin, v + begin, end - begin, keep, l2, b1, b2, step_size,
                  inv_sqrt_bias2, eps);
  });
}

// One fused step over every group; false (and nothing done) when some parameter cannot take the fused loop, so
// that the base class steps them all.
template <typename Options, typename Optimizer>
bool fused_step(Optimizer& optimizer, bool decoupled) {
  for (auto& group : optimizer.param_groups()) {
    if (static_cast<Options&>(group.options()).amsgrad()) return false;
    for (auto& p : group.params())
      if (p.grad().defined() && !fusable(p)) return false;
  }
  torch::NoGradGuard no_grad;
  auto& states = optimizer.state();
  for (auto& group : optimizer.param_groups()) {
    auto& options = static_cast<Options&>(group.options());
    const Update update{options.lr(), std::get<0>(options.betas()), std::get<1>(options.betas()), options.eps(),
                        decoupled ? 0.0 : options.weight_decay(), decoupled ? options.weight_decay() : 0.0};
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      const auto key = state_key<std::remove_reference_t<decltype(states)>>(p);
      auto found = states.find(key);
      if (found == states.end()) {
        auto state = std::make_unique<torch::optim::AdamParamState>();
        state->step(0);
        state->exp_avg(torch::zeros_like(p, torch::MemoryFormat::Contiguous));
        state->exp_avg_sq(torch::zeros_like(p, torch::MemoryFormat::Contiguous));
        found = states.emplace(key, std::move(state)).first;
      }
      update_one(p, static_cast<torch::optim::AdamParamState&>(*found->second), update);
    }
  }
  return true;
}

}  // namespace

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
