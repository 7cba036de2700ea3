// A night: recovery, jobs, history, regressions, summary, trends, retention.
#include "tools/nightly/night.h"

#include <fmt/format.h>

#include <algorithm>
#include <ctime>
#include <filesystem>

#include "common/error.h"
#include "common/files.h"
#include "common/json.h"
#include "mpt/version.h"
#include "tools/nightly/history.h"
#include "tools/nightly/jobs.h"
#include "tools/nightly/trends.h"

namespace mpt::nightly {
namespace {

namespace fs = std::filesystem;

std::string local_time(const char* format) {
  char text[64];
  const std::time_t now = std::time(nullptr);
  std::strftime(text, sizeof text, format, std::localtime(&now));
  return text;
}

// Night folders (those holding night.json), oldest first: their names sort in time order.
std::vector<std::string> list_nights(const std::string& root) {
  std::vector<std::string> nights;
  for (const auto& entry : fs::directory_iterator(root))
    if (entry.is_directory() && !entry.is_symlink() && fs::exists(entry.path() / "night.json"))
      nights.push_back(entry.path().filename().string());
  std::sort(nights.begin(), nights.end());
  return nights;
}

nlohmann::json read_state(const std::string& night_dir) {
  const std::string path = night_dir + "/night.json";
  auto state = parse_json(read_file(path));
  if (state.is_discarded() || !state.is_object() || !state.contains("jobs"))
    throw Error(path + ": not a night state file (expected JSON with 'jobs')");
  return state;
}

// Written only when it reads back equal: a state the next night could not read (a NaN becomes null) would stop
// every later night.
void write_state(const std::string& night_dir, const nlohmann::json& state) {
  const std::string text = state.dump(2) + "\n";
  if (parse_json(text) != state)
    throw Error(night_dir +
                "/night.json: the night's state would not read back as written (a non-finite number?); "
                "the previous state is kept");
  write_file_atomically(night_dir + "/night.json", text);
}

// ROOT/latest -> NIGHT, replaced atomically (a new link renamed over the old one).
void point_latest(const std::string& root, const std::string& night) {
  const fs::path link = fs::path(root) / "latest", temporary = fs::path(root) / ".latest.tmp";
  std::error_code error;
  fs::remove(temporary, error);
  fs::create_directory_symlink(night, temporary);
  fs::rename(temporary, link);
}

bool night_is_good(const nlohmann::json& state) {
  if (state.value("status", "") == "running") return false;
  for (const auto& job : state["jobs"])
    if (job.value("status", "") != "ok") return false;
  return true;
}

uint64_t folder_bytes(const fs::path& dir) {
  uint64_t bytes = 0;
  std::error_code error;
  for (auto it = fs::recursive_directory_iterator(dir, error); it != fs::recursive_directory_iterator();
       it.increment(error))
    if (it->is_regular_file(error)) bytes += it->file_size(error);
  return bytes;
}

// The runner shared by tonight and recovery: runs a job, records it in history and the night's state.
class NightRunner {
 public:
  NightRunner(const Suite& suite, std::string root, const volatile int* stop_requested)
      : suite_(suite), root_(std::move(root)), history_path_(root_ + "/history.jsonl"), stop_(stop_requested) {
    history_ = read_history(history_path_);
  }

