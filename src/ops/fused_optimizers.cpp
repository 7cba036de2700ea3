// The fused optimizer updates (see fused_optimizers.h). Same arithmetic as LibTorch's steps:
// Adam/AdamW:
//   g' = g + wd * p (Adam's L2) | p *= 1 - lr * wd (AdamW's decoupled decay)
//   m = b1 m + (1 - b1) g';  v = b2 v + (1 - b2) g'^2
//   p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
// SGD:
//   g' = g + wd * p;  b = g' on the first step, else momentum * b + (1 - dampening) g'
//   p -= lr * (nesterov ? g' + momentum * b : b)      (p -= lr * g' without momentum)
// where g is the gradient as stored times the step's gradient factor (1, or under master_weights the unscale and
// clip factor), and under master_weights the updated p is also stored, rounded, into the BF16 model parameter.
#include "ops/fused_optimizers.h"

#include <ATen/Parallel.h>

#include <cmath>
#include <type_traits>
#include <unordered_map>

#include "common/cpu_features.h"
#include "common/error.h"
#include "ops/bf16_bits.h"
#include "ops/dispatch.h"
#include "ops/multi_tensor_step.h"
#include "ops/optimizer_state.h"

namespace mpt::ops {
namespace {

struct Update {
  double lr, beta1, beta2, eps, l2_decay, decoupled_decay;
};

// What one parameter's update reads and writes: the FP32 weight (a parameter of the optimizer), its gradient, and
// under master_weights the BF16 model parameter the weight is the master of (its shadow), whose gradient is BF16.
struct Target {
  torch::Tensor weight;
  torch::Tensor grad;
  torch::Tensor shadow;  // undefined when the gradient is FP32 (no master_weights, or an FP32 island)
};

// The plain step's targets: each parameter's own gradient.
Target own_gradient(const torch::Tensor& p) { return {p, p.grad(), {}}; }

// The loops walk the weight, its gradient, its shadow and its state as flat arrays, so all must be dense CPU
// tensors laid out alike (any one layout: NHWC convolution weights qualify). Strides of size-1 dimensions do not
// matter: a (256, 64, 1, 1) NHWC weight may come as strides (64, 1, 1, 1) and its gradient as (64, 1, 64, 64).
bool strides_match(const torch::Tensor& a, const torch::Tensor& b) {
  if (a.sizes() != b.sizes()) return false;
  for (int64_t d = 0; d < a.dim(); ++d)
    if (a.size(d) > 1 && a.stride(d) != b.stride(d)) return false;
  return true;
}

bool same_layout(const torch::Tensor& p, const torch::Tensor& other, torch::ScalarType dtype = torch::kFloat) {
  return other.scalar_type() == dtype && other.device().is_cpu() && !other.is_sparse() &&
         other.is_non_overlapping_and_dense() && strides_match(p, other);
}

// A state tensor laid out like its weight: as it is, or copied once into the weight's strides (state saved by
// another layout or LibTorch version); the values are unchanged.
const torch::Tensor& in_layout_of(const torch::Tensor& p, torch::Tensor& state) {
  if (!same_layout(p, state)) state = torch::empty_like(p, torch::MemoryFormat::Preserve).copy_(state);
  return state;
}

bool fusable(const Target& t) {
  if (!t.weight.device().is_cpu() || t.weight.scalar_type() != torch::kFloat ||
      !t.weight.is_non_overlapping_and_dense())
    return false;
  if (!t.shadow.defined()) return same_layout(t.weight, t.grad);
  return same_layout(t.weight, t.grad, torch::kBFloat16) && same_layout(t.weight, t.shadow, torch::kBFloat16);
}

// Whether every parameter with a gradient can take the fused loop; when one cannot, the base class steps them all.
template <typename Optimizer, typename TargetOf>
bool every_gradient_fusable(Optimizer& optimizer, const TargetOf& target_of) {
  if (!hand_kernels_enabled()) return false;
  for (auto& group : optimizer.param_groups())
    for (auto& p : group.params()) {
      const Target target = target_of(p);
      if (target.grad.defined() && !fusable(target)) return false;
    }
  return true;
}

// A target's arrays: the gradient as FP32 or as BF16 bits, with the shadow in the latter case.
template <typename Run>
void with_arrays(const Target& t, Run&& run) {
  float* w = t.weight.data_ptr<float>();
  if (t.shadow.defined()) {
    torch::Tensor shadow = t.shadow;
    run(w, bf16::bits(t.grad), bf16::bits(shadow));
  } else {
    run(w, static_cast<const float*>(t.grad.data_ptr<float>()), static_cast<uint16_t*>(nullptr));
  }
}

// The element loops, vectorised: this file is compiled with -O3 -fno-math-errno (CMakeLists.txt) so that sqrt
// and the division become packed instructions, and each is cloned for AVX-512, AVX2 and baseline x86-64, picked
// at load time for the CPU it runs on. A loop over BF16 gradients also writes the BF16 shadow.
struct AdamScalars {
  float factor, keep, l2, b1, b2, step_size, inv_sqrt_bias2, eps;
};

template <typename Grad>
[[gnu::always_inline]] inline void adam_loop(float* __restrict w, const Grad* __restrict g, uint16_t* __restrict shadow,
                                             float* __restrict m, float* __restrict v, int64_t count, AdamScalars s) {
  for (int64_t i = 0; i < count; ++i) {
    const float weight = w[i] * s.keep;
    const float grad = bf16::widen(g[i]) * s.factor + s.l2 * weight;
    const float mean = s.b1 * m[i] + (1.0f - s.b1) * grad;
    const float variance = s.b2 * v[i] + (1.0f - s.b2) * grad * grad;
    m[i] = mean;
    v[i] = variance;
    const float updated = weight - s.step_size * mean / (std::sqrt(variance) * s.inv_sqrt_bias2 + s.eps);
    w[i] = updated;
    if constexpr (std::is_same_v<Grad, uint16_t>) shadow[i] = bf16::narrow(updated);
  }
}

MPT_CPU_CLONES void adam_elements(float* w, const float* g, uint16_t* shadow, float* m, float* v, int64_t count,
                                  AdamScalars s) {
  adam_loop(w, g, shadow, m, v, count, s);
}
MPT_CPU_CLONES void adam_elements(float* w, const uint16_t* g, uint16_t* shadow, float* m, float* v, int64_t count,
                                  AdamScalars s) {
  adam_loop(w, g, shadow, m, v, count, s);
}

void update_one(const Target& t, torch::optim::AdamParamState& state, const Update& u, float grad_factor) {
  state.step(state.step() + 1);
  const double bias1 = 1.0 - std::pow(u.beta1, static_cast<double>(state.step()));
  const double bias2 = 1.0 - std::pow(u.beta2, static_cast<double>(state.step()));
  const AdamScalars s{grad_factor,
                      static_cast<float>(1.0 - u.lr * u.decoupled_decay),
                      static_cast<float>(u.l2_decay),
                      static_cast<float>(u.beta1),
                      static_cast<float>(u.beta2),
                      static_cast<float>(u.lr / bias1),
                      static_cast<float>(1.0 / std::sqrt(bias2)),
                      static_cast<float>(u.eps)};
  float* m = in_layout_of(t.weight, state.exp_avg()).data_ptr<float>();
  float* v = in_layout_of(t.weight, state.exp_avg_sq()).data_ptr<float>();
  with_arrays(t, [&](float* w, const auto* g, uint16_t* shadow) {
    at::parallel_for(0, t.weight.numel(), 1 << 16, [&](int64_t begin, int64_t end) {
      adam_elements(w + begin, g + begin, shadow ? shadow + begin : nullptr, m + begin, v + begin, end - begin, s);
    });
  });
}

template <typename Options, typename Optimizer, typename TargetOf>
bool adam_fusable(Optimizer& optimizer, const TargetOf& target_of) {
  for (auto& group : optimizer.param_groups())
    if (static_cast<Options&>(group.options()).amsgrad()) return false;
  return every_gradient_fusable(optimizer, target_of);
}

// One fused step over every group; needs adam_fusable.
template <typename Options, typename Optimizer, typename TargetOf>
void fused_adam_step(Optimizer& optimizer, bool decoupled, const TargetOf& target_of, float grad_factor) {
  torch::NoGradGuard no_grad;
  auto& states = optimizer.state();
  for (auto& group : optimizer.param_groups()) {
    auto& options = static_cast<Options&>(group.options());
    const Update update{options.lr(),
                        std::get<0>(options.betas()),
                        std::get<1>(options.betas()),
                        options.eps(),
                        decoupled ? 0.0 : options.weight_decay(),
                        decoupled ? options.weight_decay() : 0.0};
    for (auto& p : group.params()) {
      const Target target = target_of(p);
      if (!target.grad.defined()) continue;
      auto& state = adam_state_of(states, p);
      update_one(target, state, update, grad_factor);
    }
  }
}

struct SgdScalars {
  float factor, decay, lr, momentum, dampened;
  bool first, nesterov;
};

template <typename Grad>
[[gnu::always_inline]] inline void sgd_loop(float* __restrict w, const Grad* __restrict g, uint16_t* __restrict shadow,
                                            float* __restrict buffer, int64_t count, SgdScalars s) {
  for (int64_t i = 0; i < count; ++i) {
    const float grad = bf16::widen(g[i]) * s.factor + s.decay * w[i];
    float update = grad;
    if (buffer) {
      const float velocity = s.first ? grad : s.momentum * buffer[i] + s.dampened * grad;
      buffer[i] = velocity;
      update = s.nesterov ? grad + s.momentum * velocity : velocity;
    }
    const float updated = w[i] - s.lr * update;
    w[i] = updated;
    if constexpr (std::is_same_v<Grad, uint16_t>) shadow[i] = bf16::narrow(updated);
  }
}

MPT_CPU_CLONES void sgd_elements(float* w, const float* g, uint16_t* shadow, float* buffer, int64_t count,
                                 SgdScalars s) {
  sgd_loop(w, g, shadow, buffer, count, s);
}
MPT_CPU_CLONES void sgd_elements(float* w, const uint16_t* g, uint16_t* shadow, float* buffer, int64_t count,
                                 SgdScalars s) {
  sgd_loop(w, g, shadow, buffer, count, s);
}

// One fused SGD step; needs every_gradient_fusable.
template <typename TargetOf>
void fused_sgd_step(torch::optim::SGD& optimizer, const TargetOf& target_of, float grad_factor) {
  torch::NoGradGuard no_grad;
  auto& states = optimizer.state();
  for (auto& group : optimizer.param_groups()) {
    auto& options = static_cast<torch::optim::SGDOptions&>(group.options());
    SgdScalars s{grad_factor,
                 static_cast<float>(options.weight_decay()),
                 static_cast<float>(options.lr()),
                 static_cast<float>(options.momentum()),
                 static_cast<float>(1.0 - options.dampening()),
                 false,
                 options.nesterov()};
    for (auto& p : group.params()) {
      const Target target = target_of(p);
      if (!target.grad.defined()) continue;
      float* buffer = nullptr;
      s.first = false;
      if (options.momentum() != 0.0) {
        auto& state = state_of<torch::optim::SGDParamState>(
            states, p,
            [&] {
              auto fresh = std::make_unique<torch::optim::SGDParamState>();
              fresh->momentum_buffer(torch::empty_like(p, torch::MemoryFormat::Preserve));  // filled on this step
              return fresh;
            },
            s.first);
        buffer = in_layout_of(p, state.momentum_buffer()).template data_ptr<float>();
      }
      with_arrays(target, [&](float* w, const auto* g, uint16_t* shadow) {
        at::parallel_for(0, p.numel(), 1 << 16, [&](int64_t begin, int64_t end) {
          sgd_elements(w + begin, g + begin, shadow ? shadow + begin : nullptr, buffer ? buffer + begin : nullptr,
                       end - begin, s);
        });
      });
    }
  }
}

// master_weights' targets: a master's gradient is its model parameter's, and a BF16 model parameter its shadow.
class MasterTargets {
 public:
  explicit MasterTargets(const std::vector<MasterPair>& pairs) {
    for (const auto& pair : pairs) by_master_.emplace(pair.master.unsafeGetTensorImpl(), &pair);
  }
  Target operator()(const torch::Tensor& master) const {
    const auto found = by_master_.find(master.unsafeGetTensorImpl());
    if (found == by_master_.end()) return own_gradient(master);
    const MasterPair& pair = *found->second;
    return {master, pair.model_param.grad(), pair.shared ? torch::Tensor() : pair.model_param};
  }

