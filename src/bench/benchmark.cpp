// The benchmark loop: the real Trainer's step, driven directly.
#include "bench/benchmark.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <optional>

#include <torch/cuda.h>

#include "common/stats.h"
#include "hardware/hardware.h"
#include "hardware/memory_peak.h"
#include "run/stack.h"
#include "train/step_phases.h"
#include "bench/gemm_peak.h"

namespace mpt::bench {
namespace {

// The resolved spec's device (device.type is cpu or cuda by now).
torch::Device device_of(const run::ExperimentConfig& c) {
  return c.device.type == "cuda" ? torch::Device(torch::kCUDA) : torch::Device(torch::kCPU);
}

// Timed steps: each one's wall time, and the steps' total; on a GPU the last step's kernels belong to the time.
struct Timing {
  std::vector<double> step_ms;
  double total_ms = 0.0;
};

Timing time_steps(train::TrainStep& step, int64_t steps, torch::Device device) {
  Timing timing;
  const auto timed_start = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < steps; ++i) {
    const auto start = std::chrono::steady_clock::now();
    step.run(/*observer=*/nullptr, /*stop_requested=*/false);
    timing.step_ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  if (device.is_cuda()) torch::cuda::synchronize();
  timing.total_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - timed_start).count();
  return timing;
}

// LibTorch's profiler over the timed steps, its counts made per step.
std::vector<OpTime> per_step(std::vector<OpTime> ops, int64_t limit, int64_t steps) {
  if (ops.size() > static_cast<size_t>(limit)) ops.resize(static_cast<size_t>(limit));
  for (OpTime& op : ops) {  // per timed step, as the table and the JSON's ops_per_step say
    op.calls = (op.calls + steps / 2) / steps;
    op.self_ms /= static_cast<double>(steps);
    op.total_ms /= static_cast<double>(steps);
  }
  return ops;
}

void fill_rates(BenchResult& result, const Timing& timing, int64_t macs, const train::StepPhases& phases) {
  const double per_step = 1000.0 / static_cast<double>(std::max<int64_t>(phases.steps, 1));
  result.phases_ms = {phases.data * per_step,   phases.forward * per_step,   phases.backward * per_step,
                      phases.scaler * per_step, phases.optimizer * per_step, phases.steps};
  result.samples_per_sec =
      timing.total_ms > 0 ? static_cast<double>(result.steps * result.batch) / (timing.total_ms / 1000.0) : 0.0;
  result.median_step_ms = percentile(timing.step_ms, 0.5);
  result.p90_step_ms = percentile(timing.step_ms, 0.9);
  result.train_flops_per_sample = 6.0 * static_cast<double>(macs);
  result.achieved_flops = result.train_flops_per_sample * result.samples_per_sec;
}

}  // namespace

