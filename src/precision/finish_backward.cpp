// See finish_backward.h. The host reads here are the step's one deliberate sync: the overflow verdict.
#include "precision/finish_backward.h"

#include "device/host_syncs.h"
#include "ops/gradient_check.h"

namespace mpt::precision {

BackwardFinisher::BackwardFinisher(LossScaler& scaler, double max_norm, AgreeMax agree_max)
    : scaler_(scaler), max_norm_(max_norm), agree_max_(std::move(agree_max)) {}

FinishedBackward BackwardFinisher::finish(const std::vector<torch::Tensor>& grads, bool deferred,
                                          bool stop_requested) {
  FinishedBackward done;
  bool clipped = false;
  if (deferred || (!agree_max_ && ops::single_pass_applies(grads))) {
    const ops::GradientCheck check = deferred ? ops::check_gradients(grads, scaler_.scale(), max_norm_)
                                         : ops::unscale_check_and_clip(grads, scaler_.scale(), max_norm_);
    done.skip = check.nonfinite;
    if (deferred) done.grad_factor = check.factor;
    if (deferred || done.skip) done.grads_scaled_by = scaler_.scale();  // nothing was written to them
    if (max_norm_ > 0 && !done.skip) done.grad_norm = torch::scalar_tensor(check.norm, torch::kDouble);
    clipped = true;
  } else if (!agree_max_) {
    AllowHostSyncs deliberate;
    done.skip = scaler_.unscale_and_check(grads);
  } else {
    const torch::Tensor overflow = scaler_.unscale_and_flag(grads);
    torch::Tensor flags = torch::cat({overflow, torch::full({1}, stop_requested ? 1.0f : 0.0f, overflow.options())});
    agree_max_(flags);
    AllowHostSyncs deliberate;
    const torch::Tensor host = flags.cpu();
    done.skip = host[0].item<float>() != 0.0f;
    done.stop_agreed = host[1].item<float>() != 0.0f;
  }
  if (max_norm_ > 0 && !done.skip && !clipped) done.grad_norm = ops::clip_grad_norm(grads, max_norm_);  // no host read
  done.scale_update = scaler_.update(done.skip);
  return done;
}

}  // namespace mpt::precision
