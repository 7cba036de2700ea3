// Autocast scopes. The weight-cast cache must be cleared when the outermost scope
// closes, or the next step would reuse BF16/FP16 copies of weights the optimizer has since updated.
#include "precision/autocast.h"

#include "ops/bf16_gemm_emulation.h"

namespace mpt::precision {
namespace {

void set_autocast(torch::DeviceType device, bool enabled, torch::ScalarType dtype) {
  at::autocast::set_autocast_enabled(device, enabled);
  if (enabled) at::autocast::set_autocast_dtype(device, dtype);
}

}  // namespace

AutocastScope::AutocastScope(torch::DeviceType device, torch::ScalarType compute_dtype) : device_(device) {
  if (compute_dtype == torch::kFloat) return;
  if (device == torch::kCPU && compute_dtype == torch::kBFloat16) ops::enable_cpu_bf16_emulation();
  active_ = true;
  was_enabled_ = autocast_enabled(device_);
  set_autocast(device_, true, compute_dtype);
  at::autocast::increment_nesting();
}

AutocastScope::~AutocastScope() {
  if (!active_) return;
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  set_autocast(device_, was_enabled_, torch::kFloat);
}

Fp32Scope::Fp32Scope(torch::DeviceType device)
    : device_(device), was_enabled_(autocast_enabled(device)), dtype_(autocast_dtype(device)) {
  if (was_enabled_) set_autocast(device_, false, dtype_);
}

Fp32Scope::~Fp32Scope() {
  if (was_enabled_) set_autocast(device_, true, dtype_);
}

}  // namespace mpt::precision