BenchResult run_benchmark(run::ExperimentConfig c, const BenchOptions& options) {
  BenchResult result;
  result.threads = hardware::configure_threads(static_cast<int>(c.device.threads));
  result.blas = hardware::blas_description();
  result.allocator = hardware::allocator_description();
  const torch::Device device = device_of(c);
  hardware::configure_cuda_math(device.is_cuda() && c.precision.tf32);
  torch::manual_seed(c.experiment.seed);

  const int64_t batch = c.data.batch_size;
  const int64_t batches = std::clamp<int64_t>(options.warmup + options.steps + 1, 2, 64);
  const data::Dataset train_set =
      options.real_data ? data::load_dataset(c.data, "train") : data::synthetic_dataset(c.data, batches * batch);
  data::BatchLoader loader(train_set, batch, c.data.shuffle, c.experiment.seed, /*drop_last=*/true, data::Shard{},
                           data::Delivery::to(device));
  // On a GPU each phase mark synchronises the device, which would serialise the very steps being timed: there
  // the timed steps run unmarked (keeping the step's one overflow-check sync) and a few extra steps after them
  // give the breakdown. On the CPU a mark costs a clock read, so the timed steps are the profiled ones.
  const bool separate_profile = device.is_cuda();
  const data::SampleShape sample = data::sample_shape(c.data);
  c.train.max_steps = options.warmup + options.steps + (separate_profile ? std::min<int64_t>(options.steps, 10) : 0);
  hardware::MemoryPeaks memory(device);  // as mpt train measures it: the stack and its steps, not the data
  run::TrainingStack stack = run::build_training_stack(c, sample, loader.batches_per_epoch(), device);
  if (device.is_cuda()) result.tensor_cores = models::tensor_core_shapes(*stack.model, c.precision, sample, batch);
  distributed::Group one_process;
  train::TrainStep step = run::make_train_step(stack, c, device, loader, one_process);
  for (int64_t i = 0; i < options.warmup; ++i) step.run(nullptr, false);

  train::StepPhases phases;
  if (!separate_profile) step.attach_profile(&phases);
  std::optional<OpProfiler> profiler;
  if (options.profile_ops > 0) profiler.emplace();
  const Timing timing = time_steps(step, options.steps, device);
  step.attach_profile(nullptr);
  if (profiler) result.ops = per_step(profiler->finish(), options.profile_ops, options.steps);
  if (separate_profile) {  // after the op profiler has finished: its counts are per timed step
    step.attach_profile(&phases);
    time_steps(step, c.train.max_steps - options.warmup - options.steps, device);
    step.attach_profile(nullptr);
  }
  // Before the GEMM probe adds its matrices.
  result.peak_memory_kind = memory.kind();
  result.peak_memory_bytes = memory.bytes(hardware::MemoryPhase::kTraining);
  result.resident_peak_bytes = memory.resident_bytes(hardware::MemoryPhase::kTraining);
  result.model = c.model.name;
  result.precision = precision::mode_name(c.precision.mode);
  result.strategy = precision::strategy_name(c.precision.strategy);
  result.device = c.device.type;
  result.real_data = options.real_data;
  result.batch = stack.global_batch;
  result.steps = options.steps;
  fill_rates(result, timing, stack.model->forward_macs(sample), phases);
  const torch::ScalarType dtype = stack.recipe->compute_dtype();
  result.peak_dtype = dtype == torch::kBFloat16 ? "bf16" : dtype == torch::kHalf ? "fp16" : "fp32";
  // 2048^3 keeps the CPU probe near a second; on a GPU it would take microseconds and measure the launch.
  if (options.measure_peak) {
    const GemmPeak peak = measure_gemm_flops(dtype, device, device.is_cuda() ? 8192 : 2048);
    result.peak_flops = peak.flops;
    result.gemm_n = peak.n;
  }
  result.mfu = result.peak_flops > 0 ? result.achieved_flops / result.peak_flops : 0.0;
  return result;
}

LoaderResult run_loader_benchmark(const run::ExperimentConfig& c, const BenchOptions& options) {
  hardware::configure_threads(static_cast<int>(c.device.threads));
  const int64_t batch = c.data.batch_size;
  const data::Dataset dataset =
      options.real_data ? data::load_dataset(c.data, "train") : data::synthetic_dataset(c.data, 64 * batch);
  // Delivered where training would receive them: on a GPU that includes the copy and the on-device finishing.
  const torch::Device device = device_of(c);
  data::BatchLoader loader(dataset, batch, c.data.shuffle, c.experiment.seed, /*drop_last=*/true, data::Shard{},
                           data::Delivery::to(device));
  for (int64_t i = 0; i < options.warmup; ++i) loader.next();
  if (device.is_cuda()) torch::cuda::synchronize();
  std::vector<double> batch_ms;
  const auto timed_start = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < options.steps; ++i) {
    const auto start = std::chrono::steady_clock::now();
    const data::Batch next = loader.next();
    batch_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  if (device.is_cuda()) torch::cuda::synchronize();  // the last batches' copies and kernels belong to the time
  const double total_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - timed_start).count();
  LoaderResult result;
  result.device = c.device.type;
  result.real_data = options.real_data;
  result.batch = batch;
  result.batches = options.steps;
  result.samples_per_sec = total_ms > 0 ? static_cast<double>(options.steps * batch) / (total_ms / 1000.0) : 0.0;
  result.median_batch_ms = percentile(batch_ms, 0.5);
  return result;
}

nlohmann::json to_json(const LoaderResult& r) {
  return {{"loader_only", true},
          {"device", r.device},
          {"data", r.real_data ? "real" : "synthetic"},
          {"batch", r.batch},
          {"batches", r.batches},
          {"samples_per_sec", r.samples_per_sec},
          {"median_batch_ms", r.median_batch_ms}};
}

nlohmann::json ops_json(const std::vector<OpTime>& ops) {
  nlohmann::json list = nlohmann::json::array();
  for (const OpTime& op : ops)
    list.push_back({{"name", op.name}, {"calls", op.calls}, {"self_ms", op.self_ms}, {"total_ms", op.total_ms}});
  return list;
}

