// Overflow diagnosis: which parameters' gradients held Inf/NaN, so an overflow event says which layer to keep
// in FP32 rather than only that something overflowed (HF's --debug underflow_overflow, transformers#11274).
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

namespace mpt::precision {

struct NonfiniteGrad {
  std::string name;         // module path, e.g. "hidden.0.weight"
  int64_t nonfinite = 0;    // Inf/NaN elements
  double max_abs_finite = 0.0;  // largest finite |grad| in the same tensor
};

// The parameters whose gradients hold Inf/NaN, most affected first, at most `limit` of them.
// Costs a pass over every gradient: call it only after an overflow was found.
std::vector<NonfiniteGrad> find_nonfinite_grads(const torch::OrderedDict<std::string, torch::Tensor>& parameters,
                                                size_t limit);

// "head.weight (3 non-finite, max finite |g| 0.12), ..."
std::string describe(const std::vector<NonfiniteGrad>& culprits);

}  // namespace mpt::precision
