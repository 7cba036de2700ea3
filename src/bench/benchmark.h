// `mpt bench`: the training step a spec describes, measured without disk I/O in the way (synthetic batches of
// the spec's shape unless real data is asked for): warm-up, timed steps, a per-phase breakdown, achieved
// FLOP/s and MFU against this machine's measured GEMM peak, peak memory, threads and BLAS.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "models/tensor_core_shapes.h"
#include "run/sections.h"
#include "bench/op_profile.h"
#include "train/trainer.h"

namespace mpt::bench {

struct BenchOptions {
  int64_t steps = 30;
  int64_t warmup = 5;
  bool real_data = false;
  bool measure_peak = true;  // the GEMM probe (about a second); max-batch trials only need memory
  int64_t profile_ops = 0;   // > 0: run the timed steps under LibTorch's profiler and report this many top ops
};

struct BenchResult {
  std::string model, precision, strategy, device, blas, allocator;
  int threads = 1;
  bool real_data = false;
  int64_t batch = 0;
  int64_t steps = 0;
  double samples_per_sec = 0.0;
  double median_step_ms = 0.0;
  double p90_step_ms = 0.0;
  train::StepPhases phases_ms;          // mean milliseconds per timed step
  double train_flops_per_sample = 0.0;  // 6 x forward MACs (2 FLOPs per MAC, backward twice the forward)
  double achieved_flops = 0.0;
  std::string peak_dtype;
  int64_t gemm_n = 0;       // the probe's n x n x n matmul: up to 2048 on the CPU, 8192 on a GPU
  double peak_flops = 0.0;  // measured GEMM in peak_dtype
  double mfu = 0.0;
  int64_t peak_memory_bytes = 0;     // the training stack and its steps (hardware::MemoryPeaks), before the GEMM probe
  std::string peak_memory_kind;      // "RSS above the baseline" or "CUDA allocator"
  int64_t resident_peak_bytes = -1;  // the process's peak resident memory over those steps, as the OS saw it
  std::vector<OpTime> ops;           // calls and times per timed step, largest self time first; only with profile_ops
  models::TensorCoreShapes tensor_cores;  // on CUDA: the GEMM and convolution sizes off the Tensor Core multiple
};

// `c` is a resolved spec's config; its data.batch_size is the batch measured.
BenchResult run_benchmark(run::ExperimentConfig c, const BenchOptions& options);

// The data loader alone, to compare with what the model consumes: each batch normalised, resized and delivered
// where training receives it (on a GPU the copy and the on-device finishing count).
struct LoaderResult {
  std::string device;  // where the batches were delivered: finished there, as training receives them
  bool real_data = false;
  int64_t batch = 0;
  int64_t batches = 0;
  double samples_per_sec = 0.0;
  double median_batch_ms = 0.0;
};
LoaderResult run_loader_benchmark(const run::ExperimentConfig& c, const BenchOptions& options);
nlohmann::json to_json(const LoaderResult& result);

nlohmann::json to_json(const BenchResult& result);
std::string render_table(const BenchResult& result);

}  // namespace mpt::bench
