#include "tools/mlflow/run_files.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <fstream>
#include <functional>

#include "common/json.h"
#include "config/yaml_text.h"

namespace mpt::mlflow {
namespace {

void add_params(const std::string& prefix, const YAML::Node& node, KeyValues& out) {
  if (node.IsMap()) {
    for (const auto& item : node)
      add_params(prefix.empty() ? item.first.as<std::string>() : prefix + "." + item.first.as<std::string>(),
                 item.second, out);
    return;
  }
  if (node.IsSequence()) {
    YAML::Emitter flow;
    flow << YAML::Flow << node;
    out.emplace_back(prefix, flow.c_str());
  } else if (node.IsScalar()) {
    out.emplace_back(prefix, node.Scalar());
  } else {
    out.emplace_back(prefix, "null");
  }
}

bool skipped_key(const std::string& key) { return key == "step" || key == "kind" || key == "time"; }

}  // namespace

KeyValues params_from_config(const std::string& yaml_text) {
  KeyValues params;
  add_params("", config::parse_yaml(yaml_text, "config.yaml"), params);
  return params;
}

void add_numbers(const std::string& prefix, const nlohmann::json& value, int64_t step, int64_t timestamp_ms,
                 std::vector<Metric>& out) {
  auto join = [&](const std::string& name) { return prefix.empty() ? name : prefix + "/" + name; };
  if (value.is_object()) {
    for (const auto& [key, item] : value.items())
      if (!skipped_key(key)) add_numbers(join(key), item, step, timestamp_ms, out);
  } else if (value.is_array()) {
    for (size_t i = 0; i < value.size(); ++i) add_numbers(join(std::to_string(i)), value[i], step, timestamp_ms, out);
  } else if (value.is_number()) {
    out.push_back({prefix, value.get<double>(), timestamp_ms, step});
  } else if (value.is_boolean()) {
    out.push_back({prefix, value.get<bool>() ? 1.0 : 0.0, timestamp_ms, step});
  }
}

int64_t time_ms(const nlohmann::json& record, int64_t fallback, const char* key) {
  if (!record.is_object() || !record.contains(key) || !record[key].is_number()) return fallback;
  const double seconds = record[key].get<double>();
  return seconds > 0 && seconds < 1e11 ? static_cast<int64_t>(seconds * 1000.0) : fallback;
}

std::vector<Metric> metrics_from_record(const nlohmann::json& line, int64_t timestamp_ms) {
  std::vector<Metric> out;
  if (!line.is_object() || !line.contains("step") || !line["step"].is_number_integer()) return out;
  const std::string kind = line.value("kind", std::string("train"));
  const nlohmann::json& values = kind == "eval" && line.contains("eval") ? line["eval"] : line;
  add_numbers(kind, values, line["step"].get<int64_t>(), time_ms(line, timestamp_ms), out);
  return out;
}

std::vector<Metric> metrics_from_event(const nlohmann::json& event, std::map<std::string, int64_t>& counts) {
  std::vector<Metric> out;
  if (!event.is_object() || !event.contains("kind") || !event["kind"].is_string()) return out;
  const std::string kind = event["kind"];
  const int64_t step = event.contains("step") && event["step"].is_number_integer() ? event["step"].get<int64_t>() : 0;
  const int64_t time = time_ms(event, now_ms());
  auto number = [&](const char* key) { return event.contains(key) && event[key].is_number(); };
  if ((kind == "backoff" || kind == "growth") && number("new_scale"))
    out.push_back({"loss_scale/" + kind, event["new_scale"].get<double>(), time, step});
  if (kind == "fp8_scale" && event.contains("tensor") && event["tensor"].is_string()) {
    const std::string prefix = "fp8/" + event["tensor"].get<std::string>() + "/";
    for (const char* key : {"scale", "amax", "saturated"})
      if (number(key)) out.push_back({prefix + key, event[key].get<double>(), time, step});
    return out;  // one per tensor and step: their count says nothing
  }
  out.push_back({"events/" + kind, static_cast<double>(++counts[kind]), time, step});
  return out;
}

nlohmann::json line_identity(const nlohmann::json& line) {
  if (!line.is_object()) return nlohmann::json::array();
  return {line.value("kind", nlohmann::json("train")), line.value("step", nlohmann::json(-1)),
          line.value("tensor", nlohmann::json(""))};
}

SummaryEntities from_summary(const nlohmann::json& summary, int64_t timestamp_ms) {
  SummaryEntities out;
  const int64_t step =
      summary.contains("steps") && summary["steps"].is_number_integer() ? summary["steps"].get<int64_t>() : 0;
  add_numbers("summary", summary, step, timestamp_ms, out.metrics);
  std::function<void(const std::string&, const nlohmann::json&)> texts = [&](const std::string& prefix,
                                                                             const nlohmann::json& value) {
    if (value.is_object())
      for (const auto& [key, item] : value.items()) texts(prefix + "." + key, item);
    else if (value.is_string())
      out.tags.emplace_back(prefix, value.get<std::string>());
  };
  texts("mpt", summary);
  const std::string status = summary.value("status", std::string());
  out.status = status == "completed" ? "FINISHED" : status == "interrupted" ? "KILLED" : "FAILED";
  return out;
}

std::vector<nlohmann::json> read_new_lines(const std::string& path, uint64_t& offset, uint64_t end) {
  std::vector<nlohmann::json> lines;
  std::ifstream in(path, std::ios::binary);
  if (!in) return lines;
  in.seekg(0, std::ios::end);
  const uint64_t size = std::min(static_cast<uint64_t>(in.tellg()), end);
  if (size < offset) offset = size;  // the file was cut back (a torn line removed): what was sent stands
  in.seekg(static_cast<std::streamoff>(offset));
  std::string text(size - offset, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  size_t start = 0;
  for (size_t end = text.find('\n'); end != std::string::npos; end = text.find('\n', start)) {
    const nlohmann::json line =
        parse_json(text.begin() + static_cast<std::ptrdiff_t>(start), text.begin() + static_cast<std::ptrdiff_t>(end));
    if (!line.is_discarded()) lines.push_back(line);
    start = end + 1;
  }
  offset += start;
  return lines;
}

}  // namespace mpt::mlflow
