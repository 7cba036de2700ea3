#include "tools/mlflow/client.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <thread>

#include "common/echo.h"
#include "common/files.h"
#include "common/uri.h"
#include "tools/mlflow/http.h"

namespace mpt::mlflow {
namespace {

namespace fs = std::filesystem;

// log-batch's limits (MLflow's REST API reference): per request, and the longest values the server keeps.
constexpr size_t kMaxMetricsPerBatch = 1000, kMaxParamsPerBatch = 100, kMaxTagsPerBatch = 100;
constexpr size_t kMaxParamValue = 6000, kMaxTagValue = 8000, kMaxKey = 250;
constexpr uintmax_t kMaxArtifactBytes = uintmax_t{1} << 30;

// Params and tags as sent: every value with its credentials masked (a URI in the spec, the command line, a tag).
nlohmann::json key_values(const KeyValues& pairs, size_t begin, size_t end, size_t max_value) {
  nlohmann::json out = nlohmann::json::array();
  for (size_t i = begin; i < end; ++i)
    out.push_back({{"key", pairs[i].first.substr(0, kMaxKey)},
                   {"value", redact_credentials(pairs[i].second).substr(0, max_value)}});
  return out;
}

// Protobuf's JSON spells the non-finite doubles as strings; MLflow stores them as such.
nlohmann::json metric_value(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "Infinity" : "-Infinity";
  return value;
}

// "mlflow-artifacts:/1/abc/artifacts" or "mlflow-artifacts://host:port/1/abc/artifacts" -> "1/abc/artifacts".
std::string proxied_path(const std::string& artifact_uri) {
  std::string rest = artifact_uri.substr(std::string("mlflow-artifacts:").size());
  if (rest.rfind("//", 0) == 0) rest = rest.find('/', 2) == std::string::npos ? "" : rest.substr(rest.find('/', 2));
  while (!rest.empty() && rest.front() == '/') rest.erase(0, 1);
  return rest;
}

std::string escape_path(const std::string& path) {
  std::string out;
  size_t start = 0;
  while (start <= path.size()) {
    const size_t slash = std::min(path.find('/', start), path.size());
    if (!out.empty()) out += '/';
    out += url_escape(path.substr(start, slash - start));
    start = slash + 1;
  }
  return out;
}

}  // namespace

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

Client::Client(std::string uri, Retries retries, const std::atomic<bool>* cancel)
    : uri_(std::move(uri)), retries_(retries), cancel_(cancel) {
  while (!uri_.empty() && uri_.back() == '/') uri_.pop_back();
}

std::string Client::shown_uri() const { return echo(uri_, 200); }

nlohmann::json Client::exchange(const std::string& method, const std::string& url, const std::string& body,
                                const std::string& content_type, const std::string& what) {
  HttpRequest request{method, url, body, content_type, {}, retries_.connect_timeout_ms, retries_.timeout_ms, cancel_};
  HttpResponse response;
  long pause = retries_.pause_ms;
  int attempt = 1;
  for (;; ++attempt) {
    response = send(request);
    const bool cancelled = cancel_ && cancel_->load();
    if (response.timed_out || !worth_retrying(response.status) || cancelled || attempt == retries_.attempts) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(pause));
    pause *= 2;
  }
  return read_answer(response, fmt::format("{} {} at {}", method, echo(what, 120), shown_uri()), attempt);
}

nlohmann::json Client::call(const std::string& method, const std::string& endpoint, const nlohmann::json& body) {
  const std::string url = uri_ + "/api/2.0/mlflow/" + endpoint;
  return exchange(method, url, method == "GET" ? "" : body.dump(), "application/json", endpoint);
}

std::string Client::experiment_id(const std::string& name) {
  const std::string by_name = "experiments/get-by-name?experiment_name=" + url_escape(name);
  try {
    return text_at(call("GET", by_name, {}), {"experiment", "experiment_id"}, "GET experiments/get-by-name");
  } catch (const Refused&) {  // RESOURCE_DOES_NOT_EXIST
  }
  try {
    return text_at(call("POST", "experiments/create", {{"name", name}}), {"experiment_id"}, "POST experiments/create");
  } catch (const Refused&) {  // another process created it in between
    return text_at(call("GET", by_name, {}), {"experiment", "experiment_id"}, "GET experiments/get-by-name");
  }
}