nlohmann::json to_json(const BenchResult& r) {
  return {{"model", r.model},
          {"precision", r.precision},
          {"strategy", r.strategy},
          {"device", r.device},
          {"threads", r.threads},
          {"blas", r.blas},
          {"allocator", r.allocator},
          {"data", r.real_data ? "real" : "synthetic"},
          {"batch", r.batch},
          {"steps", r.steps},
          {"samples_per_sec", r.samples_per_sec},
          {"step_time_ms", {{"median", r.median_step_ms}, {"p90", r.p90_step_ms}}},
          {"breakdown_ms",
           {{"data", r.phases_ms.data},
            {"forward", r.phases_ms.forward},
            {"backward", r.phases_ms.backward},
            {"scaler", r.phases_ms.scaler},
            {"optimizer", r.phases_ms.optimizer}}},
          {"train_flops_per_sample", r.train_flops_per_sample},
          {"achieved_flops", r.achieved_flops},
          {"peak_flops",
           {{"dtype", r.peak_dtype},
            {"gemm_n", r.gemm_n},
            {"flops", r.peak_flops > 0 ? nlohmann::json(r.peak_flops) : nlohmann::json(nullptr)}}},
          {"mfu", r.peak_flops > 0 ? nlohmann::json(r.mfu) : nlohmann::json(nullptr)},
          {"peak_memory_bytes", r.peak_memory_bytes},
          {"peak_memory_kind", r.peak_memory_kind},
          {"resident_peak_bytes",
           {{"training", r.resident_peak_bytes < 0 ? nlohmann::json() : nlohmann::json(r.resident_peak_bytes)}}},
          {"ops_per_step", ops_json(r.ops)},
          {"tensor_cores", models::to_json(r.tensor_cores)}};
}

std::string render_table(const BenchResult& r) {
  const double total = r.phases_ms.total();
  auto share = [&](double ms) { return total > 0 ? 100.0 * ms / total : 0.0; };
  std::string out =
      fmt::format("{} | {} ({}) | {} | batch {} | {} threads | BLAS {} | {} | {} data\n", r.model, r.precision,
                  r.strategy, r.device, r.batch, r.threads, r.blas, r.allocator, r.real_data ? "real" : "synthetic");
  out += fmt::format("  samples/s       {:.1f}\n", r.samples_per_sec);
  out += fmt::format("  step            median {:.2f} ms, p90 {:.2f} ms ({} timed steps)\n", r.median_step_ms,
                     r.p90_step_ms, r.steps);
  out += fmt::format(
      "  breakdown       data {:.2f} ms ({:.0f}%) | forward {:.2f} ({:.0f}%) | backward {:.2f} ({:.0f}%) | "
      "scaler {:.2f} ({:.0f}%) | optimizer {:.2f} ({:.0f}%)\n",
      r.phases_ms.data, share(r.phases_ms.data), r.phases_ms.forward, share(r.phases_ms.forward), r.phases_ms.backward,
      share(r.phases_ms.backward), r.phases_ms.scaler, share(r.phases_ms.scaler), r.phases_ms.optimizer,
      share(r.phases_ms.optimizer));
  out += fmt::format("  compute         {:.3g} GFLOP/sample -> {:.1f} GFLOP/s achieved\n",
                     r.train_flops_per_sample / 1e9, r.achieved_flops / 1e9);
  if (r.peak_flops > 0)
    out += fmt::format("  peak            {:.1f} GFLOP/s ({} GEMM {}^3, measured now) -> MFU {:.1f}%\n",
                       r.peak_flops / 1e9, r.peak_dtype, r.gemm_n, 100.0 * r.mfu);
  else
    out += "  peak            not measured (--no-peak)\n";
  out +=
      fmt::format("  peak memory     {:.0f} MiB ({})\n", r.peak_memory_bytes / (1024.0 * 1024.0), r.peak_memory_kind);
  if (r.resident_peak_bytes >= 0)
    out += fmt::format("  resident peak   {:.0f} MiB (the process, as the OS saw it)\n",
                       r.resident_peak_bytes / (1024.0 * 1024.0));
  if (r.tensor_cores.multiple > 0) out += "  " + models::describe(r.tensor_cores) + "\n";
  if (r.ops.empty()) return out;
  out += "  ops per step    (LibTorch's profiler was on during the timed steps)\n";
  out += fmt::format("    {:>10} {:>6} {:>10} {:>6}  {}\n", "self ms", "share", "total ms", "calls", "op");
  for (const OpTime& op : r.ops)
    out += fmt::format("    {:>10.2f} {:>5.1f}% {:>10.2f} {:>6}  {}\n", op.self_ms, share(op.self_ms), op.total_ms,
                       op.calls, op.name);
  return out;
}

}  // namespace mpt::bench