  // Runs every pending job of the night in night_dir; returns false when a stop request interrupted it.
  bool run_pending(const std::string& night, bool recovering) {
    const std::string night_dir = root_ + "/" + night;
    nlohmann::json state = read_state(night_dir);
    for (auto& entry : state["jobs"]) {
      if (entry.value("status", "") != "pending" && entry.value("status", "") != "running") continue;
      if (*stop_) return false;
      const Job job = job_from_json(entry["job"]);
      entry["status"] = "running";
      write_state(night_dir, state);

      nlohmann::json record = run_job(job, night_dir + "/" + job.name, suite_.regression.speed_rounds, stop_);
      if (*stop_) {  // the job was stopped by us, not by its own failure: resume it next time
        entry["status"] = "pending";
        write_state(night_dir, state);
        return false;
      }
      record["night"] = night;
      record["suite"] = suite_.name;
      record["recovered"] = recovering;
      record["versions"] = {{"mpt", kVersion}, {"git", kGitHash}, {"libtorch", kTorchVersion}};
      std::vector<std::string> notes;
      std::string throughput_flagged;
      record["regressions"] = find_regressions(record, history_, suite_.regression, &notes, &throughput_flagged);
      // A slow night is timed again before it is called: the machine alone can be slower for a while.
      if (throughput_flagged == "bench_samples_per_sec" &&
          retime_train_job(job, record, 2 * suite_.regression.speed_rounds, stop_)) {
        notes.clear();
        record["regressions"] = find_regressions(record, history_, suite_.regression, &notes);
      }
      if (!notes.empty()) record["notes"] = notes;
      append_history(history_path_, record);
      history_.push_back(record);
      entry["status"] = record["status"];
      entry["record"] = record;
      write_state(night_dir, state);
    }
    state["status"] = recovering ? "recovered" : "finished";
    state["finished"] = local_time("%Y-%m-%dT%H:%M:%S%z");
    write_state(night_dir, state);
    return true;
  }

  const std::vector<nlohmann::json>& history() const { return history_; }

