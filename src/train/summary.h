// summary.json: the one file a person, ab-compare or a nightly job reads to know how a run went.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "train/trainer.h"

namespace mpt::train {

// Facts about the run that the trainer does not own.
struct RunContext {
  std::string name;
  std::string precision_mode;  // resolved
  std::string precision_strategy;
  std::string loss_scale_mode;
  std::string device;
  int threads = 1;
  bool tf32 = false;
  std::string blas;
  double wall_time_sec = 0.0;
  int64_t peak_memory_bytes = 0;
  int64_t global_batch_size = 0;
  int64_t total_steps = 0;
  int world_size = 1;
  std::string distributed_backend;  // "" in one process
};

nlohmann::json make_summary(const TrainResult& result, const RunContext& context);

}  // namespace mpt::train
