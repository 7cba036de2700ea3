// Running one nightly job as a child mpt process and turning its outputs into a history record.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "tools/nightly/suite.h"

namespace mpt::nightly {

nlohmann::json job_to_json(const Job& job);
Job job_from_json(const nlohmann::json& json);

// Runs `job` into `job_dir` (train: the run directory, resumed when it holds checkpoints; ab_compare: the
// --out folder, finished runs reused), output to job_dir/job.log, within the job's time budget. Returns the
// record for history.jsonl without its night-level fields; status is ok, failed, timeout, diverged or
// verdict_fail. `stop_requested` is forwarded to the child as SIGTERM.
nlohmann::json run_job(const Job& job, const std::string& job_dir, const volatile int* stop_requested);

}  // namespace mpt::nightly
