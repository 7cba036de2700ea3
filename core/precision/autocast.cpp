// Autocast scopes over the compat layer. The weight-cast cache must be cleared when the outermost scope
// closes, or the next step would reuse BF16/FP16 copies of weights the optimizer has since updated.
#include "core/precision/autocast.h"

#include "core/precision/compat.h"

namespace mpt::precision {

AutocastScope::AutocastScope(torch::DeviceType device, torch::ScalarType compute_dtype) : device_(device) {
  if (compute_dtype == torch::kFloat) return;
  active_ = true;
  was_enabled_ = compat::autocast_enabled(device_);
  compat::set_autocast(device_, true, compute_dtype);
  at::autocast::increment_nesting();
}

AutocastScope::~AutocastScope() {
  if (!active_) return;
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  compat::set_autocast(device_, was_enabled_, torch::kFloat);
}

Fp32Scope::Fp32Scope(torch::DeviceType device)
    : device_(device),
      was_enabled_(compat::autocast_enabled(device)),
      dtype_(compat::autocast_dtype(device)) {
  if (was_enabled_) compat::set_autocast(device_, false, dtype_);
}

Fp32Scope::~Fp32Scope() {
  if (was_enabled_) compat::set_autocast(device_, true, dtype_);
}

}  // namespace mpt::precision
