// The largest batch that fits a memory budget: each trial a short `mpt bench` in a child process, since the peak
// RSS is per process.
#include "app/max_batch.h"

#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <iostream>

#include "common/process.h"

namespace mpt::app {
namespace {

// Peak memory of a short bench at `batch` in `mode`, or -1 when the trial failed (out of memory, killed).
int64_t trial_peak_memory(const std::string& spec_path, const std::vector<std::string>& overrides,
                          const std::string& mode, int64_t batch) {
  const std::string out =
      fmt::format("{}/mpt-max-batch-{}.json", std::filesystem::temp_directory_path().string(), ::getpid());
  std::vector<std::string> trial = overrides;
  trial.insert(trial.end(), {fmt::format("data.batch_size={}", batch), "precision.mode=" + mode});
  process::ChildOptions child;
  child.log_path = "/dev/null";
  const nlohmann::json json =
      process::run_bench(spec_path, trial, {"--steps", "2", "--warmup", "1", "--no-peak"}, out, child).result;
  return json.is_object() ? json.value("peak_memory_bytes", int64_t{-1}) : -1;
}

}  // namespace

int64_t largest_batch(const std::string& spec_path, const std::vector<std::string>& overrides, const std::string& mode,
                      int64_t start, int64_t budget, nlohmann::json& trials) {
  auto fits = [&](int64_t batch) {
    const int64_t peak = trial_peak_memory(spec_path, overrides, mode, batch);
    trials.push_back({{"precision", mode}, {"batch", batch}, {"peak_memory_bytes", peak}});
    std::cerr << fmt::format("max-batch: {} batch {} -> {}\n", mode, batch,
                             peak < 0 ? std::string("failed") : fmt::format("{:.0f} MiB", peak / 1048576.0));
    return peak >= 0 && peak <= budget;
  };
  const int64_t granularity = 8;
  int64_t good = 0, bad = 0;
  for (int64_t batch = std::max<int64_t>(granularity, start);; batch *= 2) {
    if (!fits(batch)) {
      bad = batch;
      break;
    }
    good = batch;
    if (batch >= (1 << 16)) return good;
  }
  while (bad - good > granularity) {
    const int64_t mid = (good + bad) / 2 / granularity * granularity;
    if (mid <= good) break;
    (fits(mid) ? good : bad) = mid;
  }
  return good;
}

}  // namespace mpt::app
