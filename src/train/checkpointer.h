// The run's checkpoints: saved every checkpoint.every_steps and at the end (rank 0 alone writes them), and loaded
// into the step on resume. It decides its own timing, and reports each save as an event.
#pragma once

#include <string>

#include "hardware/memory_peak.h"
#include "io/checkpoint.h"
#include "train/events.h"
#include "train/train_config.h"
#include "train/train_step.h"

namespace mpt::train {

class Checkpointer {
 public:
  // `store` null: this rank writes no checkpoints (ranks other than 0). `memory` (may be null) keeps the writes'
  // peak apart from the training steps'.
  Checkpointer(const CheckpointConfig& config, io::CheckpointStore* store, EventLog& events,
               hardware::MemoryPeaks* memory);

  // After each step: saves when step % every_steps == 0 or it is the last step.
  void maybe_save(TrainStep& step, int64_t total_steps);
  void save(TrainStep& step);
  // Loads `path` into the step; throws io::RejectedCheckpoint when its content (the recipe's state) is refused.
  void resume(TrainStep& step, const std::string& path);
  const std::string& resumed_from() const { return resumed_from_; }

 private:
  CheckpointConfig config_;
  io::CheckpointStore* store_;
  EventLog& events_;
  hardware::MemoryPeaks* memory_;
  std::string resumed_from_;
};

}  // namespace mpt::train
