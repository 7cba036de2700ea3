// Evaluation: loss and accuracy over a whole split, without gradients, under the run's compute precision; and the
// evaluator that decides when a run evaluates (every train.eval_every_steps, and at the end).
#pragma once

#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <memory>
#include <optional>

#include "common/files.h"
#include "data/dataset.h"
#include "distributed/process_group.h"
#include "hardware/memory_peak.h"
#include "io/tensorboard.h"
#include "models/model.h"
#include "train/train_config.h"

namespace mpt::train {

struct EvalMetrics {
  double loss = 0.0;
  double accuracy = 0.0;
  int64_t samples = 0;
};

// Under data parallelism each rank evaluates its slice of every batch and the sums are all-reduced, so every
// rank returns the metrics of the whole split.
EvalMetrics evaluate(models::ModelImpl& model, const data::Dataset& dataset, torch::Device device,
                     torch::ScalarType compute_dtype, int64_t batch_size, distributed::Group* group = nullptr);

class Evaluator {
 public:
  Evaluator(const TrainConfig& config, const data::Dataset& test_set, torch::Device device, distributed::Group& group,
            hardware::MemoryPeaks* memory);
  // After a step: evaluates when step % eval_every_steps == 0 or it is the last step, and writes the eval line.
  void maybe_evaluate(models::ModelImpl& model, torch::ScalarType dtype, int64_t step, JsonlWriter& metrics,
                      io::TensorBoardWriter& tensorboard, spdlog::logger& logger);
  void evaluate_now(models::ModelImpl& model, torch::ScalarType dtype, int64_t step, JsonlWriter& metrics,
                    io::TensorBoardWriter& tensorboard, spdlog::logger& logger);
  const std::optional<EvalMetrics>& last() const { return last_; }

 private:
  TrainConfig config_;
  const data::Dataset& test_set_;
  torch::Device device_;
  distributed::Group& group_;
  hardware::MemoryPeaks* memory_;
  std::optional<EvalMetrics> last_;
};

}  // namespace mpt::train
