// `mpt bench SPEC [key=value ...]`: measure a spec's training step; `--max-batch` finds the largest batch that
// fits a memory budget in FP32 and in mixed precision (app/max_batch.h).
#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <iostream>

#include "app/commands.h"
#include "app/max_batch.h"
#include "common/error.h"
#include "common/files.h"
#include "common/process.h"
#include "config/load.h"
#include "hardware/hardware.h"
#include "run/resolve.h"
#include "bench/benchmark.h"

namespace mpt::app {

int run_bench(const BenchOptions& options) {
  run::ExperimentConfig c = run::read_sections(run::load_resolved_spec(options.spec_path, options.overrides));
  if (options.max_batch) {
    const int64_t budget = options.memory_budget_mib * 1024 * 1024;
    // The mixed mode to compare with: the spec's own, or what "mixed" resolves to on this device.
    const precision::Mode mode = c.precision.mode != precision::Mode::kFp32
                                     ? c.precision.mode
                                     : precision::choose_mixed(c.device.type == "cuda", hardware::probe()).value;
    const std::string mixed = precision::mode_name(mode);
    nlohmann::json trials = nlohmann::json::array();
    const int64_t fp32 = largest_batch(options.spec_path, options.overrides, "fp32", c.data.batch_size, budget, trials);
    const int64_t low = largest_batch(options.spec_path, options.overrides, mixed, c.data.batch_size, budget, trials);
    const nlohmann::json report = {{"memory_budget_bytes", budget},
                                   {"max_batch", {{"fp32", fp32}, {mixed, low}}},
                                   {"ratio", fp32 > 0 ? static_cast<double>(low) / fp32 : 0.0},
                                   {"trials", trials}};
    if (options.json)
      std::cout << report.dump(2) << "\n";
    else
      std::cout << fmt::format("largest batch within {} MiB: fp32 {}, {} {} ({:.2f}x)\n", options.memory_budget_mib,
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
    if (options.json)
      std::cout << bench::to_json(loader).dump(2) << "\n";
    else
      std::cout << fmt::format(
          "data loader ({} data, batch {}, delivered to {}): {:.0f} samples/s, median {:.3f} "
          "ms per batch\n",
          loader.real_data ? "real" : "synthetic", loader.batch, loader.device, loader.samples_per_sec,
          loader.median_batch_ms);
    return kExitOk;
  }
  const bench::BenchResult result = bench::run_benchmark(c, bench_options);
  const nlohmann::json json = bench::to_json(result);
  if (!options.json_out.empty()) write_file_atomically(options.json_out, json.dump(2) + "\n");
  if (options.json)
    std::cout << json.dump(2) << "\n";
  else if (options.json_out.empty())
    std::cout << bench::render_table(result);
  return kExitOk;
}

}  // namespace mpt::app
