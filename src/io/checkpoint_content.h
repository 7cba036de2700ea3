// What a CRC-valid checkpoint may hold that training must not resume from, found before anything is loaded:
// non-finite weights, buffers or optimizer state (a run that would only skip steps or train on NaN), a negative
// second moment (Adam divides by its square root), counters that do not add up, a loss scale outside FP32's
// positive finite range (which would skip every step without backing off).
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

#include "io/checkpoint.h"

namespace mpt::io {

// The first tensor of `saved` (by name) holding NaN or Inf, described; "" when all are finite.
std::string nonfinite_tensor(const torch::OrderedDict<std::string, torch::Tensor>& saved);
// What is wrong with one saved tensor (`non_negative`: a second moment), or "".
std::string tensor_problem(const std::string& name, const torch::Tensor& tensor, bool non_negative);
// Whether a field of an optimizer's state is a second moment (never negative).
bool second_moment(const std::string& field);
std::string training_state_problem(const TrainingState& state);

}  // namespace mpt::io
