// A resolved Spec cut into the config structs its components take. The command wiring is the only code that
// holds all of them; each component receives its own section.
#pragma once

#include <string>

#include "core/config/spec.h"
#include "core/data/dataset.h"
#include "core/dist/process_group.h"
#include "core/precision/policy.h"
#include "core/train/optimizer.h"
#include "core/train/schedule.h"
#include "core/train/trainer.h"
#include "models/registry.h"

namespace mpt::config {

struct ExperimentConfig {
  std::string name;
  uint64_t seed = 0;
  std::string output_root;
  models::ModelConfig model;
  data::DataConfig data;
  precision::PrecisionConfig precision;
  train::OptimizerConfig optimizer;
  train::ScheduleConfig schedule;   // peak_lr, warmup and total_steps are completed by the wiring
  int64_t base_batch_size = 0;      // the linear scaling rule's reference batch (0 = off)
  train::TrainConfig train;         // total_steps and eval cadence are completed by the wiring
  int64_t epochs = 0;
  int64_t max_steps = 0;
  int64_t checkpoint_keep_last = 3;
  std::string progress = "auto";
  bool check_numerics = false;
  std::string device = "cpu";
  int64_t threads = 0;
  dist::GroupConfig distributed;
  bool sync_batchnorm = false;
};

ExperimentConfig read_sections(const Spec& spec);

}  // namespace mpt::config
