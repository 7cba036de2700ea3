// summary.json: the one file a person, ab-compare or a nightly job reads to know how a run went.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "train/trainer.h"

namespace mpt::train {

// Peak memory per phase (hardware::MemoryPeaks): the phases above the baseline, the process absolute.
struct MemoryReport {
  std::string kind;  // "CPU tensors" or "CUDA allocator"
  int64_t training = 0, evaluation = 0, checkpoint = 0, process = 0;
  // The process's peak resident memory in each phase as the OS saw it; -1 when phases could not be told apart.
  int64_t training_resident = -1, evaluation_resident = -1, checkpoint_resident = -1;
};

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
  double started_at = 0.0, ended_at = 0.0;  // this invocation, in seconds since the epoch
  MemoryReport memory;
  int64_t global_batch_size = 0;
  int64_t total_steps = 0;
  int world_size = 1;
  std::string distributed_backend;        // "" in one process
  std::vector<std::string> fp32_modules;  // precision.fp32_modules as resolved, and why (auto's reasons)
  std::string fp32_modules_origin;
};

nlohmann::json make_summary(const TrainResult& result, const RunContext& context);

}  // namespace mpt::train
