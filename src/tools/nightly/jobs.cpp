// Nightly jobs as child processes.
#include "tools/nightly/jobs.h"

#include <fmt/format.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "common/error.h"
#include "common/files.h"
#include "common/json.h"
#include "common/process.h"
#include "tools/nightly/history.h"

namespace mpt::nightly {
namespace {

namespace fs = std::filesystem;

nlohmann::json read_json_or_null(const std::string& path) {
  if (!fs::exists(path)) return nullptr;
  auto json = parse_json(read_file(path));
  return json.is_discarded() ? nlohmann::json(nullptr) : json;
}

// What went wrong, in one line for the morning summary: mpt's last error (with the lines that detail it),
// else the last verdict failure, else the log's last line.
std::string failure_reason(const std::string& log_path) {
  std::ifstream log(log_path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(log, line);)
    if (!line.empty()) lines.push_back(line);
  for (auto it = lines.rbegin(); it != lines.rend(); ++it) {
    if (it->rfind("mpt: error:", 0) != 0) continue;
    std::string reason = *it;
    for (auto detail = it.base(); detail != lines.end() && detail - it.base() < 3; ++detail) reason += " |" + *detail;
    return reason;
  }
  for (auto it = lines.rbegin(); it != lines.rend(); ++it)
    if (it->find("FAIL:") != std::string::npos) return *it;
  return lines.empty() ? "no output" : lines.back();
}

nlohmann::json train_metrics(const nlohmann::json& s) {
  auto at = [&](const char* a, const char* b = nullptr) -> nlohmann::json {
    if (!s.contains(a)) return nullptr;
    const auto& node = b ? (s[a].contains(b) ? s[a][b] : nlohmann::json(nullptr)) : s[a];
    return node.is_number() ? node : nlohmann::json(nullptr);
  };
  return {{"accuracy", at("eval", "accuracy")},
          {"eval_loss", at("eval", "loss")},
          {"samples_per_sec", at("samples_per_sec")},
          {"median_step_ms", at("step_time_ms", "median")},
          {"peak_memory_bytes", at("peak_memory_bytes")},  // the training steps'
          {"eval_peak_memory_bytes", at("memory", "evaluation_peak_bytes")},
          {"checkpoint_peak_memory_bytes", at("memory", "checkpoint_peak_bytes")},
          {"process_peak_memory_bytes", at("memory", "process_peak_bytes")},
          {"steps", at("steps")},
          {"skipped_steps", at("skipped_steps")},
          {"threads", at("threads")},
          {"backoffs", at("loss_scale", "backoffs")},
          {"min_scale", at("loss_scale", "min")},
          {"final_scale", at("loss_scale", "final")}};
}

// compare.json's numbers (null where a value is missing or not a number) and verdict; `problem` names the first
// value of the wrong type, which only a damaged file has.
nlohmann::json ab_metrics(const nlohmann::json& c, std::string& problem) {
  auto number = [&](std::initializer_list<const char*> path) -> nlohmann::json {
    const nlohmann::json* node = &c;
    std::string where;
    for (const char* key : path) {
      where += (where.empty() ? "" : ".") + std::string(key);
      if (!node->is_object() || !node->contains(key)) return nullptr;
      node = &(*node)[key];
    }
    if (node->is_number() || node->is_null()) return *node;
    if (problem.empty()) problem = "'" + where + "' is " + node->type_name() + ", expected a number";
    return nullptr;
  };
  const nlohmann::json verdict = c.value("verdict", nlohmann::json("?"));
  if (!verdict.is_string() && problem.empty())
    problem = std::string("'verdict' is ") + verdict.type_name() + ", expected PASS or FAIL";
  return {{"verdict", verdict.is_string() ? verdict : nlohmann::json("?")},
          {"accuracy_gap", number({"accuracy_gap"})},
          {"speedup", number({"speedup"})},
          {"memory_ratio", number({"memory_ratio"})},
          {"a_accuracy", number({"a", "accuracy"})},
          {"b_accuracy", number({"b", "accuracy"})},
          {"b_samples_per_sec", number({"b", "samples_per_sec"})},
          {"b_skipped_steps", number({"b", "loss_scale", "skipped_steps"})}};
}

}  // namespace

nlohmann::json job_to_json(const Job& job) {
  return {{"name", job.name},
          {"kind", job.kind},
          {"specs", job.specs},
          {"overrides", job.overrides},
          {"allow_diff", job.allow_diff},
          {"time_budget_sec", job.time_budget_sec},
          {"tags", job.tags}};
}

Job job_from_json(const nlohmann::json& json) {
  Job job;
  job.name = json.at("name").get<std::string>();
  job.kind = json.at("kind").get<std::string>();
  job.specs = json.at("specs").get<std::vector<std::string>>();
  job.overrides = json.value("overrides", std::vector<std::string>{});
  job.allow_diff = json.value("allow_diff", std::vector<std::string>{});
  job.time_budget_sec = json.value("time_budget_sec", 0.0);
  job.tags = json.value("tags", std::vector<std::string>{});
  return job;
}

namespace {

// CPU seconds the whole machine has spent busy (steal included: a VM neighbour's share) since boot.
double machine_busy_seconds() {
  std::ifstream stat("/proc/stat");
  std::string cpu;
  long long user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
  if (!(stat >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal) || cpu != "cpu") return -1;
  return static_cast<double>(user + nice + system + irq + softirq + steal) /
         static_cast<double>(::sysconf(_SC_CLK_TCK));
}

// CPU seconds of this process's finished children (and theirs): the job's own work.
double children_cpu_seconds() {
  struct rusage usage {};
  ::getrusage(RUSAGE_CHILDREN, &usage);
  return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec);
}

// How busy the machine was with other work while the job ran: the CPU time everything but the job used, as a
// share of all the CPUs' wall time (the job's own threads cannot raise it); and the load average at its end.
struct LoadProbe {
  double busy = machine_busy_seconds(), own = children_cpu_seconds();

