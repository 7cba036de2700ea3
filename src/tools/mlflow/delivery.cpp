#include "tools/mlflow/delivery.h"

#include <fmt/format.h>

#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>

#include "common/files.h"
#include "common/json.h"
#include "mpt/version.h"
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

// As MLflow's client names the user: USER, LOGNAME, else the account's name.
std::string user_name() {
  for (const char* name : {"USER", "LOGNAME"})
    if (const char* value = std::getenv(name); value && *value) return value;
  if (const passwd* account = getpwuid(getuid()); account && account->pw_name) return account->pw_name;
  return "unknown";
}

KeyValues run_tags(const Target& target, const std::string& dir, const std::string& parent) {
  KeyValues tags = {{"mlflow.source.type", "LOCAL"},
                    {"mlflow.source.name", target.source.empty() ? "mpt" : target.source},
                    {"mlflow.user", user_name()},
                    {"mpt.dir", fs::absolute(dir).lexically_normal().string()}};
  if (*kGitCommit) tags.emplace_back("mlflow.source.git.commit", kGitCommit);
  if (!parent.empty()) tags.emplace_back("mlflow.parentRunId", parent);
  tags.insert(tags.end(), target.tags.begin(), target.tags.end());
  return tags;
}

// The time of a JSONL file's first line (metrics and events carry "time", in seconds), or 0.
int64_t first_time_ms(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (!std::getline(in, line)) return 0;
  return time_ms(parse_json(line), 0);
}

// When a file was last written, in MLflow's milliseconds (0 when it is not there).
int64_t written_ms(const std::string& path) {
  std::error_code error;
  const auto time = fs::last_write_time(path, error);
  if (error) return 0;
  const auto system = std::chrono::file_clock::to_sys(time);
  return std::chrono::duration_cast<std::chrono::milliseconds>(system.time_since_epoch()).count();
}

// When a run directory's run began: the earliest of its summary's started_at, its first metric or event, and its
// config.yaml (written as the latest invocation starts); now when it holds none of them.
int64_t start_ms(const std::string& dir) {
  int64_t start = written_ms(dir + "/config.yaml");
  for (const char* file : {"/metrics.jsonl", "/events.jsonl"})
    if (const int64_t first = first_time_ms(dir + file); first > 0 && (start == 0 || first < start)) start = first;
  if (fs::exists(dir + "/summary.json")) {
    const nlohmann::json summary = parse_json(read_file(dir + "/summary.json", 16 << 20));
    if (const int64_t started = summary.is_object() ? time_ms(summary, 0, "started_at") : 0;
        started > 0 && (start == 0 || started < start))
      start = started;
  }
  return start > 0 ? start : now_ms();
}

// The earliest start of the run directories a parent run holds (a comparison's sides, a night's jobs), else now.
int64_t start_ms(const std::vector<std::string>& dirs) {
  int64_t start = 0;
  for (const auto& dir : dirs)
    if (const int64_t first = start_ms(dir); start == 0 || first < start) start = first;
  return start > 0 ? start : now_ms();
}

// The folder's own name, also when it was given with a trailing '/'.
std::string name_of(const std::string& dir) {
  const fs::path path = fs::absolute(dir).lexically_normal();
  return (path.has_filename() ? path : path.parent_path()).filename().string();
}

// Whether `line` of `file` went out before a resume cut it, and the resumed run wrote it again; forgets it then.
bool sent_before_cut(nlohmann::json& resent, const std::string& file, const nlohmann::json& line) {
  if (!resent.contains(file) || !resent[file].is_array() || resent[file].empty()) return false;
  nlohmann::json& waiting = resent[file];
  const auto found = std::find(waiting.begin(), waiting.end(), line_identity(line));
  if (found == waiting.end()) return false;
  waiting.erase(found);
  return true;
}

