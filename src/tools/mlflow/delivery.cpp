#include "tools/mlflow/delivery.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <tuple>

#include "common/files.h"
#include "common/json.h"
#include "tools/mlflow/run_files.h"

namespace mpt::mlflow {
namespace {

namespace fs = std::filesystem;

// The run directory's files that become artifacts; checkpoints stay local (they are the run's to resume).
const char* const kRunArtifacts[] = {"config.yaml", "summary.json", "train.log", "metrics.jsonl", "events.jsonl"};

nlohmann::json load_state(const std::string& dir) {
  const std::string path = dir + "/" + kStateFile;
  if (!fs::exists(path)) return nlohmann::json::object();
  const nlohmann::json state = parse_json(read_file(path, 1 << 20));
  return state.is_object() ? state : nlohmann::json::object();
}

std::string user_name() {
  for (const char* name : {"USER", "LOGNAME"})
    if (const char* value = std::getenv(name); value && *value) return value;
  return "unknown";
}

KeyValues run_tags(const Target& target, const std::string& dir, const std::string& parent) {
  KeyValues tags = {{"mlflow.source.type", "LOCAL"},
                    {"mlflow.source.name", target.source.empty() ? "mpt" : target.source},
                    {"mlflow.user", user_name()},
                    {"mpt.dir", fs::absolute(dir).lexically_normal().string()}};
  if (!parent.empty()) tags.emplace_back("mlflow.parentRunId", parent);
  tags.insert(tags.end(), target.tags.begin(), target.tags.end());
  return tags;
}

// The folder's own name, also when it was given with a trailing '/'.
std::string name_of(const std::string& dir) {
  const fs::path path = fs::absolute(dir).lexically_normal();
  return (path.has_filename() ? path : path.parent_path()).filename().string();
}

// Creates the directory's MLflow run, or finds the one its mlflow.json names on the same server.
RunInfo open_run(Client& client, const Target& target, const std::string& dir, const std::string& parent,
                 nlohmann::json& state) {
  if (state.value("uri", std::string()) == client.uri() && state.contains("run_id")) {
    RunInfo run{state["run_id"], state.value("experiment_id", std::string()),
                state.value("artifact_uri", std::string())};
    if (client.run_exists(run.run_id)) return run;
  }
  const std::string experiment = client.experiment_id(target.experiment);
  const RunInfo run = client.create_run(experiment, target.run_name.empty() ? name_of(dir) : target.run_name, now_ms(),
                                        run_tags(target, dir, parent));
  state = {{"uri", client.uri()},
           {"experiment_id", run.experiment_id},
           {"run_id", run.run_id},
           {"artifact_uri", run.artifact_uri}};
  return run;
}

void upload_files(Client& client, const RunInfo& run, const std::string& dir, const std::vector<std::string>& names) {
  for (const auto& name : names)
    if (fs::is_regular_file(dir + "/" + name) && !client.upload_artifact(run, dir + "/" + name, name)) return;
}

}  // namespace

RunDelivery::RunDelivery(Client& client, Target target, std::string run_dir, std::string parent_run_id)
    : client_(client), target_(std::move(target)), dir_(std::move(run_dir)), parent_(std::move(parent_run_id)) {}

void RunDelivery::ensure_run() {
  if (checked_) return;
  state_ = load_state(dir_);
  run_ = open_run(client_, target_, dir_, parent_, state_);
  checked_ = true;
  save_state();
}

const RunInfo& RunDelivery::run() {
  ensure_run();
  return run_;
}

void RunDelivery::save_state() { write_file_atomically(dir_ + "/" + kStateFile, state_.dump(2) + "\n"); }

void RunDelivery::deliver_progress() {
  ensure_run();
  KeyValues params, tags;
  if (!state_.value("params", false) && fs::exists(dir_ + "/config.yaml"))
    params = params_from_config(read_file(dir_ + "/config.yaml", 16 << 20));
  if (!parent_.empty() && state_.value("parent", std::string()) != parent_)
    tags.emplace_back("mlflow.parentRunId", parent_);

  uint64_t metrics_offset = state_.value("metrics_bytes", uint64_t{0});
  uint64_t events_offset = state_.value("events_bytes", uint64_t{0});
  std::map<std::string, int64_t> counts = state_.value("event_counts", std::map<std::string, int64_t>{});
  std::vector<Metric> metrics;
  const int64_t now = now_ms();
  for (const auto& line : read_new_lines(dir_ + "/metrics.jsonl", metrics_offset))
    for (auto& metric : metrics_from_record(line, now)) metrics.push_back(std::move(metric));
  for (const auto& event : read_new_lines(dir_ + "/events.jsonl", events_offset)) {
    for (auto& metric : metrics_from_event(event, counts)) metrics.push_back(std::move(metric));
    if ((event.value("kind", "") == "failed" || event.value("kind", "") == "diverged") && event.contains("reason"))
      tags.emplace_back("mpt.failure", event["reason"].is_string() ? event["reason"].get<std::string>() : "");
  }
  if (metrics.empty() && params.empty() && tags.empty()) return;
  client_.log_batch(run_.run_id, metrics, params, tags);
  state_["params"] = true;
  if (!parent_.empty()) state_["parent"] = parent_;
  state_["metrics_bytes"] = metrics_offset;
  state_["events_bytes"] = events_offset;
  state_["event_counts"] = counts;
  save_state();
}

void RunDelivery::deliver_final() {
  deliver_progress();
  const std::string summary_path = dir_ + "/summary.json";
  if (!fs::exists(summary_path)) return;  // killed: the run may resume and finish later
  const auto summary_time = fs::last_write_time(summary_path);
  const std::string stamp = std::to_string(summary_time.time_since_epoch().count());
  if (state_.value("final", std::string()) == stamp) return;  // this summary has gone out already
  const nlohmann::json summary = parse_json(read_file(summary_path, 16 << 20));
  const SummaryEntities answers = from_summary(summary.is_object() ? summary : nlohmann::json::object(), now_ms());
  client_.log_batch(run_.run_id, answers.metrics, {}, answers.tags);
  upload_files(client_, run_, dir_, {std::begin(kRunArtifacts), std::end(kRunArtifacts)});
  client_.set_terminated(run_.run_id, answers.status, now_ms());
  state_["final"] = stamp;
  save_state();
}

namespace {

// The sides' run directories: those inside the folder, and compare.json's run_dir of each side.
std::vector<std::string> comparison_sides(const std::string& out_dir, const nlohmann::json& comparison) {
  std::vector<std::string> sides;
  auto add = [&](const fs::path& dir) {
    if (fs::exists(dir / "summary.json")) sides.push_back(fs::absolute(dir).lexically_normal().string());
  };
  for (const auto& entry : fs::directory_iterator(out_dir))
    if (entry.is_directory()) add(entry.path());
  for (const char* side : {"a", "b"}) {
    const nlohmann::json run_dir = comparison.value(side, nlohmann::json::object()).value("run_dir", nlohmann::json());
    if (run_dir.is_string()) add(run_dir.get<std::string>());
  }
  std::sort(sides.begin(), sides.end());
  sides.erase(std::unique(sides.begin(), sides.end()), sides.end());
  return sides;
}

// compare.json's answers: the ratios and gaps as metrics, each side's numbers under a/ and b/, the verdict,
// the sides' names and any failures as tags.
std::pair<std::vector<Metric>, KeyValues> comparison_entities(const nlohmann::json& comparison) {
  std::vector<Metric> metrics;
  const int64_t now = now_ms();
  for (const char* key : {"accuracy_gap", "relative_accuracy_gap", "accuracy_noise", "speedup", "step_time_ratio",
                          "memory_ratio", "convergence_target_loss", "a", "b"})
    if (comparison.contains(key)) add_numbers(key, comparison[key], 0, now, metrics);
  KeyValues tags = {{"verdict", comparison.value("verdict", std::string("?"))}};
  for (const char* side : {"a", "b"}) {
    const nlohmann::json name = comparison.value(side, nlohmann::json::object()).value("name", nlohmann::json());
    if (name.is_string()) tags.emplace_back(std::string("mpt.") + side, name.get<std::string>());
  }
  if (comparison.contains("failures") && !comparison["failures"].empty())
    tags.emplace_back("mpt.failures", comparison["failures"].dump());
  return {metrics, tags};
}

}  // namespace

void deliver_comparison(Client& client, const Target& target, const std::string& out_dir,
                        const std::string& parent_run_id) {
  const nlohmann::json comparison = parse_json(read_file(out_dir + "/compare.json", 64 << 20));
  if (!comparison.is_object()) throw Refused(out_dir + "/compare.json: not a comparison");
  nlohmann::json state = load_state(out_dir);
  const RunInfo parent = open_run(client, target, out_dir, parent_run_id, state);
  write_file_atomically(out_dir + "/" + kStateFile, state.dump(2) + "\n");
  for (const auto& side : comparison_sides(out_dir, comparison)) {
    Target child = target;
    child.run_name = "";
    RunDelivery(client, child, side, parent.run_id).deliver_final();
  }
  auto [metrics, tags] = comparison_entities(comparison);
  if (!parent_run_id.empty()) tags.emplace_back("mlflow.parentRunId", parent_run_id);
  client.log_batch(parent.run_id, metrics, {}, tags);
  std::vector<std::string> files;
  for (const auto& entry : fs::directory_iterator(out_dir))
    if (entry.is_regular_file() && entry.path().filename() != kStateFile) files.push_back(entry.path().filename());
  upload_files(client, parent, out_dir, files);
  client.set_terminated(parent.run_id, comparison.value("verdict", "") == "PASS" ? "FINISHED" : "FAILED", now_ms());
}

void deliver_night(Client& client, const Target& target, const std::string& night_dir) {
  const nlohmann::json summary = parse_json(read_file(night_dir + "/summary.json", 64 << 20));
  if (!summary.is_object() || !summary.contains("jobs") || !summary["jobs"].is_array())
    throw Refused(night_dir + "/summary.json: not a night's summary");
  nlohmann::json state = load_state(night_dir);
  Target night = target;
  if (night.run_name.empty())
    night.run_name = summary.value("suite", std::string("nightly")) + " " + summary.value("night", name_of(night_dir));
  const RunInfo parent = open_run(client, night, night_dir, "", state);
  write_file_atomically(night_dir + "/" + kStateFile, state.dump(2) + "\n");

  std::vector<Metric> metrics;
  KeyValues tags = {{"mpt.status", summary.value("status", std::string("?"))}};
  const int64_t now = now_ms();
  for (const auto& job : summary["jobs"]) {
    const std::string name = job.value("job", std::string("job"));
    if (job.contains("metrics")) add_numbers(name, job["metrics"], 0, now, metrics);
    tags.emplace_back("mpt.job." + name, job.value("status", std::string("?")));
    const std::string dir = job.value("run_dir", std::string());
    Target child = target;
    child.run_name = summary.value("night", std::string()) + " " + name;
    if (!dir.empty() && fs::exists(dir + "/compare.json"))
      deliver_comparison(client, child, dir, parent.run_id);
    else if (!dir.empty() && fs::exists(dir + "/summary.json"))
      RunDelivery(client, child, dir, parent.run_id).deliver_final();
  }
  const nlohmann::json regressions = summary.value("regressions", nlohmann::json::array());
  metrics.push_back({"regressions", static_cast<double>(regressions.size()), now, 0});
  metrics.push_back({"failed_jobs", summary.value("failed", 0.0), now, 0});
  std::string lines;
  for (const auto& line : regressions) lines += (lines.empty() ? "" : "\n") + line.get<std::string>();
  if (!lines.empty()) tags.emplace_back("mpt.regressions", lines);
  client.log_batch(parent.run_id, metrics, {}, tags);
  upload_files(client, parent, night_dir, {"summary.json", "summary.md", "night.json"});
  const bool good = summary.value("failed", 0) == 0 && regressions.empty();
  client.set_terminated(parent.run_id, good ? "FINISHED" : "FAILED", now_ms());
}

namespace {

// One delivery of `dir` by its kind: "comparison", "night", or a run directory.
void deliver(Client& client, const Target& target, const std::string& dir, const std::string& kind) {
  if (kind == "comparison")
    deliver_comparison(client, target, dir);
  else if (kind == "night")
    deliver_night(client, target, dir);
  else
    RunDelivery(client, target, dir).deliver_final();
}

}  // namespace

void deliver_spooled(const std::string& spool_dir, const std::function<void(const std::string&)>& info,
                     const std::function<void(const std::string&)>& warn) {
  if (const int delivered = flush_spool(spool_dir, warn); delivered > 0)
    info(fmt::format("mlflow: delivered {} spooled director{} from {}", delivered, delivered == 1 ? "y" : "ies",
                     spool_dir));
}

void deliver_or_spool(const Target& target, const std::string& dir, const std::string& kind,
                      const std::function<void(const std::string&)>& say) {
  try {
    deliver_spooled(target.spool, say, say);
    Client client(target.uri);
    deliver(client, target, dir, kind);
    say(fmt::format("mlflow: {} tracked at {} (experiment '{}')", dir, target.uri, target.experiment));
  } catch (const Unreachable& e) {
    try {
      spool(target, dir, kind);
      say(fmt::format("mlflow: {} is not answering ({}); {} waits in {} for the next tracked mpt command", target.uri,
                      e.what(), dir, target.spool));
    } catch (const std::exception& spool_error) {
      say(fmt::format("mlflow: {} is not answering ({}), and the spool failed too: {}", target.uri, e.what(),
                      spool_error.what()));
    }
  } catch (const std::exception& e) {
    say(fmt::format("mlflow: {} refused {}: {}", target.uri, dir, e.what()));
  }
}

void spool(const Target& target, const std::string& dir, const std::string& kind) {
  const std::string absolute = fs::absolute(dir).lexically_normal().string();
  fs::create_directories(target.spool);
  nlohmann::json tags = nlohmann::json::array();
  for (const auto& [key, value] : target.tags) tags.push_back({key, value});
  const nlohmann::json entry = {{"kind", kind},
                                {"dir", absolute},
                                {"uri", target.uri},
                                {"experiment", target.experiment},
                                {"run_name", target.run_name},
                                {"tags", tags},
                                {"source", target.source},
                                {"spooled_at_ms", now_ms()}};
  const std::string name = fmt::format("{:016x}.json", std::hash<std::string>{}(absolute + "\n" + target.uri));
  write_file_atomically(target.spool + "/" + name, entry.dump(2) + "\n");
}

int flush_spool(const std::string& spool_dir, const std::function<void(const std::string&)>& warn) {
  if (!fs::is_directory(spool_dir)) return 0;
  struct Entry {
    int64_t spooled_at_ms;
    fs::path path;
    nlohmann::json fields;
    bool operator<(const Entry& other) const {
      return std::tie(spooled_at_ms, path) < std::tie(other.spooled_at_ms, other.path);
    }
  };
  std::vector<Entry> entries;
  for (const auto& file : fs::directory_iterator(spool_dir)) {
    if (file.path().extension() != ".json") continue;
    nlohmann::json fields = parse_json(read_file(file.path().string(), 1 << 20));
    if (!fields.is_object()) fields = nlohmann::json::object();
    entries.push_back({fields.value("spooled_at_ms", int64_t{0}), file.path(), std::move(fields)});
  }
  std::sort(entries.begin(), entries.end());
  int delivered = 0;
  for (const auto& [when, path, entry] : entries) {
    const std::string dir = entry.value("dir", std::string());
    if (dir.empty() || !fs::is_directory(dir)) {
      warn(fmt::format("mlflow spool: {} names {}, which is gone; dropped", path.string(),
                       dir.empty() ? "nothing" : dir));
      fs::remove(path);
      continue;
    }
    Target target{entry.value("uri", ""),   entry.value("experiment", ""), entry.value("run_name", ""), {}, spool_dir,
                  entry.value("source", "")};
    for (const auto& tag : entry.value("tags", nlohmann::json::array())) target.tags.emplace_back(tag[0], tag[1]);
    Client client(target.uri);
    try {
      deliver(client, target, dir, entry.value("kind", ""));
      ++delivered;
    } catch (const Unreachable&) {
      return delivered;  // still down: the rest waits too
    } catch (const std::exception& e) {
      warn(fmt::format("mlflow spool: {} refused by {}: {}; dropped", dir, target.uri, e.what()));
    }
    fs::remove(path);
  }
  return delivered;
}

}  // namespace mpt::mlflow
