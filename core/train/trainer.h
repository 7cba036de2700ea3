// The training loop: one optimizer step = micro-batches forward under autocast, FP32 loss, scaled backward,
// then one unscale + non-finite check, then either skip (no optimizer or schedule step, scale backoff) or
// clip -> optimizer step on FP32 weights -> schedule advance; then the scaler update and its events.
#pragma once

#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <atomic>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/common/memory_peak.h"
#include "core/data/loader.h"
#include "core/dist/gradient_averager.h"
#include "core/dist/process_group.h"
#include "core/io/checkpoint.h"
#include "core/io/files.h"
#include "core/io/log.h"
#include "core/io/tensorboard.h"
#include "core/precision/diagnosis.h"
#include "core/precision/loss_scaler.h"
#include "core/precision/master_weights.h"
#include "core/precision/numerics.h"
#include "core/train/evaluate.h"
#include "core/train/events.h"
#include "core/train/schedule.h"
#include "models/model.h"

namespace mpt::train {

struct TrainConfig {
  int64_t total_steps = 1;
  int64_t log_every_steps = 50;
  int64_t eval_every_steps = 0;  // 0: only at the end
  double grad_clip_norm = 0.0;   // 0: off
  int64_t grad_accum_steps = 1;
  int64_t checkpoint_every_steps = 0;
  int64_t max_consecutive_skips = 100;
  int64_t eval_batch_size = 1000;
  std::vector<int64_t> inject_nonfinite_grad_at;
  std::string inject_nonfinite_param;  // "" = the first parameter
  int64_t inject_nonfinite_rank = -1;  // data parallelism: only this rank injects (-1 = every rank)
  int64_t die_at_step = 0;             // data parallelism rehearsal: the last rank dies abruptly here (0 = off)
  double bucket_mb = 25.0;             // gradient all-reduce bucket size
  int64_t stop_after_steps = 0;        // 0: off
  bool forbid_host_syncs = false;      // on a GPU, any host sync in a step but the overflow check is an error
};

struct TrainResult {
  std::string status = "completed";  // completed | diverged | interrupted
  std::string diagnosis;
  int64_t steps = 0;
  int64_t skipped_steps = 0;
  std::optional<EvalMetrics> eval;
  double train_loss = 0.0;      // over the last complete epoch (or the partial one if none completed)
  double train_accuracy = 0.0;
  precision::LossScaleState scaler;
  int64_t samples_trained = 0;  // in this invocation, by all ranks together
  double train_time_sec = 0.0;  // sum of step times in this invocation (no eval, no checkpoints)
  double median_step_ms = 0.0;
  double p90_step_ms = 0.0;
  std::string resumed_from;
  // Data parallelism: whether every rank ended with the same weights, loss scale and step counts, and if not,
  // what differed (checked once at the end).
  bool ranks_agree = true;
  std::string ranks_disagreement;
};

// Where a run's outputs go; owned by the command wiring.
struct RunSinks {
  io::JsonlWriter& metrics;
  EventLog& events;
  std::shared_ptr<spdlog::logger> logger;
  io::CheckpointStore* checkpoints;  // null on ranks other than 0: rank 0 alone writes checkpoints
  io::Progress& progress;
  io::TensorBoardWriter& tensorboard;
};

// The precision machinery a run trains with; the wiring owns the pointed-to parts.
struct PrecisionRuntime {
  precision::LossScaler scaler;
  torch::ScalarType compute_dtype = torch::kFloat;
  precision::MasterWeights* master_weights = nullptr;  // the master_weights strategy; null under autocast
  precision::NumericsMonitor* numerics = nullptr;      // debug.check_numerics; null when off
};

// Wall time per phase of the optimizer step, accumulated when attached (mpt bench). On CUDA every phase
// boundary synchronizes the device, so attach it only to measure.
struct StepPhases {
  double data = 0.0;       // next batch from the loader, host -> device
  double forward = 0.0;    // forward under autocast and the FP32 loss
  double backward = 0.0;   // scaled backward
  double scaler = 0.0;     // master-grad copies, unscale + non-finite check, scale update
  double optimizer = 0.0;  // clipping, the optimizer step, master -> model copies
  int64_t steps = 0;

