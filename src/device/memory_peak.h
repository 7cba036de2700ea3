// The memory a run's training steps hold at their peak, apart from what the process held before (its libraries,
// the CUDA context): on CUDA the caching allocator's peak, on the CPU the peak RSS (VmHWM) above the RSS when
// measuring began. Evaluation and checkpoint writes are left out by pausing around them.
#pragma once

#include <torch/torch.h>

namespace mpt::hardware {

class MemoryPeak {
 public:
  // Starts measuring: the current use is the baseline, and the peak so far is forgotten.
  explicit MemoryPeak(torch::Device device);
  // Folds the peak since the last resume into the kept peak (call before an evaluation or a checkpoint) ...
  void pause();
  // ... and forgets the peak of what ran while paused.
  void resume();
  // The kept peak above the baseline, the part since the last resume included.
  int64_t bytes() const;

 private:
  int64_t current_peak() const;  // the allocator's peak, or VmHWM
  void reset_peak();

  torch::Device device_;
  int64_t baseline_ = 0;
  int64_t kept_ = 0;
  bool paused_ = false;
};

}  // namespace mpt::hardware
