// `mpt bench SPEC [key=value ...]`: measure a spec's training step; `--max-batch` finds the largest batch that
// fits a memory budget in FP32 and in mixed precision, each trial a child process (peak RSS is per process).
#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <iostream>

#include "app/commands.h"
#include "common/error.h"
#include "common/files.h"
#include "common/process.h"
#include "config/load.h"
#include "device/hardware.h"
#include "run/resolve.h"
#include "tools/bench/benchmark.h"

namespace mpt::app {
namespace {

// Peak memory of a short bench at `batch` in `mode`, or -1 when the trial failed (out of memory, killed).
int64_t trial_peak_memory(const BenchOptions& options, const std::string& mode, int64_t batch) {
  const std::string out = fmt::format("{}/mpt-max-batch-{}.json", std::filesystem::temp_directory_path().string(), ::getpid());
  std::vector<std::string> args = {process::self_executable(), "bench", options.spec_path};
  args.insert(args.end(), options.overrides.begin(), options.overrides.end());
  args.insert(args.end(), {fmt::format("data.batch_size={}", batch), "precision.mode=" + mode, "--steps", "2",
                           "--warmup", "1", "--no-peak", "--json-out", out});
  process::ChildOptions child;
  child.log_path = "/dev/null";
  if (process::run_child(args, child).exit_code != 0) return -1;
  const auto json = nlohmann::json::parse(read_file(out), nullptr, false);
  std::filesystem::remove(out);
  return json.is_object() ? json.value("peak_memory_bytes", int64_t{-1}) : -1;
}

// The largest batch (a multiple of `granularity`) whose trial stays within the budget: doubling, then bisection.
int64_t max_batch(const BenchOptions& options, const std::string& mode, int64_t start, int64_t budget,
                  nlohmann::json& trials) {
  auto fits = [&](int64_t batch) {
    const int64_t peak = trial_peak_memory(options, mode, batch);
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

}  // namespace

int run_bench(const BenchOptions& options) {
  run::ExperimentConfig c = run::read_sections(run::load_resolved_spec(options.spec_path, options.overrides));
  if (options.max_batch) {
    const int64_t budget = options.memory_budget_mib * 1024 * 1024;
    // The mixed mode to compare with: the spec's own, or what "mixed" resolves to on this device.
    const std::string mixed = c.precision.mode != "fp32"
                                  ? c.precision.mode
                                  : run::choose_mixed(c.device, run::probe_hardware()).mode;
    if (mixed.empty()) throw UsageError("--max-batch: no mixed precision is available on " + c.device);
    nlohmann::json trials = nlohmann::json::array();
    const int64_t fp32 = max_batch(options, "fp32", c.data.batch_size, budget, trials);
    const int64_t low = max_batch(options, mixed, c.data.batch_size, budget, trials);
    const nlohmann::json report = {{"memory_budget_bytes", budget},
                                   {"max_batch", {{"fp32", fp32}, {mixed, low}}},
                                   {"ratio", fp32 > 0 ? static_cast<double>(low) / fp32 : 0.0},
                                   {"trials", trials}};
    if (options.json) std::cout << report.dump(2) << "\n";
    else std::cout << fmt::format("largest batch within {} MiB: fp32 {}, {} {} ({:.2f}x)\n", options.memory_budget_mib,
                                  fp32, mixed, low, fp32 > 0 ? static_cast<double>(low) / fp32 : 0.0);
    return kExitOk;
  }

  bench::BenchOptions bench_options;
  bench_options.steps = options.steps;
  bench_options.warmup = options.warmup;
  bench_options.real_data = options.real_data;
  bench_options.measure_peak = options.measure_peak;
  bench_options.profile_ops = options.profile_ops;
  if (options.loader_only) {
    const bench::LoaderResult loader = bench::run_loader_benchmark(c, bench_options);
    if (options.json) std::cout << bench::to_json(loader).dump(2) << "\n";
    else std::cout << fmt::format("data loader ({} data, batch {}, delivered to {}): {:.0f} samples/s, median {:.3f} "
                                  "ms per batch\n", loader.real_data ? "real" : "synthetic", loader.batch,
                                  loader.device, loader.samples_per_sec, loader.median_batch_ms);
    return kExitOk;
  }
  const bench::BenchResult result = bench::run_benchmark(c, bench_options);
  const nlohmann::json json = bench::to_json(result);
  if (!options.json_out.empty()) write_file_atomically(options.json_out, json.dump(2) + "\n");
  if (options.json) std::cout << json.dump(2) << "\n";
  else if (options.json_out.empty()) std::cout << bench::render_table(result);
  return kExitOk;
}

}  // namespace mpt::app
