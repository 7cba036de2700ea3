// Counter-based dropout (see dropout.h).
#include "models/dropout.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>

#include <cstring>
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

// The mask as raw bits (`keep` where the hash is below the threshold, else 0), so one loop serves FP32 (uint32_t
// bits) and BF16/FP16 (uint16_t bits) and the compiler vectorises the 64-bit hash: with AVX-512's 64-bit
// multiply a cooperlake clone runs 8 hashes per instruction where the scalar loop spent ~1.8 ns per element.
template <typename Bits>
__attribute__((target_clones("arch=cooperlake", "avx2", "default"))) void fill_mask(
    Bits* __restrict out, int64_t begin, int64_t end, uint64_t seed, uint64_t threshold, Bits keep) {
  for (int64_t i = begin; i < end; ++i) out[i] = mix(seed + static_cast<uint64_t>(i)) < threshold ? keep : Bits{0};
}

template <typename Scalar, typename Bits>
void fill_mask_as(torch::Tensor& mask, uint64_t seed, uint64_t threshold, double scale) {
  static_assert(sizeof(Scalar) == sizeof(Bits));
  const auto value = static_cast<Scalar>(scale);
  Bits keep;
  std::memcpy(&keep, &value, sizeof(keep));
  auto* out = reinterpret_cast<Bits*>(mask.data_ptr<Scalar>());
  at::parallel_for(0, mask.numel(), 1 << 14, [&](int64_t begin, int64_t end) {
    fill_mask<Bits>(out, begin, end, seed, threshold, keep);
  });
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
  const double scale = 1.0 / (1.0 - p);
  switch (mask.scalar_type()) {
    case at::kFloat: fill_mask_as<float, uint32_t>(mask, seed, threshold, scale); break;
    case at::kDouble: fill_mask_as<double, uint64_t>(mask, seed, threshold, scale); break;
    case at::kBFloat16: fill_mask_as<at::BFloat16, uint16_t>(mask, seed, threshold, scale); break;
    case at::kHalf: fill_mask_as<at::Half, uint16_t>(mask, seed, threshold, scale); break;
    default: return torch::dropout(x, p, training);
  }
  return x * mask;  // autograd keeps the mask for backward: grad * mask
}

}  // namespace mpt::models
