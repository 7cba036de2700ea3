// The counter-based dropout mask (see dropout.h) for the kernels that apply it inside a fused pass: element i of
// a call's tensor is kept, and scaled by 1 / (1 - p), when mix(seed + i) is below the threshold.
#pragma once

#include <torch/torch.h>

#include <cstdint>

namespace mpt::ops {

// SplitMix64's finaliser: consecutive inputs give independent, uniformly distributed outputs.
inline uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// One call's mask: drawn in forward from torch's default CPU generator (one 64-bit draw), kept in the autograd
// context as three numbers (under "dropout_" keys, beside the fused op's own) and recomputed in backward.
struct DropoutMask {
  uint64_t seed, threshold;
  float scale;

  static DropoutMask draw(double p);
  void save(torch::autograd::AutogradContext* ctx) const;
  static DropoutMask load(torch::autograd::AutogradContext* ctx);
};

}  // namespace mpt::ops
