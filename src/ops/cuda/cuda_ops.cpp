#include "ops/cuda/cuda_ops.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>

#include "common/error.h"
#include "ops/cuda/launchers.h"

namespace mpt::ops::cuda {
namespace {

// The stream LibTorch runs its own work on for x's device, so the kernel is ordered with it.
void* current_stream(const torch::Tensor& x) {
  return c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA)->getStream(x.device()).native_handle();
}

}  // namespace

bool kernels_built() {
#ifdef MPT_WITH_CUDA_KERNELS
  return true;
#else
  return false;
#endif
}

bool supports_to_mxfp8(const torch::Tensor& x) {
  return kernels_built() && x.is_cuda() && (x.scalar_type() == torch::kFloat || x.scalar_type() == torch::kBFloat16) &&
         x.dim() >= 1 && x.size(-1) % kMxBlock == 0;
}

MxTensor to_mxfp8(const torch::Tensor& x) {
  if (!supports_to_mxfp8(x)) throw Error("ops::cuda::to_mxfp8: no CUDA kernel for this tensor");
  const torch::Tensor values = x.to(torch::kFloat).contiguous();
  std::vector<int64_t> scale_shape = x.sizes().vec();
  scale_shape.back() /= kMxBlock;
  torch::Tensor data = torch::empty(x.sizes(), values.options().dtype(torch::kFloat8_e4m3fn));
  torch::Tensor scales = torch::empty(scale_shape, values.options().dtype(torch::kByte));
  const int error = launch_to_mxfp8(values.data_ptr<float>(), static_cast<uint8_t*>(data.data_ptr()),
                                    scales.data_ptr<uint8_t>(), values.numel() / kMxBlock, current_stream(values));
  if (error != 0)
    throw Error("ops::cuda::to_mxfp8: the kernel did not launch (CUDA error " + std::to_string(error) + ")");
  return {data, scales};
}

}  // namespace mpt::ops::cuda
