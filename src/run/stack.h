// The training stack a resolved spec describes: model on the device, the precision machinery and an optimizer
// over the FP32 weights, with the step counts and LR schedule filled in. `mpt train` and `mpt bench` build the
// same stack, so a benchmark measures exactly the step that training runs.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <optional>

#include "io/weights.h"
#include "models/registry.h"
#include "precision/fp8.h"
#include "precision/master_weights.h"
#include "precision/numerics.h"
#include "run/sections.h"
#include "train/schedule.h"
#include "train/trainer.h"

namespace mpt::run {

struct TrainingStack {
  std::unique_ptr<precision::NumericsMonitor> numerics;  // outlives the model, whose runners point at it
  models::Model model;
  std::unique_ptr<precision::MasterWeights> master_weights;
  std::unique_ptr<precision::Fp8Training> fp8;  // precision.mode fp8: its layers' scales (routes their GEMMs)
  std::unique_ptr<torch::optim::Optimizer> optimizer;
  torch::ScalarType compute_dtype = torch::kFloat;
  precision::LossScaleConfig loss_scale;
  int64_t global_batch = 0;
  train::ScaledLr scaled;  // the LR and warmup after the linear scaling rule
  std::optional<io::InitReport> init;  // what model.init_from loaded
  std::vector<std::string> fp32_modules;  // the policy's FP32 islands (the diverged advice checks against them)

  // A fresh scaler (its state comes from a checkpoint on resume) with the stack's dtype and strategy.
  train::PrecisionRuntime precision_runtime() const;
};

// Builds the stack for `c` on `device`; fills c.train.total_steps (from epochs and batches_per_epoch unless
// max_steps is set), c.train.eval_every_steps (per epoch when 0) and c.schedule's peak LR, warmup and length.
// Under data parallelism batches_per_epoch counts global batches and the global batch is per-rank batch x
// grad_accum_steps x world_size.
TrainingStack build_training_stack(ExperimentConfig& c, const data::SampleShape& sample,
                                   int64_t batches_per_epoch, torch::Device device, int world_size = 1);

}  // namespace mpt::run
