// Activation checkpointing (see recompute.h): a custom autograd function whose backward runs the block again.
#include "models/recompute.h"

#include <ATen/Context.h>

#include "common/error.h"
#include "precision/autocast.h"

namespace mpt::models {
namespace {

// What the backward needs besides the saved inputs, held by autograd's context as a capsule.
struct SavedBlock : torch::CustomClassHolder {
  Block block;
  torch::nn::Module* module = nullptr;
  const precision::GemmRouter* router = nullptr;
  AutocastState autocast;                      // on the device of the block's inputs
  torch::Tensor generator_state;               // that device generator's before the first forward (dropout's masks)
  std::vector<int> input_slots, output_slots;  // see distinct()
};

// The distinct defined tensors of `all`, and in `slots` where each of `all` is among them (-1: undefined). Autograd
// takes defined tensors only, and a tensor passed twice (BERT's states and projection input are one tensor in FP32)
// must collect its gradients in one sum, in the order the run without checkpointing adds them.
Tensors distinct(const Tensors& all, std::vector<int>& slots) {
  Tensors unique;
  slots.clear();
  for (const auto& tensor : all) {
    int slot = -1;
    for (size_t i = 0; i < unique.size() && tensor.defined() && slot < 0; ++i)
      if (unique[i].is_same(tensor)) slot = static_cast<int>(i);
    if (tensor.defined() && slot < 0) slot = static_cast<int>(unique.size()), unique.push_back(tensor);
    slots.push_back(slot);
  }
  return unique;
}

Tensors expand(const Tensors& unique, const std::vector<int>& slots) {
  Tensors all;
  for (int slot : slots) all.push_back(slot < 0 ? torch::Tensor() : unique[slot]);
  return all;
}

// The block run again in backward as its first forward ran: autocast and the generator as they were then, FP8
// amaxes not recorded twice. The buffers (running statistics) it updates a second time are put back by restore(),
// after the backward through it: its graph saved them, so they cannot change before.
class Rerun {
 public:
  Rerun(const SavedBlock& saved, const Tensors& inputs) : module_(*saved.module) {
    for (const auto& buffer : module_.buffers()) buffers_.push_back(buffer.clone());
    const GeneratorAt generator(saved.autocast.device, saved.generator_state);
    const AutocastAsIn autocast(saved.autocast);
    const precision::GemmRouter::RecomputeScope recomputing(*saved.router);
    torch::AutoGradMode grad(true);
    outputs_ = saved.block(expand(inputs, saved.input_slots));
  }

  const Tensors& outputs() const { return outputs_; }

  void restore() {
    outputs_.clear();
    torch::NoGradGuard no_grad;
    const auto now = module_.buffers();
    for (size_t i = 0; i < now.size(); ++i) now[i].copy_(buffers_[i]);
  }

 private:
  torch::nn::Module& module_;
  Tensors buffers_, outputs_;
};

// Where the gradient of one of the block's inputs lands in the recomputation's backward.
struct GradSlot : torch::CustomClassHolder {
  torch::Tensor grad;
};

// The identity, whose backward keeps the incoming gradient in a slot and sends nothing on: the block's input
// gradients as its operations produced them (a leaf's .grad would be copied to the leaf's strides, and a sum over a
// differently laid out gradient, a bias's, would round differently from the run without checkpointing).
struct CaptureGradFunction : public torch::autograd::Function<CaptureGradFunction> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               c10::intrusive_ptr<GradSlot> slot) {
    ctx->saved_data["slot"] = c10::IValue::make_capsule(std::move(slot));
    return x;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    c10::static_intrusive_pointer_cast<GradSlot>(ctx->saved_data["slot"].toCapsule())->grad = grads[0];
    return {torch::Tensor(), torch::Tensor()};
  }
};

