// See finish_backward.h. The host reads here are the step's one deliberate sync: the overflow verdict.
#include "precision/finish_backward.h"

#include "hardware/host_syncs.h"
#include "ops/gradient_check.h"

namespace mpt::precision {
namespace {

FinishedBackward with_update(FinishedBackward done, LossScaler& scaler) {
  done.scale_update = scaler.update(done.skip);
  return done;
}

}  // namespace

FinishedBackward finish_for_one_pass(const std::vector<torch::Tensor>& grads, LossScaler& scaler, double max_norm) {
  FinishedBackward done;
  const ops::GradientCheck check = ops::check_gradients(grads, scaler.scale(), max_norm);
  done.skip = check.nonfinite;
  done.grad_factor = check.factor;
  done.grads_scaled_by = scaler.scale();  // nothing was written to them
  if (max_norm > 0 && !done.skip) done.grad_norm = torch::scalar_tensor(check.norm, torch::kDouble);
  return with_update(done, scaler);
}

FinishedBackward finish_in_place(const std::vector<torch::Tensor>& grads, LossScaler& scaler, double max_norm) {
  FinishedBackward done;
  if (ops::single_pass_applies(grads)) {
    const ops::GradientCheck check = ops::unscale_check_and_clip(grads, scaler.scale(), max_norm);
    done.skip = check.nonfinite;
    if (done.skip) done.grads_scaled_by = scaler.scale();  // a skip writes nothing
    if (max_norm > 0 && !done.skip) done.grad_norm = torch::scalar_tensor(check.norm, torch::kDouble);
    return with_update(done, scaler);
  }
  {
    AllowHostSyncs deliberate;
    done.skip = scaler.unscale_and_check(grads);
  }
  if (max_norm > 0 && !done.skip) done.grad_norm = ops::clip_grad_norm(grads, max_norm);  // no host read
  return with_update(done, scaler);
}

FinishedBackward finish_across_ranks(const std::vector<torch::Tensor>& grads, LossScaler& scaler, double max_norm,
                                     const AgreeMax& agree_max, bool stop_requested) {
  FinishedBackward done;
  const torch::Tensor overflow = scaler.unscale_and_flag(grads);
  torch::Tensor flags = torch::cat({overflow, torch::full({1}, stop_requested ? 1.0f : 0.0f, overflow.options())});
  agree_max(flags);
  {
    AllowHostSyncs deliberate;
    const torch::Tensor host = flags.cpu();
    done.skip = host[0].item<float>() != 0.0f;
    done.stop_agreed = host[1].item<float>() != 0.0f;
  }
  if (max_norm > 0 && !done.skip) done.grad_norm = ops::clip_grad_norm(grads, max_norm);
  return with_update(done, scaler);
}

}  // namespace mpt::precision
