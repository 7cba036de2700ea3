// Where a command's results are tracked: the spec's tracking.mlflow section completed from MLflow's own
// environment variables (MLFLOW_TRACKING_URI, MLFLOW_EXPERIMENT_NAME), as MLflow's clients read them.
#pragma once

#include <optional>
#include <string>

#include "run/sections.h"
#include "tools/mlflow/spool.h"

namespace mpt::run {

// The target, or nothing when tracking is off. Throws UsageError naming the key for a URI mpt cannot log to or
// a tag that is not KEY=VALUE. `source` is the command line, shown as the run's source in MLflow; `keys` is
// where the section sits, for messages (a nightly suite's is `mlflow`).
std::optional<mlflow::Target> mlflow_target(const MlflowSection& section, const std::string& source,
                                            const std::string& keys = "tracking.mlflow");

}  // namespace mpt::run
