// The first checkpoint format, written as mpt wrote it until the streamed one (io/checkpoint_v1.h reads it): for the
// tests that prove such files still verify, load and export.
#pragma once

#include <string>

#include "io/checkpoint.h"

namespace mpt::testing {

void save_first_format_checkpoint(const std::string& path, const io::ModelTensors& model,
                                  torch::optim::Optimizer& optimizer, const io::TrainingState& state);

}  // namespace mpt::testing
