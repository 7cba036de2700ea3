#include "run/tracking.h"

#include <fmt/format.h>

#include <cstdlib>

#include "common/echo.h"
#include "common/error.h"
#include "common/uri.h"
#include "tools/mlflow/http.h"

namespace mpt::run {
namespace {

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
mlflow::KeyValues tracking_tags(const std::vector<std::string>& given, const std::string& keys) {
  constexpr size_t kMaxTagKey = 250, kMaxTagValue = 8000;
  mlflow::KeyValues tags;
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

}  // namespace

std::optional<mlflow::Target> mlflow_target(const MlflowSection& section, const std::string& source,
                                            const std::string& keys) {
  const bool from_spec = !section.uri.empty();
  const std::string uri = from_spec ? section.uri : environment("MLFLOW_TRACKING_URI");
  const mlflow::KeyValues tags = tracking_tags(section.tags, keys);
  if (uri.empty()) {  // a key that would say where or how to track, with nowhere to track to
    for (const auto& [key, set] :
         {std::pair{".tags", !tags.empty()}, std::pair{".experiment", !section.experiment.empty()},
          std::pair{".run_name", !section.run_name.empty()}})
      if (set)
        throw UsageError(keys + key + " is set, but no tracking server is: set " + keys +
                         ".uri (or MLFLOW_TRACKING_URI), or leave " + keys + key + " out");
  }
  if (uri.empty() || uri == "off") return std::nullopt;
  const std::string where = from_spec ? keys + ".uri" : "MLFLOW_TRACKING_URI";
  if (const std::string problem = http_uri_problem(uri); !problem.empty())
    throw UsageError(
        where + " '" + echo(uri) + "': " + problem +
        "; mpt logs to an MLflow tracking server, so an http:// or https:// address with a host (start one "
        "with `mlflow server --backend-store-uri sqlite:///mlflow.db`), or off");
  if (!mlflow::http_available())
    throw UsageError(where +
                     " asks for MLflow tracking, but this mpt was built without libcurl (apt install "
                     "libcurl4-openssl-dev and rebuild, or set " +
                     where + " to off)");
  mlflow::Target target;
  target.uri = uri;
  target.experiment = !section.experiment.empty() ? section.experiment : environment("MLFLOW_EXPERIMENT_NAME");
  if (target.experiment.empty()) target.experiment = "Default";
  target.run_name = section.run_name;
  target.tags = tags;
  target.spool = section.spool.empty() ? default_spool() : section.spool;
  target.source = source;
  return target;
}

}  // namespace mpt::run
