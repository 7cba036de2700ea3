// What a run leaves in its directory when it does not end by itself, so that the directory - which outlives the
// terminal, nohup.out and a Slurm job's stderr - says what happened: an error that stops training, or a rank of
// --nproc killed outright.
#pragma once

#include <spdlog/spdlog.h>

#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "distributed/local_launcher.h"
#include "train/events.h"
#include "train/summary.h"

namespace mpt::run {

// A "failed" event from this rank (every rank that gets here appends its own) and, on rank 0, summary.json with
// status "failed", the step and the reason. Never throws: the original error matters more.
void record_failure(const std::string& run_dir, int rank, int64_t step, const std::exception& error,
                    const train::RunContext& context, train::EventLog& events,
                    const std::shared_ptr<spdlog::logger>& logger);

// After --nproc's ranks ended: a rank killed by a signal could not leave its own trace (a rank that exited by itself
// did), so a "rank_exit" event for each, and summary.json marked "failed" with the first one's rank.
void record_rank_exits(const std::string& run_dir, std::vector<distributed::RankExit> failures);

}  // namespace mpt::run