 private:
  std::unordered_map<const c10::TensorImpl*, const MasterPair*> by_master_;
};

bool on_gpu(torch::optim::Optimizer& optimizer) {
  for (auto& group : optimizer.param_groups())
    for (auto& p : group.params())
      if (p.grad().defined()) return !p.device().is_cpu();
  return false;
}

// The step of a parameter set the one-pass loop cannot take: the multi-tensor step on a GPU, the base class's
// otherwise.
template <typename Base>
torch::Tensor unfused_step(Base& optimizer) {
  if (on_gpu(optimizer) && multi_tensor_step(optimizer)) return {};
  return optimizer.Base::step();
}

}  // namespace

torch::Tensor FusedSgd::step(LossClosure closure) {
  TORCH_CHECK(!closure, "mpt's fused SGD takes no closure");
  if (!every_gradient_fusable(*this, own_gradient)) return unfused_step<torch::optim::SGD>(*this);
  fused_sgd_step(*this, own_gradient, 1.0f);
  return {};
}

torch::Tensor FusedAdam::step(LossClosure closure) {
  TORCH_CHECK(!closure, "mpt's fused Adam takes no closure");
  if (!adam_fusable<torch::optim::AdamOptions>(*this, own_gradient)) return unfused_step<torch::optim::Adam>(*this);
  fused_adam_step<torch::optim::AdamOptions>(*this, /*decoupled=*/false, own_gradient, 1.0f);
  return {};
}

torch::Tensor FusedAdamW::step(LossClosure closure) {
  TORCH_CHECK(!closure, "mpt's fused AdamW takes no closure");
  if (!adam_fusable<torch::optim::AdamWOptions>(*this, own_gradient)) return unfused_step<torch::optim::AdamW>(*this);
  fused_adam_step<torch::optim::AdamWOptions>(*this, /*decoupled=*/true, own_gradient, 1.0f);
  return {};
}

namespace {

// What the one-pass loop needs of the weights, known before any gradient exists: dense CPU FP32 masters, each laid
// out like its BF16 model parameter. Their gradients take the parameters' layout (autograd's gradient layout
// contract), which each step checks.
template <typename Optimizer>
bool weights_fusable(Optimizer& optimizer, const MasterTargets& targets) {
  if (!hand_kernels_enabled()) return false;
  for (auto& group : optimizer.param_groups())
    for (auto& p : group.params()) {
      const Target t = targets(p);
      if (!t.weight.device().is_cpu() || t.weight.scalar_type() != torch::kFloat ||
          !t.weight.is_non_overlapping_and_dense())
        return false;
      if (t.shadow.defined() && !same_layout(t.weight, t.shadow, torch::kBFloat16)) return false;
    }
  return true;
}

template <typename Optimizer, typename Step>
class Stepper : public MasterStepper {
 public:
  Stepper(Optimizer& optimizer, Step step) : optimizer_(optimizer), step_(std::move(step)) {}
  void step(const std::vector<MasterPair>& pairs, double grad_factor) override {
    const MasterTargets targets(pairs);
    MPT_CHECK(every_gradient_fusable(optimizer_, targets),
              "a gradient is not laid out like its weight: the one-pass optimizer step cannot take it");
    step_(optimizer_, targets, static_cast<float>(grad_factor));
  }

