// Experiment trackers (MLflow today, W&B or others next) behind one interface: train, ab-compare and nightly hand
// their output directories to whatever trackers the spec turns on and never name one. Each kind of tracker is a
// descriptor: its spec keys (tracking.<name>.*), and how it opens from their values. A tracker never stalls or
// fails the command it follows: a server that does not answer costs a warning, and what it missed waits for later.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/keys.h"

namespace mpt::tracking {

using Say = std::function<void(const std::string&)>;

// Follows one training run's directory while it trains.
class RunFollower {
 public:
  virtual ~RunFollower() = default;  // without finish(): stops at once (the run failed before its summary)
  // Delivers the final state; called once summary.json is written, and bounded in time.
  virtual void finish() = 0;
};

class Tracker {
 public:
  virtual ~Tracker() = default;
  // A training run directory, followed as it grows (`info` and `warn` go to the run's log).
  virtual std::unique_ptr<RunFollower> follow_run(const std::string& run_dir, Say info, Say warn) = 0;
  // A finished directory of another kind ("comparison": an ab-compare folder, "night": a nightly's night folder),
  // delivered now or kept for later; `say` hears one line of what happened. Never throws.
  virtual void deliver(const std::string& dir, const std::string& kind, const Say& say) = 0;
};

// What a tracker opens for: `source` is the command line, shown as the origin of what is tracked; `where` names
// the place its keys were read from in messages, before the tracker's name: "tracking." in a spec (messages say
// tracking.mlflow.uri), "suite.yaml: " in a nightly suite (suite.yaml: mlflow.uri).
struct OpenContext {
  std::string source;
  std::string where = "tracking.";
};

struct TrackerKind {
  std::string name;                 // its keys are tracking.<name>.*
  std::vector<keys::KeySpec> keys;  // every one of them, each declared here only
  // The tracker these values configure, or null when they leave it off; throws UsageError naming the key.
  std::function<std::unique_ptr<Tracker>(const keys::Options&, const OpenContext&)> open;
};

const std::vector<TrackerKind>& tracker_kinds();

// Every tracker the values turn on, in tracker_kinds()'s order. The values are keyed tracking.<name>.<leaf>.
std::vector<std::unique_ptr<Tracker>> open_trackers(const keys::Options& values, const OpenContext& context);

}  // namespace mpt::tracking
