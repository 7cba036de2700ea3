// Checkpoints of the first format, as mpt wrote them until the streamed one (io/checkpoint_stream.h): a
// torch::serialize zip built in memory, in one container. Still verified, loaded and exported; never written.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "io/checkpoint.h"

namespace mpt::io {

std::string verify_v1(const std::string& path);
TrainingState load_v1(const std::string& path, const ModelTensors& model, torch::optim::Optimizer& optimizer,
                      const ContentCheck& check);
std::vector<std::pair<std::string, torch::Tensor>> read_weights_v1(const std::string& path);

}  // namespace mpt::io