// Creates the directory's MLflow run, starting at `start_ms`, or finds the one its mlflow.json names on the same
// server.
RunInfo open_run(Client& client, const Target& target, const std::string& dir, const std::string& parent,
                 int64_t start_ms, nlohmann::json& state) {
  if (state.value("uri", std::string()) == client.shown_uri() && state.contains("run_id") &&
      state["run_id"].is_string()) {
    RunInfo run{state["run_id"], state.value("experiment_id", std::string()),
                state.value("artifact_uri", std::string())};
    if (client.run_exists(run.run_id)) return run;
  }
  const std::string experiment = client.experiment_id(target.experiment);
  const RunInfo run = client.create_run(experiment, target.run_name.empty() ? name_of(dir) : target.run_name, start_ms,
                                        run_tags(target, dir, parent));
  state = {{"uri", client.shown_uri()},
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
  run_ = open_run(client_, target_, dir_, parent_, start_ms(dir_), state_);
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
  const nlohmann::json before = state_;
  KeyValues params, tags;
  if (!state_.value("params", false) && fs::exists(dir_ + "/config.yaml"))
    params = params_from_config(read_file(dir_ + "/config.yaml", 16 << 20));
  if (!parent_.empty() && state_.value("parent", std::string()) != parent_)
    tags.emplace_back("mlflow.parentRunId", parent_);

  uint64_t metrics_offset = state_.value("metrics_bytes", uint64_t{0});
  uint64_t events_offset = state_.value("events_bytes", uint64_t{0});
  std::map<std::string, int64_t> counts = state_.value("event_counts", std::map<std::string, int64_t>{});
  nlohmann::json resent = state_.value("resent", nlohmann::json::object());
  std::vector<Metric> metrics;
  const int64_t now = now_ms();
  for (const auto& line : read_new_lines(dir_ + "/metrics.jsonl", metrics_offset))
    if (!sent_before_cut(resent, "metrics.jsonl", line))
      for (auto& metric : metrics_from_record(line, now)) metrics.push_back(std::move(metric));
  for (const auto& event : read_new_lines(dir_ + "/events.jsonl", events_offset)) {
    if (sent_before_cut(resent, "events.jsonl", event)) continue;
    for (auto& metric : metrics_from_event(event, counts)) metrics.push_back(std::move(metric));
    if ((event.value("kind", "") == "failed" || event.value("kind", "") == "diverged") && event.contains("reason"))
      tags.emplace_back("mpt.failure", event["reason"].is_string() ? event["reason"].get<std::string>() : "");
  }
  if (!metrics.empty() || !params.empty() || !tags.empty()) client_.log_batch(run_.run_id, metrics, params, tags);
  state_["params"] = state_.value("params", false) || !params.empty();
  if (!parent_.empty()) state_["parent"] = parent_;
  state_["metrics_bytes"] = metrics_offset;
  state_["events_bytes"] = events_offset;
  state_["event_counts"] = counts;
  state_["resent"] = resent;
  if (state_ != before) save_state();
}

void RunDelivery::deliver_final() {
  deliver_progress();
  const std::string summary_path = dir_ + "/summary.json";
  if (!fs::exists(summary_path)) return;  // killed: the run may resume and finish later
  const auto summary_time = fs::last_write_time(summary_path);
  const std::string stamp = std::to_string(summary_time.time_since_epoch().count());
  if (state_.value("final", std::string()) == stamp) return;  // this summary has gone out already
  nlohmann::json summary = parse_json(read_file(summary_path, 16 << 20));
  if (!summary.is_object()) summary = nlohmann::json::object();
  const int64_t ended = time_ms(summary, written_ms(summary_path), "ended_at");
  const SummaryEntities answers = from_summary(summary, ended);
  client_.log_batch(run_.run_id, answers.metrics, {}, answers.tags);
  upload_files(client_, run_, dir_, {std::begin(kRunArtifacts), std::end(kRunArtifacts)});
  client_.set_terminated(run_.run_id, answers.status, ended);
  state_["final"] = stamp;
  save_state();
}

void forget_cut_lines(const std::string& run_dir, const std::string& file, uint64_t cut_begin, uint64_t cut_end) {
  nlohmann::json state = load_state(run_dir);
  const std::string offset_key = file == "events.jsonl" ? "events_bytes" : "metrics_bytes";
  const uint64_t sent = state.value(offset_key, uint64_t{0});
  if (sent <= cut_begin) return;
  uint64_t from = cut_begin;
  nlohmann::json& resent = state["resent"][file];
  if (!resent.is_array()) resent = nlohmann::json::array();
  for (const auto& line : read_new_lines(run_dir + "/" + file, from, std::min(sent, cut_end)))
    resent.push_back(line_identity(line));  // counted once already: skipped uncounted when written again
  state[offset_key] = cut_begin;
  write_file_atomically(run_dir + "/" + kStateFile, state.dump(2) + "\n");
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
std::pair<std::vector<Metric>, KeyValues> comparison_entities(const nlohmann::json& comparison, int64_t now) {
  std::vector<Metric> metrics;
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
  const std::vector<std::string> sides = comparison_sides(out_dir, comparison);
  const RunInfo parent = open_run(client, target, out_dir, parent_run_id, start_ms(sides), state);
  write_file_atomically(out_dir + "/" + kStateFile, state.dump(2) + "\n");
  const int64_t ended = written_ms(out_dir + "/compare.json");
  for (const auto& side : sides) {
    Target child = target;
    child.run_name = "";
    RunDelivery(client, child, side, parent.run_id).deliver_final();
  }
  auto [metrics, tags] = comparison_entities(comparison, ended);
  if (!parent_run_id.empty()) tags.emplace_back("mlflow.parentRunId", parent_run_id);
  client.log_batch(parent.run_id, metrics, {}, tags);
  std::vector<std::string> files;
  for (const auto& entry : fs::directory_iterator(out_dir))
    if (entry.is_regular_file() && entry.path().filename() != kStateFile) files.push_back(entry.path().filename());
  upload_files(client, parent, out_dir, files);
  client.set_terminated(parent.run_id, comparison.value("verdict", "") == "PASS" ? "FINISHED" : "FAILED", ended);
}

void deliver_night(Client& client, const Target& target, const std::string& night_dir) {
  const nlohmann::json summary = parse_json(read_file(night_dir + "/summary.json", 64 << 20));
  if (!summary.is_object() || !summary.contains("jobs") || !summary["jobs"].is_array())
    throw Refused(night_dir + "/summary.json: not a night's summary");
  nlohmann::json state = load_state(night_dir);
  Target night = target;
  if (night.run_name.empty())
    night.run_name = summary.value("suite", std::string("nightly")) + " " + summary.value("night", name_of(night_dir));
  std::vector<std::string> job_dirs;
  for (const auto& job : summary["jobs"])
    if (job.is_object() && job.value("run_dir", nlohmann::json()).is_string()) job_dirs.push_back(job["run_dir"]);
  const RunInfo parent = open_run(client, night, night_dir, "", start_ms(job_dirs), state);
  write_file_atomically(night_dir + "/" + kStateFile, state.dump(2) + "\n");

  std::vector<Metric> metrics;
  KeyValues tags = {{"mpt.status", summary.value("status", std::string("?"))}};
  const int64_t now = written_ms(night_dir + "/summary.json");
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
  client.set_terminated(parent.run_id, good ? "FINISHED" : "FAILED", now);
}

void deliver_numerics(Client& client, const Target& target, const std::string& dir) {
  const nlohmann::json report = parse_json(read_file(dir + "/numerics.json", 256 << 20));
  if (!report.is_object() || !report.contains("formats") || !report["formats"].is_object() ||
      !report.value("layers", nlohmann::json()).is_array())
    throw Refused(dir + "/numerics.json: not a numerics report");
  nlohmann::json state = load_state(dir);
  const int64_t written = written_ms(dir + "/numerics.json");
  const RunInfo run = open_run(client, target, dir, "", written, state);
  write_file_atomically(dir + "/" + kStateFile, state.dump(2) + "\n");
  std::vector<Metric> metrics;
  add_numbers("", report["formats"], 0, written, metrics);
  KeyValues tags = {{"mpt.kind", "numerics"}, {"model", report.value("model", std::string("?"))}};
  for (const auto& layer : report["layers"]) {
    const nlohmann::json formats = layer.is_object() ? layer.value("formats", nlohmann::json::object()) : nullptr;
    if (!formats.is_object()) continue;
    for (const auto& [format, entry] : formats.items())
      if (entry.is_object() && entry.value("rank", 0) == 1)
        tags.emplace_back("mpt.most_damaged." + format, layer.value("name", std::string("?")));
  }
  client.log_batch(run.run_id, metrics, {}, tags);
  upload_files(client, run, dir, {"numerics.json", "numerics.html"});
  client.set_terminated(run.run_id, "FINISHED", written);
}

void deliver_directory(Client& client, const Target& target, const std::string& dir, const std::string& kind) {
  if (kind == "comparison")
    deliver_comparison(client, target, dir);
  else if (kind == "numerics")
    deliver_numerics(client, target, dir);
  else if (kind == "night")
    deliver_night(client, target, dir);
  else
    RunDelivery(client, target, dir).deliver_final();
}

}  // namespace mpt::mlflow
