// Deciding where a run writes and what it resumes from, so that nothing is ever lost: a run directory holding
// another spec's run is refused, checkpoints are never silently overwritten, and --resume auto picks the
// newest checkpoint that verifies.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "config/spec.h"

namespace mpt::run {

struct RunPlan {
  std::string dir;
  std::optional<std::string> resume_from;                        // a verified checkpoint
  std::vector<std::pair<std::string, std::string>> rejected;     // (checkpoint, why) skipped on the way
};

// resume is "auto", "never" or a checkpoint path. Throws UsageError (exit 2) when the plan would mix specs
// or overwrite an earlier run.
RunPlan plan_run(const std::string& dir, const std::string& resume, const config::Spec& spec);

}  // namespace mpt::run
