// Activation checkpointing (memory.activation_checkpointing): a block whose forward keeps no activations for backward
// but its inputs, and runs again in backward to get them, as torch.utils.checkpoint does. The recomputation
// reproduces the first forward exactly - the same autocast state, the device's generator (dropout's masks) at the same
// state, the same kernels (the first forward runs with gradients enabled and drops its graph) - then puts the
// block's buffers (batch norm's running statistics) back, so that they are updated once, and records no FP8 amax.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "precision/autocast.h"
#include "precision/policy.h"

namespace mpt::models {

// none: every activation kept; full: each ResNet bottleneck and BERT encoder layer recomputed from its input;
// selective: GEMM outputs kept, the cheap operations between them recomputed.
enum class Recompute { kNone, kFull, kSelective };
Recompute parse_recompute(const std::string& name);
const char* recompute_name(Recompute recompute);

// The spec's memory section.
struct MemoryConfig {
  Recompute activation_checkpointing = Recompute::kNone;
};

// A forward's autocast state on its device (on in a dtype, or off), which its recomputation in backward restores.
struct AutocastState {
  torch::DeviceType device = torch::kCPU;
  bool on = false;
  torch::ScalarType dtype = torch::kFloat;
};
AutocastState autocast_state_of_now(torch::DeviceType device);

// Autocast as `state` says until the scope ends, then as it was.
class AutocastAsIn {
 public:
  explicit AutocastAsIn(const AutocastState& state);

 private:
  std::optional<precision::AutocastScope> on_;
  std::optional<precision::Fp32Scope> off_;
};

// The state of `device`'s generator now, for GeneratorAt to put it back in a recomputation.
torch::Tensor generator_state_of_now(torch::DeviceType device);

// `device`'s generator at `state` until the scope ends, then where it was: dropout draws the masks it drew then.
class GeneratorAt {
 public:
  GeneratorAt(torch::DeviceType device, const torch::Tensor& state);
  ~GeneratorAt();
  GeneratorAt(const GeneratorAt&) = delete;
  GeneratorAt& operator=(const GeneratorAt&) = delete;

 private:
  at::Generator generator_;
  torch::Tensor now_;
};

using Tensors = std::vector<torch::Tensor>;
using Block = std::function<Tensors(const Tensors&)>;

// block(inputs), keeping only `inputs` for backward (undefined ones pass through as undefined; tensors the block
// reads without differentiating, such as an attention mask, it captures itself). `module` holds the block's
// buffers; `policy` routes its GEMMs. Without gradients (evaluation) it is block(inputs).
Tensors recompute_in_backward(const Block& block, const Tensors& inputs, torch::nn::Module& module,
                              const precision::ModulePolicy& policy);

// One block of a family's stack of single-tensor blocks under `mode`: full keeps only the block's input and runs it
// again in backward; none (and a block's own selective recomputation) runs it as it is. `context` (rotary tables, a
// mask: what the block reads without differentiating) is passed to its forward and kept by value for the second run.
// ResNet's bottlenecks, ViT's and Llama's layers go through it; BERT's layers carry their narrow copy beside the
// states and wrap themselves.
template <typename BlockImpl, typename... Context>
torch::Tensor through_block(BlockImpl& block, const torch::Tensor& x, Recompute mode,
                            const precision::ModulePolicy& policy, const Context&... context) {
  if (mode != Recompute::kFull) return block.forward(x, context...);
  BlockImpl* raw = &block;  // the model holds its blocks past backward, where this runs again
  return recompute_in_backward(
      [raw, context...](const Tensors& in) { return Tensors{raw->forward(in[0], context...)}; }, {x}, block, policy)[0];
}

}  // namespace mpt::models
