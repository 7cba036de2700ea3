// Deciding where a run writes and what it resumes from, so that nothing is ever lost: a run directory holding
// another spec's run is refused, checkpoints are never silently overwritten, and --resume auto picks the
// newest checkpoint that verifies.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "config/spec.h"
#include "train/events.h"
#include "train/trainer.h"

namespace mpt::run {

struct RunPlan {
  std::string dir;
  std::optional<std::string> resume_from;                        // a verified checkpoint
  std::vector<std::pair<std::string, std::string>> rejected;     // (checkpoint, why) skipped on the way
  bool fall_back = false;  // --resume auto: a checkpoint whose content is refused gives way to an older one
};

// resume is "auto", "never" or a checkpoint path. Throws UsageError (exit 2) when the plan would mix specs
// or overwrite an earlier run.
RunPlan plan_run(const std::string& dir, const std::string& resume, const config::Spec& spec);

// Resumes `trainer` from the plan's checkpoint. Under --resume auto, a checkpoint whose content load_checkpoint
// refuses (io::RejectedCheckpoint) is reported as checkpoint_rejected and the next older verified one is tried;
// when none is left the run starts from step 0. A refused --resume PATH is a usage error.
void resume_from_plan(train::Trainer& trainer, const RunPlan& plan, train::EventLog& events);

}  // namespace mpt::run
