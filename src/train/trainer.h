// The training loop: one optimizer step = micro-batches forward under autocast, FP32 loss, scaled backward,
// then the backward finished in one place (precision/finish_backward.h: unscale, non-finite check, clip, scale
// update), then either skip (no optimizer or schedule step) or the optimizer step on FP32 weights and the
// schedule's advance; then the loss-scale event.
#pragma once

#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <atomic>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/files.h"
#include "data/loader.h"
#include "device/memory_peak.h"
#include "dist/gradient_averager.h"
#include "dist/process_group.h"
#include "io/checkpoint.h"
#include "io/log.h"
#include "io/tensorboard.h"
#include "models/model.h"
#include "precision/diagnosis.h"
#include "precision/finish_backward.h"
#include "precision/fp8.h"
#include "precision/loss_scaler.h"
#include "precision/master_weights.h"
#include "precision/numerics.h"
#include "train/evaluate.h"
#include "train/events.h"
#include "train/rehearsal.h"
#include "train/schedule.h"
#include "train/step_phases.h"
#include "train/train_config.h"

namespace mpt::train {

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
  JsonlWriter& metrics;
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
  // Whether the layer holding a parameter (by name) computes in FP32: the diverged advice's check.
  std::function<bool(const std::string&)> computes_in_fp32;
  precision::Fp8Training* fp8 = nullptr;               // precision.mode fp8; null otherwise
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
  // Told when evaluations and checkpoint writes run, so that each phase keeps its own peak.
  void attach_memory(hardware::MemoryPeaks* memory) { memory_ = memory; }

 private:
  void clear_gradients();
  void forward_backward(int64_t step, PhaseClock& clock);
  bool takes_one_pass_step() const;
  NamedTensors gradient_holders(bool one_pass) const;
  std::vector<torch::Tensor> gradients(bool one_pass) const;
  void apply_update(const precision::FinishedBackward& finished, bool one_pass);
  void record_skip(int64_t step, const precision::FinishedBackward& finished, bool one_pass);
  void record_scale_change(int64_t step, const precision::ScaleUpdate& update);
  void log_window();
  void log_fp8_scales(nlohmann::json& line);
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
  precision::Fp8Training* fp8_;
  std::function<bool(const std::string&)> computes_in_fp32_;
  torch::Device device_;
  data::BatchLoader& train_loader_;
  const data::Dataset& test_set_;
  RunSinks sinks_;
  io::ModelTensors weights_;              // FP32: what the optimizer updates and checkpoints hold
  std::vector<torch::Tensor> parameters_;  // weights_.parameters' values
  std::vector<torch::Tensor> model_parameters_;
  std::vector<precision::MasterPair> masters_;  // each weight with the model parameter that holds its gradient
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
  hardware::MemoryPeaks* memory_ = nullptr;
  dist::Group single_process_;
  dist::Group* group_;
  std::unique_ptr<dist::GradientAverager> averager_;
  Rehearsal rehearsal_;
  precision::BackwardFinisher finisher_;
  const std::atomic<bool>* stop_requested_ = nullptr;  // set by run()
  bool stop_agreed_ = false;  // data parallelism: some rank was asked to stop; all stop after this step
};

}  // namespace mpt::train
