// A nightly suite: the jobs a team runs every night (train specs and A/B pairs), their budgets, and the
// regression and retention rules. Paths in a suite are relative to the suite file.
#pragma once

#include <string>
#include <vector>

#include "common/keys.h"

namespace mpt::nightly {

struct Job {
  std::string name;                     // unique in the suite; the job's folder in each night
  std::string kind;                     // "train" or "ab_compare"
  std::vector<std::string> specs;       // one for train, two (A, B) for ab_compare; absolute paths
  std::vector<std::string> overrides;   // key=value, as on the command line
  std::vector<std::string> allow_diff;  // ab_compare only
  double time_budget_sec = 0.0;         // 0: none
  std::vector<std::string> tags;
};

struct RegressionRules {
  int window = 5;                 // compare with the median of the last N successful nights
  double throughput_drop = 0.07;  // relative drop in samples/s (train) or speed-up (ab_compare)
  double accuracy_drop = 0.005;   // absolute drop in test accuracy
  // A job whose own cores other work took more than this share of (beyond the cores the job left idle: a train
  // job on fewer threads than cores) has its throughput neither judged nor used as a baseline: that work, not
  // mpt, set its speed.
  double max_other_cpu = 0.25;
  // Runs of `mpt bench` after a train job whose median samples/s is judged instead of the training run's mean.
  int speed_rounds = 3;
};

struct Suite {
  std::string path;
  std::string name;
  std::vector<Job> jobs;
  RegressionRules regression;
  int keep_nights = 14;         // retention: the newest good night is kept beyond this
  double disk_budget_gb = 0.0;  // 0: none; oldest nights go first (never the newest good one)
  // Each tracker's section (mlflow: uri, experiment, tags, spool, run_name), keyed as in a spec
  // (tracking.mlflow.uri); MLflow tracks each night as a parent run with its jobs as child runs.
  keys::Options tracking;
};

// Reads and validates SUITE.yaml; every problem is reported at once as a UsageError (exit 2) naming file:line.
Suite load_suite(const std::string& path);

}  // namespace mpt::nightly
