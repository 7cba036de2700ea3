// Selective checkpointing by refilling a saved tensor's storage (see rematerialize.h).
#include "models/rematerialize.h"

#include "common/error.h"
#include "models/recompute.h"

namespace mpt::models {
namespace {

bool owns_its_storage(const torch::Tensor& value) {
  return value.is_contiguous() && value.storage_offset() == 0 && value.storage().nbytes() == value.nbytes();
}

// A value whose storage was emptied after the forward: the readers' nodes still hold its tensor (or views of it)
// and read it in backward through that storage, so refilling the storage in place refills what they saved.
struct Refill : torch::CustomClassHolder {
  c10::Storage storage;
  size_t bytes = 0;
  torch::ScalarType dtype = torch::kFloat;
  Recomputation again;
  AutocastState autocast;

  // Once, before the first reader's backward; then lets go of what it held, as the readers' nodes release theirs.
  void run() {
    if (!again) return;
    torch::Tensor value;
    {
      const AutocastAsIn as_in_forward(autocast);
      torch::NoGradGuard no_grad;
      value = again();
    }
    MPT_CHECK(value.scalar_type() == dtype && owns_its_storage(value) && value.nbytes() == bytes,
              "activation checkpointing: a tensor computed again in backward differs in layout from the first");
    storage.unsafeGetStorageImpl()->swap_data_ptr(*value.storage().unsafeGetStorageImpl());
    again = nullptr;
    storage = c10::Storage();
  }
};

// The identity on the readers, whose backward refills the value before any of the readers' nodes runs: it runs once,
// when all their gradients have arrived, and hands them on together.
struct RefillFunction : public torch::autograd::Function<RefillFunction> {
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, at::TensorList readers,
                                                c10::intrusive_ptr<Refill> refill) {
    ctx->saved_data["refill"] = c10::IValue::make_capsule(std::move(refill));
    return readers.vec();
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    c10::static_intrusive_pointer_cast<Refill>(ctx->saved_data["refill"].toCapsule())->run();
    grads.push_back(torch::Tensor());  // the capsule
    return grads;
  }
};

}  // namespace

Recomputation with_generator_of_now(Recomputation again, torch::DeviceType device) {
  return [again = std::move(again), device, state = generator_state_of_now(device)] {
    const GeneratorAt generator(device, state);
    return again();
  };
}

std::vector<torch::Tensor> refill_in_backward(const torch::Tensor& value, Recomputation again,
                                              const std::vector<torch::Tensor>& readers) {
  bool any_reader_differentiable = false;
  for (const auto& reader : readers) any_reader_differentiable |= reader.requires_grad();
  if (!again || !torch::GradMode::is_enabled() || !any_reader_differentiable || !owns_its_storage(value))
    return readers;
  auto refill = c10::make_intrusive<Refill>();
  refill->storage = value.storage();
  refill->bytes = value.storage().nbytes();
  refill->dtype = value.scalar_type();
  refill->again = std::move(again);
  refill->autocast = autocast_state_of_now(value.device().type());
  // As a TensorList, not a vector: autograd counts a vector argument as one non-tensor input.
  std::vector<torch::Tensor> out = RefillFunction::apply(at::TensorList(readers), refill);
  refill->storage.unsafeGetStorageImpl()->reset();
  return out;
}

}  // namespace mpt::models
