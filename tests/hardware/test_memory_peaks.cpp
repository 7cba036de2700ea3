// MemoryPeaks keeps each phase's peak apart: an evaluation or a checkpoint write that needs more memory than the
// training steps must not become the training peak (the mixed-vs-FP32 memory answer).
#include <catch2/catch.hpp>

#include "hardware/memory_peak.h"

using mpt::hardware::MemoryPeaks;
using mpt::hardware::MemoryPhase;
using mpt::hardware::MemoryPhaseScope;

namespace {

constexpr int64_t kMiB = 1 << 20;

// Holds a CPU tensor of `mib` MiB until it goes out of scope.
struct Resident {
  explicit Resident(int64_t mib) : tensor(torch::ones({mib * kMiB / 4})) {}
  torch::Tensor tensor;
};

}  // namespace

TEST_CASE("each phase keeps its own peak, and the process peak covers them all", "[fast][device][memory]") {
  MemoryPeaks peaks(torch::kCPU);
  CHECK(peaks.kind() == "CPU tensors");
  { const Resident training(48); }
  {
    const MemoryPhaseScope evaluation(&peaks, MemoryPhase::kEvaluation);
    const Resident big(192);
  }
  {
    const MemoryPhaseScope checkpoint(&peaks, MemoryPhase::kCheckpoint);
    const Resident medium(96);
  }
  const Resident training_again(16);  // back in training, below its earlier peak

  const int64_t training = peaks.bytes(MemoryPhase::kTraining);
  const int64_t evaluation = peaks.bytes(MemoryPhase::kEvaluation);
  const int64_t checkpoint = peaks.bytes(MemoryPhase::kCheckpoint);
  INFO("training " << training / kMiB << " MiB, evaluation " << evaluation / kMiB << " MiB, checkpoint "
                   << checkpoint / kMiB << " MiB, process " << peaks.process_bytes() / kMiB << " MiB");
  CHECK(training >= 40 * kMiB);
  CHECK(training < 120 * kMiB);  // not the evaluation's 192 MiB
  CHECK(evaluation >= 180 * kMiB);
  CHECK(checkpoint >= 90 * kMiB);
  CHECK(checkpoint < 180 * kMiB);
  CHECK(peaks.process_bytes() >= evaluation);  // the absolute peak RSS, what the process held before included
}

TEST_CASE("a phase that never ran reports 0, and a scope without MemoryPeaks does nothing", "[fast][device][memory]") {
  MemoryPeaks peaks(torch::kCPU);
  CHECK(peaks.bytes(MemoryPhase::kCheckpoint) == 0);
  const MemoryPhaseScope nothing(nullptr, MemoryPhase::kEvaluation);
  CHECK(peaks.bytes(MemoryPhase::kEvaluation) == 0);
}
