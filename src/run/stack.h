// The training stack a resolved spec describes: the model on its device, the precision recipe over it and an
// optimizer over the recipe's FP32 weights, with the step counts and LR schedule filled in; and the step built from
// it. `mpt train` and `mpt bench` build the same stack, so a benchmark measures exactly the step that training runs.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <optional>

#include "data/loader.h"
#include "distributed/process_group.h"
#include "io/weights.h"
#include "models/registry.h"
#include "precision/numerics.h"
#include "precision/recipe.h"
#include "run/sections.h"
#include "train/schedule.h"
#include "train/train_step.h"

namespace mpt::run {

struct TrainingStack {
  std::unique_ptr<precision::NumericsMonitor> numerics;  // outlives the model, whose runners point at it
  models::Model model;
  std::unique_ptr<precision::Recipe> recipe;
  std::unique_ptr<torch::optim::Optimizer> optimizer;  // moved into the step
  int64_t global_batch = 0;
  train::ScaledLr scaled;              // the LR and warmup after the linear scaling rule
  std::optional<io::InitReport> init;  // what model.init_from loaded
};

// Builds the stack for `c` on `device`; fills c.train.total_steps (from epochs and batches_per_epoch unless
// max_steps is set), c.train.eval_every_steps (per epoch when 0) and c.schedule's peak LR, warmup and length.
// Under data parallelism batches_per_epoch counts global batches and the global batch is per-rank batch x
// grad_accum_steps x world_size.
TrainingStack build_training_stack(ExperimentConfig& c, const data::SampleShape& sample, int64_t batches_per_epoch,
                                   torch::Device device, int world_size = 1);

// The step over `stack` (which keeps the recipe and the numerics monitor; the optimizer moves into the step).
train::TrainStep make_train_step(TrainingStack& stack, const ExperimentConfig& c, torch::Device device,
                                 data::BatchLoader& loader, distributed::Group& group);

}  // namespace mpt::run
