// MLflow's tracking REST API (2.0 paths, served by MLflow 2 and 3): experiments, runs, batched logging and
// artifact upload through the server's artifact proxy. Each call retries what may pass (no answer, 5xx, 429)
// a bounded number of times, then throws.
#pragma once

#include <nlohmann/json.hpp>

#include <atomic>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tools/mlflow/answer.h"

namespace mpt::mlflow {

struct Metric {
  std::string key;
  double value;
  int64_t timestamp_ms;
  int64_t step;
};
using KeyValues = std::vector<std::pair<std::string, std::string>>;

struct RunInfo {
  std::string run_id, experiment_id, artifact_uri;
};

// Attempts for a request that found no server, or a 5xx or 429; one that timed out (the server took the
// connection and did not answer) is not tried again, so a hung server costs one timeout per request.
struct Retries {
  int attempts = 3;
  long pause_ms = 500;  // doubled after each failed attempt
  long connect_timeout_ms = 3000, timeout_ms = 15000;
};

class Client {
 public:
  explicit Client(std::string uri, Retries retries = {}, const std::atomic<bool>* cancel = nullptr);

  const std::string& uri() const { return uri_; }
  // The URI as it may be shown or stored: credentials masked, control bytes escaped.
  std::string shown_uri() const;
  // The experiment's id, creating it when no experiment has that name.
  std::string experiment_id(const std::string& name);
  RunInfo create_run(const std::string& experiment_id, const std::string& run_name, int64_t start_ms,
                     const KeyValues& tags);
  // Whether the run exists and is not deleted.
  bool run_exists(const std::string& run_id);
  // Any number of metrics, params and tags, split into requests within the API's limits.
  void log_batch(const std::string& run_id, const std::vector<Metric>& metrics, const KeyValues& params,
                 const KeyValues& tags);
  void set_terminated(const std::string& run_id, const std::string& status, int64_t end_ms);
  // Uploads a local file to the run's artifacts at `artifact_path` (a relative path, '/'-separated). Returns false
  // when the run's artifact store is one mpt cannot write (an object store behind a server that does not proxy).
  bool upload_artifact(const RunInfo& run, const std::string& local_path, const std::string& artifact_path);

 private:
  nlohmann::json call(const std::string& method, const std::string& endpoint, const nlohmann::json& body);
  nlohmann::json exchange(const std::string& method, const std::string& url, const std::string& body,
                          const std::string& content_type, const std::string& what);

  std::string uri_;
  Retries retries_;
  const std::atomic<bool>* cancel_;  // set: every request stops, as unreachable
};

// The time now, in milliseconds since the epoch (MLflow's timestamps).
int64_t now_ms();

}  // namespace mpt::mlflow
