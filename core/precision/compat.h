// The one place where LibTorch 1.13 (Debian, CPU) and 2.x (CUDA builds) differ for mpt:
// the autocast switches, where the fused _amp_* kernels exist, which c10d class a backend (Gloo, NCCL) is, and
// whether a tensor list can be multiplied by a scalar tensor in one op.
// Everything else is version-neutral.
#pragma once

#include <ATen/autocast_mode.h>
#include <torch/torch.h>
#include <torch/version.h>

#define MPT_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) || (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

namespace c10d {
class Backend;
class ProcessGroup;
}  // namespace c10d

namespace mpt::compat {

// 2.0 split c10d's ProcessGroup into a front and per-device Backends; ProcessGroupGloo and ProcessGroupNCCL are
// Backends there (same collective signatures) and ProcessGroups in 1.13.
#if MPT_TORCH_AT_LEAST(2, 0)
using CollectiveBackend = c10d::Backend;
#else
using CollectiveBackend = c10d::ProcessGroup;
#endif

// 2.4 replaced the per-backend functions with device-type arguments (the old ones warn, then go away).
inline void set_autocast(torch::DeviceType device, bool enabled, torch::ScalarType dtype) {
#if MPT_TORCH_AT_LEAST(2, 4)
  at::autocast::set_autocast_enabled(device, enabled);
  if (enabled) at::autocast::set_autocast_dtype(device, dtype);
#else
  if (device == torch::kCUDA) {
    at::autocast::set_enabled(enabled);
    if (enabled) at::autocast::set_autocast_gpu_dtype(dtype);
  } else {
    at::autocast::set_cpu_enabled(enabled);
    if (enabled) at::autocast::set_autocast_cpu_dtype(dtype);
  }
#endif
}

inline bool autocast_enabled(torch::DeviceType device) {
#if MPT_TORCH_AT_LEAST(2, 4)
  return at::autocast::is_autocast_enabled(device);
#else
  return device == torch::kCUDA ? at::autocast::is_enabled() : at::autocast::is_cpu_enabled();
#endif
}

inline torch::ScalarType autocast_dtype(torch::DeviceType device) {
#if MPT_TORCH_AT_LEAST(2, 4)
  return at::autocast::get_autocast_dtype(device);
#else
  return device == torch::kCUDA ? at::autocast::get_autocast_gpu_dtype() : at::autocast::get_autocast_cpu_dtype();
#endif
}

// Multiplies every tensor by a scalar tensor that stays on the device (no host read): one multi-tensor op from
// 2.1, a loop of in-place multiplies before.
inline void foreach_mul_(const std::vector<torch::Tensor>& tensors, const torch::Tensor& factor) {
#if MPT_TORCH_AT_LEAST(2, 1)
  at::_foreach_mul_(tensors, factor);
#else
  for (const auto& t : tensors) t.mul_(factor);
#endif
}

// _amp_foreach_non_finite_check_and_unscale_ and _amp_update_scale_ have CUDA kernels in every version
// we support; CPU kernels arrived only in 2.x, so CPU tensors take mpt's portable path everywhere.
inline bool has_fused_amp_kernels(torch::DeviceType device) { return device == torch::kCUDA; }

}  // namespace mpt::compat
