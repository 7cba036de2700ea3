#include "tools/mlflow/tracker.h"

#include <fmt/format.h>

#include <cstdlib>

#include "common/echo.h"
#include "common/error.h"
#include "common/uri.h"
#include "tools/mlflow/http.h"
#include "tools/mlflow/live_tracker.h"

namespace mpt::mlflow {
namespace {

struct MlflowOptions {
  std::string uri, experiment, run_name;
  std::vector<std::string> tags;  // KEY=VALUE
  std::string spool;
};

const keys::OptionTable<MlflowOptions>& option_table() {
  static const keys::OptionTable<MlflowOptions> table = [] {
    keys::OptionTable<MlflowOptions> t;
    t.add("tracking.mlflow.uri", &MlflowOptions::uri,
          "MLflow tracking server (http:// or https://) that receives the run: params, metrics, events, summary and "
          "key files. Empty: MLFLOW_TRACKING_URI, and no tracking when that is unset too; off: no tracking.")
        .may_differ_on_resume();
    t.add("tracking.mlflow.experiment", &MlflowOptions::experiment,
          "MLflow experiment (created when missing). Empty: MLFLOW_EXPERIMENT_NAME, else Default.")
        .may_differ_on_resume();
    t.add("tracking.mlflow.run_name", &MlflowOptions::run_name, "MLflow run name. Empty: the run directory's name.")
        .may_differ_on_resume();
    t.add("tracking.mlflow.tags", &MlflowOptions::tags,
          "Tags set on the MLflow run, each KEY=VALUE (e.g. [team=vision, ticket=ML-42]).")
        .may_differ_on_resume();
    t.add("tracking.mlflow.spool", &MlflowOptions::spool,
          "Folder where runs wait when the server does not answer; the next tracked mpt command delivers them. "
          "Empty: $XDG_CACHE_HOME/mpt/mlflow-spool (else ~/.cache/mpt/mlflow-spool).")
        .may_differ_on_resume();
    return t;
  }();
  return table;
}

std::string environment(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

std::string default_spool() {
  const std::string cache = environment("XDG_CACHE_HOME");
  if (!cache.empty()) return cache + "/mpt/mlflow-spool";
  const std::string home = environment("HOME");
  return (home.empty() ? std::string("/tmp") : home + "/.cache") + "/mpt/mlflow-spool";
}

// KEY=VALUE tags, checked whether or not tracking is on, within MLflow's limits (a longer key or value would be cut).
KeyValues tracking_tags(const std::vector<std::string>& given, const std::string& keys) {
  constexpr size_t kMaxTagKey = 250, kMaxTagValue = 8000;
  KeyValues tags;
  for (const auto& tag : given) {
    const size_t equals = tag.find('=');
    if (equals == std::string::npos || equals == 0)
      throw UsageError(keys + ".tags: '" + echo(tag) + "' is not KEY=VALUE");
    if (equals > kMaxTagKey || tag.size() - equals - 1 > kMaxTagValue)
      throw UsageError(fmt::format("{}.tags: '{}': MLflow keeps tag keys of at most {} bytes and values of at most {}",
                                   keys, echo(tag), kMaxTagKey, kMaxTagValue));
    tags.emplace_back(tag.substr(0, equals), tag.substr(equals + 1));
  }
  return tags;
}

// A key that would say where or how to track, with nowhere to track to.
void check_nothing_dangles(const MlflowOptions& options, const KeyValues& tags, const std::string& keys) {
  for (const auto& [key, set] :
       {std::pair{".tags", !tags.empty()}, std::pair{".experiment", !options.experiment.empty()},
        std::pair{".run_name", !options.run_name.empty()}})
    if (set)
      throw UsageError(keys + key + " is set, but no tracking server is: set " + keys +
                       ".uri (or MLFLOW_TRACKING_URI), or leave " + keys + key + " out");
}

class MlflowTracker : public tracking::Tracker {
 public:
  explicit MlflowTracker(Target target) : target_(std::move(target)) {}

  std::unique_ptr<tracking::RunFollower> follow_run(const std::string& run_dir, tracking::Say info,
                                                    tracking::Say warn) override {
    return std::make_unique<LiveTracker>(target_, run_dir, std::move(info), std::move(warn));
  }
  void deliver(const std::string& dir, const std::string& kind, const tracking::Say& say) override {
    deliver_or_spool(target_, dir, kind, say);
  }

 private:
  Target target_;
};

}  // namespace

std::optional<Target> read_target(const keys::Options& values, const tracking::OpenContext& context) {
  const MlflowOptions options = option_table().read(values);
  const std::string keys = context.where + "mlflow";
  const bool from_spec = !options.uri.empty();
  const std::string uri = from_spec ? options.uri : environment("MLFLOW_TRACKING_URI");
  const KeyValues tags = tracking_tags(options.tags, keys);
  if (uri.empty()) check_nothing_dangles(options, tags, keys);
  if (uri.empty() || uri == "off") return std::nullopt;
  const std::string where = from_spec ? keys + ".uri" : "MLFLOW_TRACKING_URI";
  if (const std::string problem = http_uri_problem(uri); !problem.empty())
    throw UsageError(
        where + " '" + echo(uri) + "': " + problem +
        "; mpt logs to an MLflow tracking server, so an http:// or https:// address with a host (start one "
        "with `mlflow server --backend-store-uri sqlite:///mlflow.db`), or off");
  if (!http_available())
    throw UsageError(where +
                     " asks for MLflow tracking, but this mpt was built without libcurl (apt install "
                     "libcurl4-openssl-dev and rebuild, or set " +
                     where + " to off)");
  Target target;
  target.uri = uri;
  target.experiment = !options.experiment.empty() ? options.experiment : environment("MLFLOW_EXPERIMENT_NAME");
  if (target.experiment.empty()) target.experiment = "Default";
  target.run_name = options.run_name;
  target.tags = tags;
  target.spool = options.spool.empty() ? default_spool() : options.spool;
  target.source = context.source;
  return target;
}

tracking::TrackerKind mlflow_tracker() {
  tracking::TrackerKind kind;
  kind.name = "mlflow";
  kind.keys = option_table().keys();
  kind.open = [](const keys::Options& values, const tracking::OpenContext& context) {
    std::optional<Target> target = read_target(values, context);
    return target ? std::make_unique<MlflowTracker>(std::move(*target)) : std::unique_ptr<tracking::Tracker>();
  };
  return kind;
}

}  // namespace mpt::mlflow