 private:
  Optimizer& optimizer_;
  Step step_;
};

template <typename Optimizer, typename Step>
std::unique_ptr<MasterStepper> stepper_if_fusable(Optimizer& optimizer, const MasterTargets& targets, Step step) {
  if (!weights_fusable(optimizer, targets)) return nullptr;
  return std::make_unique<Stepper<Optimizer, Step>>(optimizer, std::move(step));
}

template <typename Options>
bool uses_amsgrad(torch::optim::Optimizer& optimizer) {
  for (auto& group : optimizer.param_groups())
    if (static_cast<Options&>(group.options()).amsgrad()) return true;
  return false;
}

}  // namespace

std::unique_ptr<MasterStepper> master_stepper(torch::optim::Optimizer& optimizer,
                                              const std::vector<MasterPair>& pairs) {
  const MasterTargets targets(pairs);
  if (auto* adam = dynamic_cast<FusedAdam*>(&optimizer); adam && !uses_amsgrad<torch::optim::AdamOptions>(*adam))
    return stepper_if_fusable(*adam, targets, [](FusedAdam& o, const MasterTargets& t, float factor) {
      fused_adam_step<torch::optim::AdamOptions>(o, /*decoupled=*/false, t, factor);
    });
  if (auto* adamw = dynamic_cast<FusedAdamW*>(&optimizer); adamw && !uses_amsgrad<torch::optim::AdamWOptions>(*adamw))
    return stepper_if_fusable(*adamw, targets, [](FusedAdamW& o, const MasterTargets& t, float factor) {
      fused_adam_step<torch::optim::AdamWOptions>(o, /*decoupled=*/true, t, factor);
    });
  if (auto* sgd = dynamic_cast<FusedSgd*>(&optimizer))
    return stepper_if_fusable(*sgd, targets,
                              [](FusedSgd& o, const MasterTargets& t, float factor) { fused_sgd_step(o, t, factor); });
  return nullptr;
}

}  // namespace mpt::ops
