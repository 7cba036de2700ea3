// MLflow as a tracker (tools/tracking/tracker.h): the tracking.mlflow.* keys, completed from MLflow's own
// environment variables (MLFLOW_TRACKING_URI, MLFLOW_EXPERIMENT_NAME) as MLflow's clients read them.
#pragma once

#include <optional>

#include "tools/mlflow/spool.h"
#include "tools/tracking/tracker.h"

namespace mpt::mlflow {

tracking::TrackerKind mlflow_tracker();

// The target the values name, or nothing when tracking is off. Throws UsageError naming the key for a URI mpt
// cannot log to, a tag that is not KEY=VALUE, or a key that says how to track with nowhere to track to.
std::optional<Target> read_target(const keys::Options& values, const tracking::OpenContext& context);

}  // namespace mpt::mlflow
