// Reading checkpoints of the streamed format (io/checkpoint_stream.h): one file, or a main file and the shards its
// index names, whatever the number of ranks that wrote them. io/checkpoint.h dispatches here by version.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "io/checkpoint.h"

namespace mpt::io {

std::string verify_streamed(const std::string& path);
TrainingState load_streamed(const std::string& path, const ModelTensors& model, torch::optim::Optimizer& optimizer,
                            const ContentCheck& check);
std::vector<std::pair<std::string, torch::Tensor>> read_weights_streamed(const std::string& path);

}  // namespace mpt::io
