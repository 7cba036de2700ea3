// History file and regression detection.
#include "tools/nightly/history.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "common/error.h"
#include "common/files.h"

namespace mpt::nightly {

void append_history(const std::string& path, const nlohmann::json& record) {
  const std::string line = record.dump() + "\n";
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) throw Error(fmt::format("cannot open {}: {}", path, std::strerror(errno)));
  struct stat before {};
  ::fstat(fd, &before);
  // One write of the whole line: concurrent readers see either nothing or all of it.
  const ssize_t written = ::write(fd, line.data(), line.size());
  const int write_error = errno;
  const bool ok = written == static_cast<ssize_t>(line.size()) && ::fsync(fd) == 0;
  if (!ok) {
    const int error = written < 0 ? write_error : (written == static_cast<ssize_t>(line.size()) ? errno : ENOSPC);
    const bool restored = ::ftruncate(fd, before.st_size) == 0;
    ::close(fd);
    throw Error(
        fmt::format("cannot append to {}: {}{}", path, std::strerror(error),
                    restored ? " (the history is as it was before)" : " (and cutting back the partial line failed)"));
  }
  ::close(fd);
}

std::vector<nlohmann::json> read_history(const std::string& path) {
  if (!std::filesystem::exists(path)) return {};
  return read_jsonl_records(path);
}

double median(std::vector<double> values) {
  if (values.empty()) return NAN;
  std::sort(values.begin(), values.end());
  const size_t mid = values.size() / 2;
  return values.size() % 2 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
}

namespace {

double metric(const nlohmann::json& record, const char* key) {
  if (!record.contains("metrics") || !record["metrics"].contains(key) || !record["metrics"][key].is_number())
    return NAN;
  return record["metrics"][key].get<double>();
}

double number_in(const nlohmann::json& record, const char* object, const char* key) {
  if (!record.contains(object) || !record[object].is_object()) return NAN;
  const auto& node = record[object];
  return node.contains(key) && node[key].is_number() ? node[key].get<double>() : NAN;
}

// The share of the job's own cores that other work took while it ran (NaN when not recorded): what other work used
// beyond the cores the job left idle (cpus - threads). Without the thread count, the job is taken to use every
// core, and this is the share of all CPUs other work used.
double intrusion(const nlohmann::json& record) {
  const double other = number_in(record, "load", "other_cpu"), cpus = number_in(record, "load", "cpus");
  const double threads = number_in(record, "metrics", "threads");
  if (!std::isfinite(other) || !std::isfinite(cpus) || !std::isfinite(threads) || threads <= 0 || threads >= cpus)
    return other;
  return std::max(0.0, other * cpus - (cpus - threads)) / threads;
}

// The same job's records from earlier nights (tonight excluded), oldest first.
std::vector<const nlohmann::json*> earlier_nights(const nlohmann::json& current,
                                                  const std::vector<nlohmann::json>& history) {
  const std::string job = current.value("job", ""), night = current.value("night", "");
  std::vector<const nlohmann::json*> previous;
  for (const auto& record : history)
    if (record.value("job", "") == job && record.value("night", "") != night) previous.push_back(&record);
  return previous;
}

// Whether there is an earlier good night to compare with (never with a window below one night).
bool has_baseline(const std::vector<const nlohmann::json*>& previous, int window) {
  return window > 0 && std::any_of(previous.begin(), previous.end(),
                                   [](const nlohmann::json* record) { return record->value("status", "") == "ok"; });
}

// A run that diverged or failed its verdict tonight, after a night that did not, is a regression of its own.
void judge_status(const std::string& status, const std::string& last_status, std::vector<std::string>& regressions) {
  if (status == "diverged" && last_status != "diverged")
    regressions.push_back("new divergence (the last night's run " +
                          (last_status.empty() ? std::string("did not exist") : "was " + last_status) + ")");
  if (status == "verdict_fail" && last_status != "verdict_fail")
    regressions.push_back("the A/B verdict turned to FAIL (last night: " +
                          (last_status.empty() ? std::string("none") : last_status) + ")");
}

// A median over earlier nights, with how many nights it took.
struct Usual {
  double value = NAN;
  size_t nights = 0;
};

// The earlier nights a metric of tonight's record is compared with.
struct Baseline {
  const std::vector<const nlohmann::json*>& previous;
  const RegressionRules& rules;
  double threads;  // tonight's thread count (NaN when not recorded)

  bool loaded(const nlohmann::json& record) const { return intrusion(record) > rules.max_other_cpu; }

