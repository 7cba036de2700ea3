// The tensor memory a run holds at its peak in each phase, above what was allocated when measuring began (the
// datasets): the allocated bytes of the CUDA caching allocator, or of CPU tensors (hardware/cpu_tensor_memory.h).
// Training steps, evaluations and checkpoint writes each keep their own peak, so the mixed-vs-FP32 answer is the
// training steps' alone. Beside them, the process's peak resident memory in each phase as the OS sees it (VmHWM,
// reset between phases through /proc/self/clear_refs): the number a job is sized by. The whole process's peak is
// kept apart, absolute: the peak RSS on the CPU, the allocator's highest peak on CUDA.
#pragma once

#include <torch/torch.h>

#include <array>
#include <string>

namespace mpt::hardware {

enum class MemoryPhase { kTraining, kEvaluation, kCheckpoint };

class MemoryPeaks {
 public:
  // Starts measuring in the training phase: the tensor bytes allocated now are the baseline.
  explicit MemoryPeaks(torch::Device device);
  // From now on the peak counts towards `phase`; the peak since the last switch goes to the phase that ran.
  void enter(MemoryPhase phase);
  // The phase's peak above the baseline (0 when it never ran).
  int64_t bytes(MemoryPhase phase) const;
  // The whole process's peak, absolute, from its start (what it held before measuring began included).
  int64_t process_bytes() const;
  // The process's peak resident memory while `phase` ran, absolute (0 when it never ran); -1 when this kernel does
  // not let a process reset its peak, so phases cannot be told apart.
  int64_t resident_bytes(MemoryPhase phase) const;
  // "CPU tensors" or "CUDA allocator".
  std::string kind() const;

 private:
  int64_t current_peak() const;  // the allocator's peak since the last reset
  void reset_peak();

  torch::Device device_;
  int64_t baseline_ = 0;
  int64_t process_ = 0;                // CUDA: the highest allocator peak folded so far
  std::array<int64_t, 3> kept_{};      // absolute peaks per phase, folded so far
  std::array<int64_t, 3> resident_{};  // VmHWM per phase, folded so far
  int64_t resident_process_ = 0;       // the highest VmHWM folded so far (resets lower VmHWM itself)
  bool resets_ = false;                // /proc/self/clear_refs took the reset
  MemoryPhase phase_ = MemoryPhase::kTraining;
};

// Counts the peak towards `phase` while it lives, then towards training again; with no MemoryPeaks it does nothing.
class MemoryPhaseScope {
 public:
  MemoryPhaseScope(MemoryPeaks* peaks, MemoryPhase phase) : peaks_(peaks) {
    if (peaks_) peaks_->enter(phase);
  }
  ~MemoryPhaseScope() {
    if (peaks_) peaks_->enter(MemoryPhase::kTraining);
  }
  MemoryPhaseScope(const MemoryPhaseScope&) = delete;
  MemoryPhaseScope& operator=(const MemoryPhaseScope&) = delete;

 private:
  MemoryPeaks* peaks_;
};

}  // namespace mpt::hardware
