// Where a run writes and what it resumes from, so that nothing is ever lost: a run directory holding another spec's
// run is refused, checkpoints are never silently overwritten, --resume auto picks the newest checkpoint that
// verifies (and one whose content loads), and rank 0 alone writes, holding the directory's lock.
#pragma once

#include <spdlog/spdlog.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/dir_lock.h"
#include "common/files.h"
#include "config/spec.h"
#include "distributed/process_group.h"
#include "io/checkpoint.h"
#include "io/log.h"
#include "io/tensorboard.h"
#include "train/checkpointer.h"
#include "train/events.h"
#include "train/metrics_window.h"
#include "train/train_step.h"

namespace mpt::run {

struct RunPlan {
  std::string dir;
  std::optional<std::string> resume_from;                     // a verified checkpoint
  std::vector<std::pair<std::string, std::string>> rejected;  // (checkpoint, why) skipped on the way
  bool fall_back = false;  // --resume auto: a checkpoint whose content is refused gives way to an older one
};

// resume is "auto", "never" or a checkpoint path. Throws UsageError (exit 2) when the plan would mix specs
// or overwrite an earlier run.
RunPlan plan_run(const std::string& dir, const std::string& resume, const config::Spec& spec);

// Resumes `step` from the plan's checkpoint. Under --resume auto, a checkpoint whose content load_checkpoint refuses
// (io::RejectedCheckpoint) is reported as checkpoint_rejected and the next older verified one is tried; when none is
// left the run starts from step 0. A refused --resume PATH is a usage error.
void resume_from_plan(train::Checkpointer& checkpointer, train::TrainStep& step, const RunPlan& plan,
                      train::EventLog& events);

// A run directory open for one invocation of mpt train: planned on every rank from the same state, then locked
// and written by rank 0 alone (config.yaml, JSONL tails a crash left torn cut back, the writers opened); other
// ranks get writers that write nothing and a logger that shows only errors. A directory this invocation made is
// removed when it is destroyed before keep(): a run refused before its first step leaves nothing behind.
class RunDirectory {
 public:
  RunDirectory(const std::string& dir, const std::string& resume, const config::Spec& spec, distributed::Group& group,
               bool live_progress);
  ~RunDirectory();
  RunDirectory(const RunDirectory&) = delete;
  RunDirectory& operator=(const RunDirectory&) = delete;

  const std::string& dir() const { return dir_; }
  const RunPlan& plan() const { return plan_; }
  const std::shared_ptr<spdlog::logger>& logger() const { return logger_; }
  train::EventLog& events() { return *events_; }
  train::RunSinks sinks() { return {*metrics_, *events_, logger_, *progress_, *tensorboard_}; }
  io::CheckpointStore* checkpoints() { return checkpoints_ ? &*checkpoints_ : nullptr; }
  void keep() { made_ = false; }
  // Training goes on from `step` (the checkpoint resumed from, or 0): the records earlier invocations wrote past it
  // are cut from metrics.jsonl and events.jsonl, as TensorBoard purges them, since training writes them again;
  // what of them MLflow already holds is noted so it is not sent twice.
  void rewind_logs(int64_t step);

 private:
  std::string dir_;
  bool made_ = false;  // this invocation created the directory (rank 0)
  std::optional<DirectoryLock> lock_;
  RunPlan plan_;
  std::shared_ptr<spdlog::logger> logger_;
  std::unique_ptr<train::EventLog> events_;
  std::unique_ptr<JsonlWriter> metrics_;
  std::unique_ptr<io::TensorBoardWriter> tensorboard_;
  std::unique_ptr<io::Progress> progress_;
  std::optional<io::CheckpointStore> checkpoints_;
  uint64_t metrics_bytes_ = 0, events_bytes_ = 0;  // what earlier invocations left in the JSONL files
};

}  // namespace mpt::run
