// Evaluation: loss and accuracy over a whole split, without gradients, under the run's compute precision.
#pragma once

#include <torch/torch.h>

#include "data/dataset.h"
#include "dist/process_group.h"
#include "models/model.h"

namespace mpt::train {

struct EvalMetrics {
  double loss = 0.0;
  double accuracy = 0.0;
  int64_t samples = 0;
};

// Under data parallelism each rank evaluates its slice of every batch and the sums are all-reduced, so every
// rank returns the metrics of the whole split.
EvalMetrics evaluate(models::ModelImpl& model, const data::Dataset& dataset, torch::Device device,
                     torch::ScalarType compute_dtype, int64_t batch_size, dist::Group* group = nullptr);

}  // namespace mpt::train