struct RecomputeFunction : public torch::autograd::Function<RecomputeFunction> {
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, at::TensorList inputs,
                                                c10::intrusive_ptr<SavedBlock> saved) {
    ctx->save_for_backward(inputs.vec());
    ctx->saved_data["block"] = c10::IValue::make_capsule(saved);
    Tensors detached;
    for (const auto& input : inputs) detached.push_back(input.detach());
    Tensors outputs;
    {
      torch::AutoGradMode grad(true);  // the kernels the run without checkpointing uses; the graph is dropped below
      outputs = saved->block(expand(detached, saved->input_slots));
    }
    Tensors detached_outputs;
    for (const auto& output : distinct(outputs, saved->output_slots)) detached_outputs.push_back(output.detach());
    return detached_outputs;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = c10::static_intrusive_pointer_cast<SavedBlock>(ctx->saved_data["block"].toCapsule());
    Tensors inputs;
    std::vector<c10::intrusive_ptr<GradSlot>> slots;
    torch::AutoGradMode grad_mode(true);  // backward runs without it
    for (const auto& input : ctx->get_saved_variables()) {
      slots.push_back(c10::make_intrusive<GradSlot>());
      inputs.push_back(CaptureGradFunction::apply(input.detach().requires_grad_(true), slots.back()));
    }
    Rerun rerun(*saved, inputs);
    std::vector<int> slots_again;  // the first forward's, as the recomputation is the same
    const Tensors outputs = distinct(rerun.outputs(), slots_again);
    Tensors differentiable, incoming;
    for (size_t i = 0; i < outputs.size(); ++i)
      if (outputs[i].requires_grad() && grads[i].defined())  // distinct() keeps defined outputs only
        differentiable.push_back(outputs[i]), incoming.push_back(grads[i]);
    torch::autograd::backward(differentiable, incoming);
    rerun.restore();
    torch::autograd::variable_list input_grads;
    for (const auto& slot : slots) input_grads.push_back(slot->grad);
    input_grads.push_back(torch::Tensor());  // the capsule
    return input_grads;
  }
};

}  // namespace

AutocastState autocast_state_of_now(torch::DeviceType device) {
  return {device, precision::autocast_enabled(device), precision::autocast_dtype(device)};
}

AutocastAsIn::AutocastAsIn(const AutocastState& state) {
  if (state.on)
    on_.emplace(state.device, state.dtype);
  else
    off_.emplace(state.device);
}

torch::Tensor generator_state_of_now(torch::DeviceType device) {
  return at::globalContext().defaultGenerator(torch::Device(device)).get_state();
}

GeneratorAt::GeneratorAt(torch::DeviceType device, const torch::Tensor& state)
    : generator_(at::globalContext().defaultGenerator(torch::Device(device))), now_(generator_.get_state()) {
  generator_.set_state(state);
}

GeneratorAt::~GeneratorAt() { generator_.set_state(now_); }

Recompute parse_recompute(const std::string& name) {
  if (name == "none") return Recompute::kNone;
  if (name == "full") return Recompute::kFull;
  if (name == "selective") return Recompute::kSelective;
  throw UsageError("memory.activation_checkpointing: expected none, full or selective, got '" + name + "'");
}

const char* recompute_name(Recompute recompute) {
  switch (recompute) {
    case Recompute::kNone: return "none";
    case Recompute::kFull: return "full";
    case Recompute::kSelective: return "selective";
  }
  return "?";
}

Tensors recompute_in_backward(const Block& block, const Tensors& inputs, torch::nn::Module& module,
                              const precision::ModulePolicy& policy) {
  if (!torch::GradMode::is_enabled() || !module.is_training()) return block(inputs);
  auto saved = c10::make_intrusive<SavedBlock>();
  saved->block = block;
  saved->module = &module;
  saved->router = &policy.router();
  torch::DeviceType device = torch::kCPU;
  for (const auto& input : inputs)
    if (input.defined()) device = input.device().type();
  saved->autocast = autocast_state_of_now(device);
  saved->generator_state = generator_state_of_now(device);
  const Tensors unique_inputs = distinct(inputs, saved->input_slots);
  // As a TensorList, not a vector: autograd counts a vector argument as one non-tensor input.
  return expand(RecomputeFunction::apply(at::TensorList(unique_inputs), saved), saved->output_slots);
}

}  // namespace mpt::models