RunInfo Client::create_run(const std::string& experiment_id, const std::string& run_name, int64_t start_ms,
                           const KeyValues& tags) {
  const nlohmann::json body = {{"experiment_id", experiment_id},
                               {"run_name", run_name},
                               {"start_time", start_ms},
                               {"tags", key_values(tags, 0, tags.size(), kMaxTagValue)}};
  const nlohmann::json answer = call("POST", "runs/create", body);
  const std::string run_id = text_at(answer, {"run", "info", "run_id"}, "POST runs/create");
  const nlohmann::json& info = answer["run"]["info"];
  const nlohmann::json artifacts = info.value("artifact_uri", nlohmann::json());
  return RunInfo{run_id, experiment_id, artifacts.is_string() ? artifacts.get<std::string>() : ""};
}

bool Client::run_exists(const std::string& run_id) {
  try {
    const nlohmann::json run = call("GET", "runs/get?run_id=" + url_escape(run_id), {});
    text_at(run, {"run", "info", "run_id"}, "GET runs/get");
    const nlohmann::json stage = run["run"]["info"].value("lifecycle_stage", nlohmann::json("active"));
    return stage == "active";
  } catch (const Refused&) {
    return false;
  }
}

void Client::log_batch(const std::string& run_id, const std::vector<Metric>& metrics, const KeyValues& params,
                       const KeyValues& tags) {
  size_t m = 0, p = 0, t = 0;
  while (m < metrics.size() || p < params.size() || t < tags.size()) {
    const size_t p_end = std::min(params.size(), p + kMaxParamsPerBatch);
    const size_t t_end = std::min(tags.size(), t + kMaxTagsPerBatch);
    const size_t room = kMaxMetricsPerBatch - (p_end - p) - (t_end - t);  // 1000 entities in all
    const size_t m_end = std::min(metrics.size(), m + room);
    nlohmann::json batch_metrics = nlohmann::json::array();
    for (size_t i = m; i < m_end; ++i)
      batch_metrics.push_back({{"key", metrics[i].key.substr(0, kMaxKey)},
                               {"value", metric_value(metrics[i].value)},
                               {"timestamp", metrics[i].timestamp_ms},
                               {"step", metrics[i].step}});
    call("POST", "runs/log-batch",
         {{"run_id", run_id},
          {"metrics", batch_metrics},
          {"params", key_values(params, p, p_end, kMaxParamValue)},
          {"tags", key_values(tags, t, t_end, kMaxTagValue)}});
    m = m_end, p = p_end, t = t_end;
  }
}

void Client::set_terminated(const std::string& run_id, const std::string& status, int64_t end_ms) {
  call("POST", "runs/update", {{"run_id", run_id}, {"status", status}, {"end_time", end_ms}});
}

bool Client::upload_artifact(const RunInfo& run, const std::string& local_path, const std::string& artifact_path) {
  const std::string& root = run.artifact_uri;
  if (root.rfind("mlflow-artifacts:", 0) == 0) {
    const std::string url =
        uri_ + "/api/2.0/mlflow-artifacts/artifacts/" + escape_path(proxied_path(root) + "/" + artifact_path);
    exchange("PUT", url, read_file(local_path, kMaxArtifactBytes), "application/octet-stream", artifact_path);
    return true;
  }
  // A server started with a local --default-artifact-root and no proxy: the store is a folder on this machine.
  std::string folder = root.rfind("file://", 0) == 0 ? root.substr(7) : root;
  if (folder.empty() || folder.front() != '/') return false;
  const fs::path target = fs::path(folder) / artifact_path;
  std::error_code error;
  fs::create_directories(target.parent_path(), error);
  if (!error) fs::copy_file(local_path, target, fs::copy_options::overwrite_existing, error);
  if (error) throw Refused(fmt::format("copying {} to {}: {}", local_path, target.string(), error.message()));
  return true;
}

}  // namespace mpt::mlflow
