// One night of a suite under ROOT: recover what an earlier, killed night left unfinished, run tonight's jobs in
// order (a failing job does not stop the others), record every job in history.jsonl, detect regressions,
// write the night's summary and ROOT/trends.html, and prune old nights.
//
// ROOT/
//   .lock                 flock: one night at a time
//   history.jsonl         one record per job per night
//   latest -> 2026-12-02_020000
//   trends.html
//   2026-12-02_020000/    night.json (state), summary.json, summary.md, <job>/ (run dir or A/B folder, job.log)
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "tools/nightly/suite.h"

namespace mpt::nightly {

struct NightOutcome {
  std::string night_dir;
  nlohmann::json summary;           // also written to night_dir/summary.json
  std::vector<std::string> report;  // the concise lines for stdout (cron mails them)
  int exit_code = 0;                // 0 ok, 1 a job failed or the night was interrupted, 3 a regression
};

// `stop_requested` (set by SIGINT/SIGTERM) stops after the running job, which checkpoints; the remaining jobs
// stay pending and the next invocation resumes them.
NightOutcome run_night(const Suite& suite, const std::string& root, const volatile int* stop_requested);

// Deletes night folders beyond keep_nights and the disk budget, oldest first; never the newest good night
// (all jobs ok) nor `current`. Returns the folders deleted.
std::vector<std::string> prune_nights(const std::string& root, const std::string& current, int keep_nights,
                                      double disk_budget_gb);

}  // namespace mpt::nightly
