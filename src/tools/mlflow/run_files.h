// What a run directory's files become in MLflow: config.yaml's keys as params, metrics.jsonl's lines and
// events.jsonl's loss-scale and FP8 events as metrics, summary.json's answers as metrics and tags. Pure
// translations, no server.
#pragma once

#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <vector>

#include "tools/mlflow/client.h"

namespace mpt::mlflow {

// Every leaf of the resolved spec as a dotted key; lists in YAML's flow style ("[64, 32]").
KeyValues params_from_config(const std::string& yaml_text);

// Numbers of a JSON value, flattened under `prefix` with '/' (objects by key, arrays by index), skipping
// step, kind and time; booleans as 0/1.
void add_numbers(const std::string& prefix, const nlohmann::json& value, int64_t step, int64_t timestamp_ms,
                 std::vector<Metric>& out);

// A metrics.jsonl line: train/<name> or eval/<name> at its step.
std::vector<Metric> metrics_from_record(const nlohmann::json& line, int64_t timestamp_ms);

// An events.jsonl line: loss_scale/backoff and loss_scale/growth (the new scale), fp8/<tensor>/{scale,amax,
// saturated}, and events/<kind>, the running count of each kind (kept in `counts` across calls).
std::vector<Metric> metrics_from_event(const nlohmann::json& event, std::map<std::string, int64_t>& counts);

struct SummaryEntities {
  std::vector<Metric> metrics;  // summary/<name> at the run's last step
  KeyValues tags;               // mpt.<name> for the text answers (status, precision, device, versions)
  std::string status;           // MLflow's: FINISHED, KILLED (interrupted) or FAILED
};
SummaryEntities from_summary(const nlohmann::json& summary, int64_t timestamp_ms);

// The complete lines of a JSONL file from byte `offset` on, as JSON (an unreadable line is skipped); advances
// `offset` past them and leaves a final partial line for later.
std::vector<nlohmann::json> read_new_lines(const std::string& path, uint64_t& offset);

}  // namespace mpt::mlflow