  double total() const { return data + forward + backward + scaler + optimizer; }
};

class Trainer {
 public:
  // `optimizer` must own the FP32 weights: the model's parameters, or the masters under master_weights.
  // `group` (null: one process) makes it data-parallel: `train_loader` must then read this rank's shard.
  Trainer(TrainConfig config, ScheduleConfig schedule, models::Model model,
          std::unique_ptr<torch::optim::Optimizer> optimizer, PrecisionRuntime precision, torch::Device device,
          data::BatchLoader& train_loader, const data::Dataset& test_set, RunSinks sinks,
          dist::Group* group = nullptr);

  void resume(const std::string& checkpoint_path);
  int64_t step() const { return state_.step; }
  TrainResult run(const std::atomic<bool>& stop_requested);

  // Runs one optimizer step: applied, or skipped on non-finite gradients. run() calls it; mpt bench drives it.
  void step_once();
  // Accumulate per-phase times into `phases` (null: stop).
  void attach_profile(StepPhases* phases) { profile_ = phases; }
  // Paused around evaluations and checkpoint writes, so that it measures the training steps alone.
  void attach_memory(hardware::MemoryPeak* memory) { memory_ = memory; }

 private:
  void log_window();
  io::ProgressLine progress_line() const;
  void evaluate_now();
  void save_checkpoint();
  void close_epoch_if_done(int64_t epoch_before);
  void sum_across_ranks(std::vector<torch::Tensor> sums, int64_t& predictions, int64_t& samples);
  void check_ranks_agree();

  TrainConfig config_;
  ScheduleConfig schedule_;
  models::Model model_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  precision::LossScaler scaler_;
  torch::ScalarType compute_dtype_;
  precision::MasterWeights* master_weights_;
  precision::NumericsMonitor* numerics_;
  torch::Device device_;
  data::BatchLoader& train_loader_;
  const data::Dataset& test_set_;
  RunSinks sinks_;
  io::ModelTensors weights_;              // FP32: what the optimizer updates and checkpoints hold
  std::vector<torch::Tensor> parameters_;  // weights_.parameters' values
  std::vector<torch::Tensor> model_parameters_;
  std::vector<precision::MasterPair> masters_;  // each weight with the model parameter that holds its gradient
  std::string inject_name_;  // debug.inject_nonfinite_param, or the first parameter
  std::vector<precision::NonfiniteGrad> last_culprits_;
  std::optional<precision::NonfiniteActivation> last_activation_;

  io::TrainingState state_;
  TrainResult result_;
  double current_lr_ = 0.0;
  // As of the last log line; the loss is NaN until the first (the live line shows "-").
  double last_loss_ = std::numeric_limits<double>::quiet_NaN(), samples_per_sec_ = 0.0, seconds_per_step_ = 0.0;
  double window_seconds_ = 0.0;  // step time since the last log line: the live line's rate and ETA
  torch::Tensor last_grad_norm_;  // of the last applied step, before clipping; on the device, read when logging
  int64_t consecutive_skips_ = 0;
  // Device-side running sums, read on the host only when logging or at epoch ends.
  torch::Tensor window_loss_, window_correct_, epoch_loss_, epoch_correct_;
  int64_t window_steps_ = 0, window_samples_ = 0, epoch_samples_ = 0;
  int64_t window_predictions_ = 0, epoch_predictions_ = 0;  // samples, or masked tokens under masked-LM
  bool epoch_closed_ = false;
  StepPhases* profile_ = nullptr;
  hardware::MemoryPeak* memory_ = nullptr;
  dist::Group single_process_;
  dist::Group* group_;
  std::unique_ptr<dist::GradientAverager> averager_;
  const std::atomic<bool>* stop_requested_ = nullptr;  // set by run()
  bool stop_agreed_ = false;  // data parallelism: some rank was asked to stop; all stop after this step
};

}  // namespace mpt::train
