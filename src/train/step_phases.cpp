// See step_phases.h.
#include "train/step_phases.h"

#include <torch/cuda.h>

#include "hardware/host_syncs.h"

namespace mpt::train {

PhaseClock::PhaseClock(StepPhases* phases, torch::Device device) : phases_(phases), device_(device) {
  if (!phases_) return;
  ++phases_->steps;
  last_ = std::chrono::steady_clock::now();
}

void PhaseClock::mark(double StepPhases::*phase) {
  if (!phases_) return;
  if (device_.is_cuda()) {
    AllowHostSyncs timing;
    torch::cuda::synchronize();
  }
  const auto now = std::chrono::steady_clock::now();
  phases_->*phase += std::chrono::duration<double>(now - last_).count();
  last_ = now;
}

}  // namespace mpt::train
