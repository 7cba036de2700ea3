// The tracker kinds (see tracker.h): one line each.
#include "tools/mlflow/tracker.h"
#include "tools/tracking/tracker.h"

namespace mpt::tracking {

const std::vector<TrackerKind>& tracker_kinds() {
  static const std::vector<TrackerKind> kinds = {mlflow::mlflow_tracker()};
  return kinds;
}

std::vector<std::unique_ptr<Tracker>> open_trackers(const keys::Options& values, const OpenContext& context) {
  std::vector<std::unique_ptr<Tracker>> open;
  for (const TrackerKind& kind : tracker_kinds())
    if (std::unique_ptr<Tracker> tracker = kind.open(values, context)) open.push_back(std::move(tracker));
  return open;
}

}  // namespace mpt::tracking
