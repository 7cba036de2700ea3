// Evaluation: loss and accuracy over a whole split, without gradients, under the run's compute precision.
#pragma once

#include <torch/torch.h>

#include "core/data/dataset.h"
#include "models/model.h"

namespace mpt::train {

struct EvalMetrics {
  double loss = 0.0;
  double accuracy = 0.0;
  int64_t samples = 0;
};

EvalMetrics evaluate(models::ModelImpl& model, const data::Dataset& dataset, torch::Device device,
                     torch::ScalarType compute_dtype, int64_t batch_size);

}  // namespace mpt::train
