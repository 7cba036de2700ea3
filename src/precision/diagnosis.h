// Overflow diagnosis: which parameters' gradients held Inf/NaN, so an overflow event says which layer to keep
// in FP32 rather than only that something overflowed (HF's --debug underflow_overflow, transformers#11274).
#pragma once

#include <torch/torch.h>

#include <functional>
#include <string>
#include <vector>

namespace mpt::precision {

struct NonfiniteGrad {
  std::string name;             // module path, e.g. "hidden.0.weight"
  int64_t nonfinite = 0;        // Inf/NaN elements
  double max_abs_finite = 0.0;  // largest finite |grad| in the same tensor
};

// The parameters whose gradients hold Inf/NaN, most affected first, at most `limit` of them. `grad_scale` is the
// loss scale still in the gradients (a skipped step's are left scaled on some paths): magnitudes are reported
// without it. Costs a pass over every gradient: call it only after an overflow was found.
std::vector<NonfiniteGrad> find_nonfinite_grads(const torch::OrderedDict<std::string, torch::Tensor>& parameters,
                                                size_t limit, double grad_scale = 1.0);

// "head.weight (3 non-finite, max finite |g| 0.12), ..."
std::string describe(const std::vector<NonfiniteGrad>& culprits);

// What to try when training diverged with these culprits: a layer that computes in low precision can move to
// FP32 (precision.fp32_modules); for one that already computes in FP32 (`computes_in_fp32(parameter name)`)
// only a lower learning rate or clipping can help, and the advice says so.
std::string divergence_advice(const std::vector<NonfiniteGrad>& culprits,
                              const std::function<bool(const std::string&)>& computes_in_fp32);

}  // namespace mpt::precision
