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
    throw Error(fmt::format("cannot append to {}: {}{}", path, std::strerror(error),
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
  if (!record.contains("metrics") || !record["metrics"].contains(key) || !record["metrics"][key].is_number()) return NAN;
  return record["metrics"][key].get<double>();
}

// The share of the CPUs other work used while the job ran (NaN when not recorded).
double other_cpu(const nlohmann::json& record) {
  if (!record.contains("load") || !record["load"].is_object()) return NAN;
  const auto& load = record["load"];
  return load.contains("other_cpu") && load["other_cpu"].is_number() ? load["other_cpu"].get<double>() : NAN;
}

}  // namespace

std::vector<std::string> find_regressions(const nlohmann::json& current, const std::vector<nlohmann::json>& history,
                                          const RegressionRules& rules, std::vector<std::string>* notes) {
  auto loaded = [&](const nlohmann::json& record) { return other_cpu(record) > rules.max_other_cpu; };
  const std::string job = current.value("job", ""), night = current.value("night", "");
  const std::string status = current.value("status", "");
  std::vector<const nlohmann::json*> previous, baseline;
  for (const auto& record : history)
    if (record.value("job", "") == job && record.value("night", "") != night) previous.push_back(&record);
  for (auto it = previous.rbegin(); it != previous.rend() && static_cast<int>(baseline.size()) < rules.window; ++it)
    if ((*it)->value("status", "") == "ok") baseline.push_back(*it);

  std::vector<std::string> regressions;
  const std::string last_status = previous.empty() ? "" : previous.back()->value("status", "");
  if (status == "diverged" && last_status != "diverged")
    regressions.push_back("new divergence (the last night's run " + (last_status.empty() ? std::string("did not exist") : "was " + last_status) + ")");
  if (status == "verdict_fail" && last_status != "verdict_fail")
    regressions.push_back("the A/B verdict turned to FAIL (last night: " + (last_status.empty() ? std::string("none") : last_status) + ")");
  if (status != "ok" || baseline.empty()) return regressions;

  const bool ab = current.value("kind", "") == "ab_compare";
  const char* throughput_key = ab ? "speedup" : "samples_per_sec";
  const char* accuracy_key = ab ? "b_accuracy" : "accuracy";
  size_t nights_used = 0;  // by the last baseline_median
  // The median of `key` over the last rules.window good nights (for throughput, good and not busy).
  auto baseline_median = [&](const char* key, bool skip_loaded) {
    std::vector<double> values;
    for (auto it = previous.rbegin(); it != previous.rend() && static_cast<int>(values.size()) < rules.window; ++it)
      if (double v = metric(**it, key); (*it)->value("status", "") == "ok" && std::isfinite(v) &&
                                         !(skip_loaded && loaded(**it)))
        values.push_back(v);
    nights_used = values.size();
    return values.empty() ? NAN : median(values);
  };
  const double throughput = metric(current, throughput_key);
  const double usual_throughput = baseline_median(throughput_key, /*skip_loaded=*/true);
  if (loaded(current)) {
    if (notes)
      notes->push_back(fmt::format("{} not judged: other work used {:.0f}% of the machine's CPUs during the job "
                                   "(allowed {:.0f}%)", throughput_key, 100 * other_cpu(current),
                                   100 * rules.max_other_cpu));
  } else if (std::isfinite(throughput) && usual_throughput > 0 &&
             throughput < usual_throughput * (1.0 - rules.throughput_drop))
    regressions.push_back(fmt::format("{} {:.4g} is {:.1f}% below the median {:.4g} of the last {} good night(s) "
                                      "(allowed: {:.1f}%)", throughput_key, throughput,
                                      100 * (1 - throughput / usual_throughput), usual_throughput, nights_used,
                                      100 * rules.throughput_drop));
  const double accuracy = metric(current, accuracy_key), usual_accuracy = baseline_median(accuracy_key, false);
  if (std::isfinite(accuracy) && std::isfinite(usual_accuracy) && usual_accuracy - accuracy > rules.accuracy_drop)
    regressions.push_back(fmt::format("{} {:.4f} is {:.2f} points below the median {:.4f} of the last {} good "
                                      "night(s) (allowed: {:.2f})", accuracy_key, accuracy,
                                      100 * (usual_accuracy - accuracy), usual_accuracy, nights_used,
                                      100 * rules.accuracy_drop));
  return regressions;
}

}  // namespace mpt::nightly
