#include "run/tracking.h"

#include <cstdlib>

#include "common/echo.h"
#include "common/error.h"
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

}  // namespace

std::optional<mlflow::Target> mlflow_target(const MlflowSection& section, const std::string& source,
                                            const std::string& keys) {
  const bool from_spec = !section.uri.empty();
  const std::string uri = from_spec ? section.uri : environment("MLFLOW_TRACKING_URI");
  if (uri.empty() || uri == "off") return std::nullopt;
  const std::string where = from_spec ? keys + ".uri" : "MLFLOW_TRACKING_URI";
  if (uri.rfind("http://", 0) != 0 && uri.rfind("https://", 0) != 0)
    throw UsageError(where + " '" + echo(uri) +
                     "': mpt logs to an MLflow tracking server, so an http:// or https:// address (start one with "
                     "`mlflow server --backend-store-uri sqlite:///mlflow.db`), or off");
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
  for (const auto& tag : section.tags) {
    const size_t equals = tag.find('=');
    if (equals == std::string::npos || equals == 0)
      throw UsageError(keys + ".tags: '" + echo(tag) + "' is not KEY=VALUE");
    target.tags.emplace_back(tag.substr(0, equals), tag.substr(equals + 1));
  }
  target.spool = section.spool.empty() ? default_spool() : section.spool;
  target.source = source;
  return target;
}

}  // namespace mpt::run
