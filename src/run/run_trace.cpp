// See run_trace.h.
#include "run/run_trace.h"

#include <c10/util/Exception.h>
#include <fmt/format.h>

#include <filesystem>

#include "common/files.h"
#include "common/json.h"

namespace mpt::run {

void record_failure(const std::string& run_dir, int rank, int64_t step, const std::exception& error,
                    const train::RunContext& context, train::EventLog& events,
                    const std::shared_ptr<spdlog::logger>& logger) {
  const auto* torch_error = dynamic_cast<const c10::Error*>(&error);
  const std::string reason = torch_error ? torch_error->what_without_backtrace() : error.what();
  try {
    if (rank != 0) {  // only rank 0's log writes the run directory's events.jsonl; others append their line
      train::EventLog(run_dir + "/events.jsonl", logger).failed(step, rank, reason);
      return;
    }
    events.failed(step, rank, reason);
    train::TrainResult failed;
    failed.status = "failed";
    failed.diagnosis = fmt::format("rank {} stopped at step {}: {}", rank, step, reason);
    failed.steps = step;
    write_file_atomically(run_dir + "/summary.json", train::make_summary(failed, context).dump(2) + "\n");
  } catch (const std::exception& also) {  // the original error matters more than this one
    logger->error("could not record the failure in {}: {}", run_dir, also.what());
  }
}

void record_rank_exits(const std::string& run_dir, std::vector<distributed::RankExit> failures) {
  std::erase_if(failures, [](const distributed::RankExit& exit) { return !exit.signalled; });
  if (failures.empty() || !std::filesystem::is_directory(run_dir)) return;
  JsonlWriter events(run_dir + "/events.jsonl");
  for (const distributed::RankExit& exit : failures)
    events.write({{"kind", "rank_exit"}, {"rank", exit.rank}, {"exit_code", exit.exit_code}, {"how", exit.how}});
  // Rank 0 may have written its own summary: "failed" when a collective broke, or "interrupted" when the launcher's
  // SIGTERM (sent to the survivors after the first failure) stopped it first. Either way the run failed here.
  const std::string path = run_dir + "/summary.json";
  nlohmann::json summary = std::filesystem::exists(path) ? parse_json(read_file(path)) : nlohmann::json::object();
  if (!summary.is_object()) summary = nlohmann::json::object();
  const distributed::RankExit& first = failures.front();
  const std::string how = fmt::format("rank {} {}", first.rank, first.how);
  const nlohmann::json earlier = summary.value("diagnosis", nlohmann::json());
  summary["status"] = "failed";
  summary["diagnosis"] = earlier.is_string() ? how + "; then " + earlier.get<std::string>() : how;
  summary["failed_rank"] = first.rank;
  write_file_atomically(path, summary.dump(2) + "\n");
}

}  // namespace mpt::run
