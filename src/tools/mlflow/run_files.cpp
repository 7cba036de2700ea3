#include "tools/mlflow/run_files.h"

#include <yaml-cpp/yaml.h>

#include <fstream>
#include <functional>

#include "common/json.h"

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
  add_params("", YAML::Load(yaml_text), params);
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

std::vector<Metric> metrics_from_record(const nlohmann::json& line, int64_t timestamp_ms) {
  std::vector<Metric> out;
  if (!line.is_object() || !line.contains("step") || !line["step"].is_number_integer()) return out;
  const std::string kind = line.value("kind", std::string("train"));
  const nlohmann::json& values = kind == "eval" && line.contains("eval") ? line["eval"] : line;
  add_numbers(kind, values, line["step"].get<int64_t>(), timestamp_ms, out);
  return out;
}

std::vector<Metric> metrics_from_event(const nlohmann::json& event, std::map<std::string, int64_t>& counts) {
  std::vector<Metric> out;
  if (!event.is_object() || !event.contains("kind") || !event["kind"].is_string()) return out;
  const std::string kind = event["kind"];
  const int64_t step = event.contains("step") && event["step"].is_number_integer() ? event["step"].get<int64_t>() : 0;
  const int64_t time = event.contains("time") && event["time"].is_number()
                           ? static_cast<int64_t>(event["time"].get<double>() * 1000.0)
                           : now_ms();
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

std::vector<nlohmann::json> read_new_lines(const std::string& path, uint64_t& offset) {
  std::vector<nlohmann::json> lines;
  std::ifstream in(path, std::ios::binary);
  if (!in) return lines;
  in.seekg(0, std::ios::end);
  const uint64_t size = static_cast<uint64_t>(in.tellg());
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
