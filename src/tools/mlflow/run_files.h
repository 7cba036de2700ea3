// What a run directory's files become in MLflow: config.yaml's keys as params, metrics.jsonl's lines and
// events.jsonl's loss-scale and FP8 events as metrics, summary.json's answers as metrics and tags. Pure
// translations, no server.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
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

// The number at `key` of a JSON object (seconds since the epoch, as metrics and events record "time") in MLflow's
// milliseconds, or `fallback` when it has none.
int64_t time_ms(const nlohmann::json& record, int64_t fallback, const char* key = "time");

// A metrics.jsonl line: train/<name> or eval/<name> at its step and time (`timestamp_ms` when it has none).
std::vector<Metric> metrics_from_record(const nlohmann::json& line, int64_t timestamp_ms);

// An events.jsonl line: loss_scale/backoff and loss_scale/growth (the new scale), fp8/<tensor>/{scale,amax,
// saturated}, and events/<kind>, the running count of each kind (kept in `counts` across calls).
std::vector<Metric> metrics_from_event(const nlohmann::json& event, std::map<std::string, int64_t>& counts);

// What names a metrics or events line across a resume that writes it again: [kind, step, tensor].
nlohmann::json line_identity(const nlohmann::json& line);

struct SummaryEntities {
  std::vector<Metric> metrics;  // summary/<name> at the run's last step
  KeyValues tags;               // mpt.<name> for the text answers (status, precision, device, versions)
  std::string status;           // MLflow's: FINISHED, KILLED (interrupted) or FAILED
};
SummaryEntities from_summary(const nlohmann::json& summary, int64_t timestamp_ms);

// The complete lines of a JSONL file from byte `offset` up to byte `end`, as JSON (an unreadable line is skipped);
// advances `offset` past them and leaves a final partial line for later.
std::vector<nlohmann::json> read_new_lines(const std::string& path, uint64_t& offset, uint64_t end = UINT64_MAX);

}  // namespace mpt::mlflow