  // Throughput compares with nights that ran as many threads (when both recorded): a suite that moves to fewer
  // threads on a busy machine starts a new baseline.
  bool same_threads(const nlohmann::json& record) const {
    const double theirs = metric(record, "threads");
    return !std::isfinite(threads) || !std::isfinite(theirs) || theirs == threads;
  }

  // The median of `key` over the last rules.window good nights (for throughput, good, not busy, same threads).
  Usual median_of(const char* key, bool for_throughput) const {
    std::vector<double> values;
    for (auto it = previous.rbegin(); it != previous.rend() && static_cast<int>(values.size()) < rules.window; ++it)
      if (double v = metric(**it, key); (*it)->value("status", "") == "ok" && std::isfinite(v) &&
                                        !(for_throughput && (loaded(**it) || !same_threads(**it))))
        values.push_back(v);
    return {values.empty() ? NAN : median(values), values.size()};
  }
};

void judge_throughput(const nlohmann::json& current, const Baseline& baseline, bool ab,
                      std::vector<std::string>& regressions, std::vector<std::string>* notes,
                      std::string* throughput_flagged) {
  const RegressionRules& rules = baseline.rules;
  const char* throughput_key = ab ? "speedup" : "samples_per_sec";
  Usual usual;
  // A train job's throughput is its bench rounds' median when tonight and earlier nights were timed so (jobs.h),
  // else the training run's mean.
  if (!ab && std::isfinite(metric(current, "bench_samples_per_sec")) &&
      std::isfinite((usual = baseline.median_of("bench_samples_per_sec", /*for_throughput=*/true)).value))
    throughput_key = "bench_samples_per_sec";
  if (!std::isfinite(usual.value)) usual = baseline.median_of(throughput_key, /*for_throughput=*/true);
  const double throughput = metric(current, throughput_key);
  if (baseline.loaded(current)) {
    if (notes)
      notes->push_back(
          fmt::format("{} not judged: other work took {:.0f}% of the job's cores while it ran (allowed "
                      "{:.0f}%; a job with fewer threads than cores leaves the rest to other work)",
                      throughput_key, 100 * intrusion(current), 100 * rules.max_other_cpu));
  } else if (std::isfinite(throughput) && usual.value > 0 && throughput < usual.value * (1.0 - rules.throughput_drop)) {
    regressions.push_back(
        fmt::format("{} {:.4g} is {:.1f}% below the median {:.4g} of the last {} good night(s) "
                    "(allowed: {:.1f}%)",
                    throughput_key, throughput, 100 * (1 - throughput / usual.value), usual.value, usual.nights,
                    100 * rules.throughput_drop));
    if (throughput_flagged) *throughput_flagged = throughput_key;
  }
}

void judge_accuracy(const nlohmann::json& current, const Baseline& baseline, const char* accuracy_key,
                    std::vector<std::string>& regressions) {
  const RegressionRules& rules = baseline.rules;
  const double accuracy = metric(current, accuracy_key);
  const Usual usual = baseline.median_of(accuracy_key, /*for_throughput=*/false);
  if (std::isfinite(accuracy) && std::isfinite(usual.value) && usual.value - accuracy > rules.accuracy_drop)
    regressions.push_back(fmt::format(
        "{} {:.4f} is {:.2f} points below the median {:.4f} of the last {} good "
        "night(s) (allowed: {:.2f})",
        accuracy_key, accuracy, 100 * (usual.value - accuracy), usual.value, usual.nights, 100 * rules.accuracy_drop));
}

}  // namespace

std::vector<std::string> find_regressions(const nlohmann::json& current, const std::vector<nlohmann::json>& history,
                                          const RegressionRules& rules, std::vector<std::string>* notes,
                                          std::string* throughput_flagged) {
  const std::string status = current.value("status", "");
  const std::vector<const nlohmann::json*> previous = earlier_nights(current, history);

  std::vector<std::string> regressions;
  judge_status(status, previous.empty() ? "" : previous.back()->value("status", ""), regressions);
  if (status != "ok" || !has_baseline(previous, rules.window)) return regressions;

  const bool ab = current.value("kind", "") == "ab_compare";
  const Baseline baseline{previous, rules, metric(current, "threads")};
  judge_throughput(current, baseline, ab, regressions, notes, throughput_flagged);
  judge_accuracy(current, baseline, ab ? "b_accuracy" : "accuracy", regressions);
  return regressions;
}

}  // namespace mpt::nightly
