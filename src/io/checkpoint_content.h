// What a CRC-valid checkpoint may hold that training must not resume from, found before anything is loaded:
// non-finite weights, buffers or optimizer state (a run that would only skip steps or train on NaN), and a
// negative second moment (Adam divides by its square root).
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

namespace mpt::io {

// The first tensor of `saved` (by name) holding NaN or Inf, described; "" when all are finite.
std::string nonfinite_tensor(const torch::OrderedDict<std::string, torch::Tensor>& saved);

// The first problem in an optimizer's saved state (torch::optim's archive: state/<key>/exp_avg, ...), naming the
// parameter from `parameter_names` (the order the optimizer holds them in); "" when it may be loaded.
std::string optimizer_state_problem(torch::serialize::InputArchive& optimizer,
                                    const std::vector<std::string>& parameter_names);

}  // namespace mpt::io
