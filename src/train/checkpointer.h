// The run's checkpoints: saved every checkpoint.every_steps and at the end (rank 0 writes them, and under ZeRO-1
// every rank its shard), and loaded into the step on resume. It decides its own timing, and reports each save as an
// event.
#pragma once

#include <string>

#include "hardware/memory_peak.h"
#include "io/checkpoint.h"
#include "train/events.h"
#include "train/train_config.h"
#include "train/train_step.h"

namespace mpt::train {

// A component whose logged values run across checkpoints (the metrics window's averages): its state travels in
// the checkpoint's logging section, so that a resumed run logs what the uninterrupted one would have.
class LoggedAcrossResume {
 public:
  virtual ~LoggedAcrossResume() = default;
  // Called on every rank at each save (it may be collective).
  virtual io::NamedTensors logging_state(TrainStep& step) = 0;
  // Called on every rank after a resume; `saved` may be empty (a checkpoint older than this section).
  virtual void restore_logging(const io::NamedTensors& saved, TrainStep& step) = 0;
};

class Checkpointer {
 public:
  // `store` null: this rank writes no main files (ranks other than 0); under ZeRO-1 every rank writes its shard
  // into `folder`. `memory` (may be null) keeps the writes' peak apart from the training steps'. `logged` (may be
  // null) is saved and restored with the training state.
  Checkpointer(const CheckpointConfig& config, io::CheckpointStore* store, std::string folder, EventLog& events,
               hardware::MemoryPeaks* memory, LoggedAcrossResume* logged = nullptr);

  // After each step: saves when step % every_steps == 0 or it is the last step.
  void maybe_save(TrainStep& step, int64_t total_steps);
  void save(TrainStep& step);
  // Loads `path` into the step; throws io::RejectedCheckpoint when its content (the recipe's state) is refused.
  void resume(TrainStep& step, const std::string& path);
  const std::string& resumed_from() const { return resumed_from_; }

 private:
  CheckpointConfig config_;
  io::CheckpointStore* store_;
  std::string folder_;
  EventLog& events_;
  hardware::MemoryPeaks* memory_;
  LoggedAcrossResume* logged_;
  std::string resumed_from_;
};

}  // namespace mpt::train