  nlohmann::json measure(double seconds) const {
    nlohmann::json load = nlohmann::json::object();
    const long cpus = ::sysconf(_SC_NPROCESSORS_ONLN);
    const double busy_after = machine_busy_seconds();
    if (busy >= 0 && busy_after >= busy && seconds > 0 && cpus > 0) {
      const double others = std::max(0.0, busy_after - busy - (children_cpu_seconds() - own));
      load["other_cpu"] = std::min(1.0, others / (seconds * static_cast<double>(cpus)));
    }
    double average = 0.0;
    if (std::ifstream loadavg("/proc/loadavg"); loadavg >> average) load["loadavg_1min"] = average;
    load["cpus"] = cpus;
    return load;
  }
};

// `rounds` runs of `mpt bench` on a train job's spec appended to metrics.bench_rounds, each timing enough steps to
// steady the rate (a few dozen swung much more than a few hundred; docs/nightly.md); metrics.bench_samples_per_sec
// becomes the median of all its rounds. False when a run failed.
bool time_train_job(const Job& job, const std::string& job_dir, int rounds, nlohmann::json& metrics,
                    const volatile int* stop_requested) {
  const double step_ms = metrics.contains("median_step_ms") && metrics["median_step_ms"].is_number()
                             ? metrics["median_step_ms"].get<double>()
                             : 0.0;
  const int64_t steps = step_ms > 0 ? std::clamp<int64_t>(std::llround(2000.0 / step_ms), 30, 2000) : 30;
  if (!metrics.contains("bench_rounds")) metrics["bench_rounds"] = nlohmann::json::array();
  for (int round = 0; round < rounds; ++round) {
    const std::string result = fmt::format("{}/speed-{}.json", job_dir, round);
    process::ChildOptions options;
    options.log_path = job_dir + "/speed.log";
    options.own_process_group = true;
    const nlohmann::json json = process::run_bench(job.specs.at(0), job.overrides,
                                                   {"--steps", std::to_string(steps), "--warmup", "10", "--no-peak"},
                                                   result, options, stop_requested)
                                    .result;
    if (!json.contains("samples_per_sec") || !json["samples_per_sec"].is_number()) return false;
    metrics["bench_rounds"].push_back(json["samples_per_sec"]);
  }
  std::vector<double> values;
  for (const auto& value : metrics["bench_rounds"]) values.push_back(value.get<double>());
  metrics["bench_samples_per_sec"] = median(values);
  return true;
}

}  // namespace

