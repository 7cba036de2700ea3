// Counter-based dropout (see dropout.h).
#include "models/dropout.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>

#include <limits>
#include <mutex>

namespace mpt::models {
namespace {

// SplitMix64's finaliser: consecutive inputs give independent, uniformly distributed outputs.
inline uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint64_t draw_seed() {
  at::Generator generator = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(generator.mutex());
  return generator.get<at::CPUGeneratorImpl>()->random64();
}

}  // namespace

torch::Tensor dropout(const torch::Tensor& x, double p, bool training) {
  if (!training || p <= 0.0) return x;
  if (!x.device().is_cpu() || p >= 1.0) return torch::dropout(x, p, training);
  const uint64_t seed = draw_seed() * 0x9e3779b97f4a7c15ULL;
  // keep when the hash is below (1 - p) * 2^64; the rounding of the threshold is below 2^-53 in probability.
  const auto threshold = static_cast<uint64_t>((1.0 - p) * 18446744073709551616.0);
  torch::Tensor mask = torch::empty(x.sizes(), x.options().requires_grad(false));
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, mask.scalar_type(), "mpt_dropout_mask", [&] {
    const auto scale = static_cast<scalar_t>(1.0 / (1.0 - p));
    scalar_t* out = mask.data_ptr<scalar_t>();
    at::parallel_for(0, mask.numel(), 1 << 14, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i)
        out[i] = mix(seed + static_cast<uint64_t>(i)) < threshold ? scale : static_cast<scalar_t>(0);
    });
  });
  return x * mask;  // autograd keeps the mask for backward: grad * mask
}

}  // namespace mpt::models
