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
// verdict_fail. A train job that finished is then timed in `speed_rounds` short runs of `mpt bench` (one training
// run's mean swings from process to process; docs/nightly.md): metrics.bench_rounds, and their median
// metrics.bench_samples_per_sec. `stop_requested` is
// forwarded to the child as SIGTERM.
nlohmann::json run_job(const Job& job, const std::string& job_dir, int speed_rounds,
                       const volatile int* stop_requested);

// Times a train job's record again in `rounds` more bench runs: the median is then over all its rounds. For a
// night that looks slower than usual, since the machine alone can run 10-14% slower for tens of seconds (all three
// rounds of a clean night at once, measured beside a busy neighbour). False when the record had no bench rounds
// or a run failed.
bool retime_train_job(const Job& job, nlohmann::json& record, int rounds, const volatile int* stop_requested);

}  // namespace mpt::nightly
