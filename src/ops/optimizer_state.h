// An optimizer's per-parameter state, as LibTorch keeps it: the map key of a parameter and the state made on its
// first step. Shared by the one-pass CPU steps (fused_optimizers.cpp) and the multi-tensor step
// (multi_tensor_step.cpp), which must read and write the very entries LibTorch's own step would, so that
// checkpoints and a switch between the steps carry the state over.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace mpt::ops {

// The key of a parameter in Optimizer::state_: a string of its TensorImpl address in LibTorch before 2.0, the
// address itself since. The string is what c10::guts::to_string wrote then (an ostream of the pointer); later
// versions dropped that function.
template <typename Map>
typename Map::key_type state_key(const torch::Tensor& p) {
  using Key = typename Map::key_type;
  if constexpr (std::is_same_v<Key, std::string>) {
    std::ostringstream key;
    key << p.unsafeGetTensorImpl();
    return key.str();
  } else {
    return static_cast<Key>(p.unsafeGetTensorImpl());
  }
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

// A parameter's Adam state, made on its first step as LibTorch makes it: step 0, zero moments laid out like the
// parameter.
template <typename States>
torch::optim::AdamParamState& adam_state_of(States& states, const torch::Tensor& p) {
  bool created = false;
  return state_of<torch::optim::AdamParamState>(
      states, p,
      [&] {
        auto fresh = std::make_unique<torch::optim::AdamParamState>();
        fresh->step(0);
        fresh->exp_avg(torch::zeros_like(p, torch::MemoryFormat::Preserve));
        fresh->exp_avg_sq(torch::zeros_like(p, torch::MemoryFormat::Preserve));
        return fresh;
      },
      created);
}

// An optimizer state's element-wise tensors, by the names LibTorch's serializer gives them, and its step count
// (Adam's), whatever the optimizer's kind: what checkpoints and ZeRO-1's pieces carry.
struct StateFields {
  int64_t* step = nullptr;
  std::vector<std::pair<const char*, torch::Tensor*>> tensors;
};
StateFields fields_of(torch::optim::OptimizerParamState& state);

// "adam", "adamw" or "sgd" (mpt's optimizers, fused or not); "" for any other.
std::string optimizer_kind(const torch::optim::Optimizer& optimizer);
// An empty state of `optimizer`'s kind, for a state read back from a checkpoint or cut from a whole one.
std::unique_ptr<torch::optim::OptimizerParamState> fresh_state(const torch::optim::Optimizer& optimizer);

}  // namespace mpt::ops