 private:
  const Suite& suite_;
  std::string root_;
  std::string history_path_;
  const volatile int* stop_;
  std::vector<nlohmann::json> history_;
};

std::string job_line(const nlohmann::json& record) {
  const std::string status = record.value("status", "?");
  const nlohmann::json metrics = record.value("metrics", nlohmann::json::object());
  std::string detail;
  auto number = [&](const char* key) { return metrics.contains(key) && metrics[key].is_number(); };
  if (record.value("kind", "") == "train") {
    if (number("accuracy")) detail += fmt::format("  accuracy {:.4f}", metrics["accuracy"].get<double>());
    if (number("bench_samples_per_sec"))
      detail += fmt::format("  {:.0f} samples/s (median of {} bench runs)",
                            metrics["bench_samples_per_sec"].get<double>(), metrics["bench_rounds"].size());
    else if (number("samples_per_sec"))
      detail += fmt::format("  {:.0f} samples/s", metrics["samples_per_sec"].get<double>());
    if (number("peak_memory_bytes")) {
      auto mib = [&](const char* key) { return number(key) ? metrics[key].get<double>() / 1048576.0 : 0.0; };
      detail += fmt::format("  memory {:.0f} MiB training ({:.0f} eval, {:.0f} checkpoint, {:.0f} process)",
                            mib("peak_memory_bytes"), mib("eval_peak_memory_bytes"),
                            mib("checkpoint_peak_memory_bytes"), mib("process_peak_memory_bytes"));
    }
  } else if (metrics.contains("verdict")) {
    detail += "  verdict " + metrics["verdict"].get<std::string>();
    if (number("accuracy_gap")) detail += fmt::format("  gap {:+.2f}%", 100 * metrics["accuracy_gap"].get<double>());
    if (number("speedup")) detail += fmt::format("  speed-up {:.2f}x", metrics["speedup"].get<double>());
  }
  if (status != "ok" && record.contains("reason")) detail += "  -- " + record["reason"].get<std::string>();
  return fmt::format("  {:<12} {:<24} {:>7.1f} s{}", status, record.value("job", "?"), record.value("seconds", 0.0),
                     detail);
}

std::string summary_markdown(const nlohmann::json& summary) {
  std::string md = fmt::format("# mpt nightly {} — {}\n\nStatus: **{}** · {} jobs · {} failed · {} regression(s)\n\n",
                               summary["suite"].get<std::string>(), summary["night"].get<std::string>(),
                               summary["status"].get<std::string>(), summary["jobs"].size(),
                               summary["failed"].get<int>(), summary["regressions"].size());
  md += "| job | kind | status | seconds | key metrics | run |\n|---|---|---|---|---|---|\n";
  for (const auto& record : summary["jobs"]) {
    md += fmt::format("| {} | {} | {} | {:.1f} | {} | `{}` |\n", record.value("job", "?"), record.value("kind", "?"),
                      record.value("status", "?"), record.value("seconds", 0.0),
                      record.contains("metrics") ? record["metrics"].dump() : "-", record.value("run_dir", ""));
  }
  if (!summary["regressions"].empty()) {
    md += "\n## Regressions\n\n";
    for (const auto& r : summary["regressions"]) md += "- " + r.get<std::string>() + "\n";
  }
  if (summary.contains("notes") && !summary["notes"].empty()) {
    md += "\n## Notes\n\n";
    for (const auto& n : summary["notes"]) md += "- " + n.get<std::string>() + "\n";
  }
  if (!summary["recovered"].empty()) {
    md += "\n## Recovered from an interrupted night\n\n";
    for (const auto& r : summary["recovered"]) md += "- " + r.get<std::string>() + "\n";
  }
  return md;
}

// A night still 'running' while we hold the lock was killed: finish its jobs first. Returns a line per job it ran
// and per night it set aside.
std::vector<std::string> recover_nights(NightRunner& runner, const std::string& root) {
  std::vector<std::string> recovered;
  for (const std::string& night : list_nights(root)) {
    bool finished = true;
    const size_t before = runner.history().size();
    try {
      const nlohmann::json state = read_state(root + "/" + night);
      if (state.value("status", "") != "running") continue;
      finished = runner.run_pending(night, /*recovering=*/true);
    } catch (const Error& e) {  // an unreadable old night is set aside, never a reason to stop tonight's
      const fs::path state = fs::path(root) / night / "night.json";
      std::error_code ignored;
      fs::rename(state, fs::path(state).concat(".unreadable"), ignored);
      recovered.push_back(fmt::format("{}: skipped, its state cannot be read ({}); set aside as night.json.unreadable",
                                      night, e.what()));
      continue;
    }
    for (size_t i = before; i < runner.history().size(); ++i) {
      const auto& record = runner.history()[i];
      recovered.push_back(fmt::format("{} {}: {}", night, record.value("job", "?"), record.value("status", "?")));
    }
    if (!finished) break;
  }
  return recovered;
}

// Tonight's folder name: the local time, with a counter when a night already started in the same second.
std::string new_night_name(const std::string& root) {
  std::string night = local_time("%Y-%m-%d_%H%M%S");
  for (int n = 2; fs::exists(root + "/" + night); ++n) night = local_time("%Y-%m-%d_%H%M%S") + "-" + std::to_string(n);
  return night;
}

// Creates tonight's folder and state with every job pending, points ROOT/latest at it and runs the jobs; returns
// false when a stop request interrupted them.
bool run_tonight(NightRunner& runner, const Suite& suite, const std::string& root, const std::string& night) {
  const std::string night_dir = root + "/" + night;
  fs::create_directories(night_dir);
  nlohmann::json state = {{"night", night},
                          {"suite", suite.name},
                          {"suite_path", suite.path},
                          {"status", "running"},
                          {"started", local_time("%Y-%m-%dT%H:%M:%S%z")},
                          {"jobs", nlohmann::json::array()}};
  for (const Job& job : suite.jobs) state["jobs"].push_back({{"status", "pending"}, {"job", job_to_json(job)}});
  write_state(night_dir, state);
  point_latest(root, night);
  return runner.run_pending(night, /*recovering=*/false);
}

// Tonight's records from history, how many of them failed, and their regressions and notes, each led by its job.
struct NightTally {
  nlohmann::json jobs = nlohmann::json::array(), regressions = nlohmann::json::array(), notes = nlohmann::json::array();
  int failed = 0;
};

NightTally tally_night(const std::vector<nlohmann::json>& history, const std::string& night) {
  NightTally tally;
  for (const auto& record : history) {
    if (record.value("night", "") != night) continue;
    tally.jobs.push_back(record);
    const std::string status = record.value("status", "");
    if (status == "failed" || status == "timeout") ++tally.failed;
    for (const auto& r : record["regressions"])
      tally.regressions.push_back(record.value("job", "?") + ": " + r.get<std::string>());
    if (record.contains("notes"))
      for (const auto& n : record["notes"])
        tally.notes.push_back(record.value("job", "?") + ": " + n.get<std::string>());
  }
  return tally;
}

}  // namespace

std::vector<std::string> prune_nights(const std::string& root, const std::string& current, int keep_nights,
                                      double disk_budget_gb) {
  std::vector<std::string> nights = list_nights(root);
  std::string newest_good;
  for (auto it = nights.rbegin(); it != nights.rend() && newest_good.empty(); ++it) {
    auto state = parse_json(read_file(root + "/" + *it + "/night.json"));
    if (!state.is_discarded() && state.contains("jobs") && night_is_good(state)) newest_good = *it;
  }
  auto protected_night = [&](const std::string& night) { return night == current || night == newest_good; };
  std::vector<std::string> deleted;
  auto remove_night = [&](const std::string& night) {
    fs::remove_all(fs::path(root) / night);
    deleted.push_back(night);
    nights.erase(std::find(nights.begin(), nights.end(), night));
  };
  // The newest keep_nights stay; older ones go unless protected.
  const std::vector<std::string> older(nights.begin(), nights.end() - std::min<ptrdiff_t>(keep_nights, nights.size()));
  for (const auto& night : older)
    if (!protected_night(night)) remove_night(night);
  if (disk_budget_gb > 0) {
    const double budget = disk_budget_gb * 1024 * 1024 * 1024;
    auto total = [&] {
      double bytes = 0;
      for (const auto& n : nights) bytes += static_cast<double>(folder_bytes(fs::path(root) / n));
      return bytes;
    };
    while (total() > budget) {
      auto victim = std::find_if(nights.begin(), nights.end(), [&](const auto& n) { return !protected_night(n); });
      if (victim == nights.end()) break;
      remove_night(*victim);
    }
  }
  return deleted;
}

NightOutcome run_night(const Suite& suite, const std::string& root, const volatile int* stop_requested) {
  NightRunner runner(suite, root, stop_requested);
  NightOutcome outcome;
  const std::vector<std::string> recovered = recover_nights(runner, root);

  const std::string night = new_night_name(root);
  outcome.night_dir = root + "/" + night;
  const bool interrupted = *stop_requested || !run_tonight(runner, suite, root, night);

  const NightTally tally = tally_night(runner.history(), night);
  const auto& [jobs, regressions, notes, failed] = tally;
  outcome.summary = {{"suite", suite.name},
                     {"night", night},
                     {"status", interrupted ? "interrupted" : "finished"},
                     {"jobs", jobs},
                     {"failed", failed},
                     {"regressions", regressions},
                     {"notes", notes},
                     {"recovered", recovered},
                     {"versions", {{"mpt", kVersion}, {"git", kGitHash}, {"libtorch", kTorchVersion}}}};
  outcome.exit_code = interrupted || failed > 0 ? kExitRunFailed : regressions.empty() ? kExitOk : kExitVerdictFailed;
  outcome.summary["exit_code"] = outcome.exit_code;
  if (fs::exists(outcome.night_dir)) {
    write_file_atomically(outcome.night_dir + "/summary.json", outcome.summary.dump(2) + "\n");
    write_file_atomically(outcome.night_dir + "/summary.md", summary_markdown(outcome.summary));
  }
  write_file_atomically(root + "/trends.html", render_trends(suite.name, runner.history()));
  const std::vector<std::string> pruned = prune_nights(root, night, suite.keep_nights, suite.disk_budget_gb);

  auto& report = outcome.report;
  report.push_back(fmt::format("mpt nightly {} {}: {} job(s), {} failed, {} regression(s){}", suite.name, night,
                               jobs.size(), failed, regressions.size(), interrupted ? "; INTERRUPTED" : ""));
  for (const auto& record : jobs) report.push_back(job_line(record));
  for (const auto& r : regressions) report.push_back("  REGRESSION " + r.get<std::string>());
  for (const auto& n : notes) report.push_back("  NOTE " + n.get<std::string>());
  for (const auto& r : recovered) report.push_back("  recovered " + r);
  if (interrupted) report.push_back("  stopped by a signal; the next invocation resumes the unfinished jobs");
  if (!pruned.empty())
    report.push_back(fmt::format("  pruned {} old night(s): {}", pruned.size(), fmt::join(pruned, ", ")));
  report.push_back(fmt::format("  details: {}/summary.md  trends: {}/trends.html", outcome.night_dir, root));
  return outcome;
}

}  // namespace mpt::nightly
