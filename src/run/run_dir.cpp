// Run-directory planning.
#include "run/run_dir.h"

#include <algorithm>
#include <filesystem>

#include "common/error.h"
#include "common/files.h"
#include "config/load.h"
#include "config/schema.h"
#include "io/checkpoint.h"

namespace mpt::run {
namespace {

namespace fs = std::filesystem;

// The keys whose values differ between the run directory's config.yaml and the spec about to run.
std::vector<std::string> spec_differences(const std::string& config_path, const config::Spec& spec) {
  config::Spec previous = config::parse_spec(read_file(config_path), config_path, {});
  std::vector<std::string> differences;
  for (const auto& d : config::differing_keys(previous, spec)) {
    // A key the earlier config.yaml does not mention was added to mpt after that run was written (each run
    // writes every key); its default then described what that run did.
    if (previous.origin(d.key) == "default") continue;
    if (!config::may_differ_on_resume(d.key)) differences.push_back(d.key + " (" + d.a_value + " there, " + d.b_value + " now)");
  }
  return differences;
}

}  // namespace

RunPlan plan_run(const std::string& dir, const std::string& resume, const config::Spec& spec) {
  RunPlan plan;
  plan.dir = dir;
  const std::string checkpoints = dir + "/checkpoints";
  const bool has_checkpoints = fs::is_directory(checkpoints) && !fs::is_empty(checkpoints);

  if (resume != "auto" && resume != "never") {
    if (std::string problem = io::verify_checkpoint(resume); !problem.empty())
      throw UsageError("--resume " + resume + ": " + problem);
    plan.resume_from = resume;
  } else if (resume == "never" && has_checkpoints) {
    throw UsageError(dir + " already holds checkpoints of an earlier run; pass --resume auto to continue it, "
                     "or choose another --run-dir / experiment.name");
  }

  const std::string config_path = dir + "/config.yaml";
  if (fs::exists(config_path)) {
    auto differences = spec_differences(config_path, spec);
    if (!differences.empty()) {
      std::string message = dir + " holds a run of a different spec; choose another --run-dir or experiment.name. "
                                  "Differences:";
      for (const auto& d : differences) message += "\n  " + d;
      throw UsageError(message);
    }
  }

  plan.fall_back = resume == "auto";
  if (resume == "auto" && has_checkpoints) {
    io::CheckpointStore store(checkpoints, 1 << 30);
    plan.resume_from = store.latest_valid(
        [&](const std::string& path, const std::string& why) { plan.rejected.emplace_back(path, why); });
  }
  return plan;
}

void resume_from_plan(train::Trainer& trainer, const RunPlan& plan, train::EventLog& events) {
  auto rejected = [&](const std::string& path, const std::string& why) { events.checkpoint_rejected(path, why); };
  for (std::optional<std::string> candidate = plan.resume_from; candidate;) {
    try {
      trainer.resume(*candidate);
      return;
    } catch (const io::RejectedCheckpoint& e) {
      if (!plan.fall_back) throw UsageError("--resume " + std::string(e.what()));
      rejected(*candidate, e.why());
      const io::CheckpointStore store(plan.dir + "/checkpoints", 1 << 30);
      candidate = store.latest_valid(rejected, io::CheckpointStore::step_of(*candidate));
    }
  }
}

}  // namespace mpt::run