bool retime_train_job(const Job& job, nlohmann::json& record, int rounds, const volatile int* stop_requested) {
  if (!record.contains("metrics") || !record["metrics"].contains("bench_rounds")) return false;
  const bool timed = time_train_job(job, record.value("run_dir", ""), rounds, record["metrics"], stop_requested);
  record["metrics"]["retimed"] = timed;
  return timed;
}

nlohmann::json run_job(const Job& job, const std::string& job_dir, int speed_rounds,
                       const volatile int* stop_requested) {
  fs::create_directories(job_dir);
  std::vector<std::string> args = {process::self_executable()};
  if (job.kind == "train") {
    args.insert(args.end(), {"train", job.specs.at(0)});
    args.insert(args.end(), job.overrides.begin(), job.overrides.end());
    args.insert(args.end(), {"--run-dir", job_dir, "--resume", "auto"});
  } else {
    args.insert(args.end(), {"ab-compare", job.specs.at(0), job.specs.at(1)});
    args.insert(args.end(), job.overrides.begin(), job.overrides.end());
    args.insert(args.end(), {"--out", job_dir});
    if (!job.allow_diff.empty())
      args.insert(args.end(), {"--allow-diff", fmt::format("{}", fmt::join(job.allow_diff, ","))});
  }
  process::ChildOptions options;
  options.log_path = job_dir + "/job.log";
  options.timeout_sec = job.time_budget_sec;
  options.own_process_group = true;  // a budget must stop ab-compare's runs as well
  const LoadProbe load;
  const auto started = std::chrono::steady_clock::now();
  const process::ChildResult child = process::run_child(args, options, stop_requested);

  nlohmann::json record = {{"job", job.name},          {"kind", job.kind},   {"exit_code", child.exit_code},
                           {"seconds", child.seconds}, {"run_dir", job_dir}, {"tags", job.tags}};
  std::string status;
  if (job.kind == "train") {
    const nlohmann::json summary = read_json_or_null(job_dir + "/summary.json");
    if (summary.is_object()) record["metrics"] = train_metrics(summary);
    const std::string run_status = summary.is_object() ? summary.value("status", "") : "";
    status = child.exit_code == 0 ? "ok" : run_status == "diverged" ? "diverged" : "failed";
    if (status == "ok" && !child.timed_out && speed_rounds > 0 && !*stop_requested) {
      nlohmann::json& metrics = record["metrics"];
      if (!time_train_job(job, job_dir, speed_rounds, metrics, stop_requested)) {
        metrics.erase("bench_rounds");
        metrics.erase("bench_samples_per_sec");
      }
    }
  } else {
    const nlohmann::json compare = read_json_or_null(job_dir + "/compare.json");
    std::string damaged;
    if (compare.is_object() && child.exit_code != 2) record["metrics"] = ab_metrics(compare, damaged);
    status = child.exit_code == 0 ? "ok" : child.exit_code == kExitVerdictFailed ? "verdict_fail" : "failed";
    if (!damaged.empty()) {
      status = "failed";
      record["reason"] = job_dir + "/compare.json: " + damaged;
    }
  }
  if (child.timed_out) status = "timeout";
  record["status"] = status;
  record["load"] = load.measure(std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  if (status != "ok" && !record.contains("reason")) {
    record["reason"] = child.timed_out ? fmt::format("stopped at its time budget of {:.0f} s", job.time_budget_sec)
                                       : failure_reason(options.log_path);
  }
  return record;
}

}  // namespace mpt::nightly
