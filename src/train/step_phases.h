// Wall time per phase of the optimizer step, for mpt bench: the step marks its phase boundaries and this keeps
// the clock. On CUDA every mark synchronizes the device, so it is attached only to measure.
#pragma once

#include <torch/torch.h>

#include <chrono>
#include <cstdint>

namespace mpt::train {

struct StepPhases {
  double data = 0.0;       // next batch from the loader, host -> device
  double forward = 0.0;    // forward under autocast and the FP32 loss
  double backward = 0.0;   // scaled backward
  double scaler = 0.0;     // master-grad copies, unscale + non-finite check, scale update
  double optimizer = 0.0;  // clipping, the optimizer step, master -> model copies
  int64_t steps = 0;

  double total() const { return data + forward + backward + scaler + optimizer; }
};

// One step's clock; every call is a no-op when `phases` is null (training, not benchmarking).
class PhaseClock {
 public:
  PhaseClock(StepPhases* phases, torch::Device device);
  // Adds the time since the previous mark (or the clock's start) to `phase`.
  void mark(double StepPhases::*phase);

 private:
  StepPhases* phases_;
  torch::Device device_;
  std::chrono::steady_clock::time_point last_;
};

}  // namespace mpt::train
