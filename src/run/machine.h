// The machine a run trains on, set up once per process: threads (shared among this machine's ranks unless
// device.threads says otherwise), the device (a rank's own GPU), CUDA math (TF32, cuDNN's benchmark) and the seed;
// and the facts summary.json reports about it.
#pragma once

#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <string>

#include "distributed/environment.h"
#include "distributed/process_group.h"
#include "run/sections.h"
#include "run/stack.h"
#include "train/summary.h"

namespace mpt::run {

struct Machine {
  torch::Device device = torch::kCPU;
  int threads = 1;
  std::string blas;
  bool tf32 = false;
};

// `launch` null: one process. Logs the device line and warns when other tasks keep the cores busy.
Machine set_up_machine(const ExperimentConfig& c, const distributed::LaunchInfo* launch, spdlog::logger& logger);

// What summary.json says about the run besides its result (memory and wall time are filled in at the end).
train::RunContext run_context(const ExperimentConfig& c, const Machine& machine, const TrainingStack& stack,
                              const distributed::Group& group);

}  // namespace mpt::run
