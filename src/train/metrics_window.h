// The run's running metrics: the train line every train.log_every_steps (one host read of the device-side sums,
// all-reduced under data parallelism), the live progress line between them, and the train loss and accuracy of
// the last complete epoch for the summary. It decides its own cadence.
#pragma once

#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <limits>
#include <memory>

#include "common/files.h"
#include "distributed/process_group.h"
#include "io/log.h"
#include "io/tensorboard.h"
#include "precision/recipe.h"
#include "train/checkpointer.h"
#include "train/events.h"
#include "train/train_config.h"
#include "train/train_step.h"

namespace mpt::train {

// Where a run's outputs go; owned by the command wiring.
struct RunSinks {
  JsonlWriter& metrics;
  EventLog& events;
  std::shared_ptr<spdlog::logger> logger;
  io::Progress& progress;
  io::TensorBoardWriter& tensorboard;
};

class MetricsWindow : public MicroBatchObserver, public LoggedAcrossResume {
 public:
  MetricsWindow(const TrainConfig& config, RunSinks sinks, distributed::Group& group, torch::Device device);

  void add(const MicroBatchStats& stats) override;
  // After each step that took `seconds`: the metrics line when one is due (or at the last step), and the live line.
  void after_step(const TrainStep& step, double seconds);
  // The train loss and accuracy of the last complete epoch, else of the partial one (syncs).
  std::pair<double, double> epoch_loss_and_accuracy();
  int64_t samples_trained() const { return samples_trained_; }  // in this invocation, by all ranks together
  // The window's and the epoch's sums over every rank (collective) and the GEMM format's report state; restored on
  // rank 0 (the other ranks start from zero sums, which the next all-reduce adds to).
  io::NamedTensors logging_state(TrainStep& step) override;
  void restore_logging(const io::NamedTensors& saved, TrainStep& step) override;

 private:
  void log(const TrainStep& step);
  void log_gemm_scales(const TrainStep& step, nlohmann::json& line);
  io::ProgressLine progress_line(const TrainStep& step) const;
  void sum_across_ranks(std::vector<torch::Tensor> sums, int64_t& predictions, int64_t& samples);

  struct Sums {
    torch::Tensor loss, correct;  // double, on the device
    int64_t predictions = 0, samples = 0;
  };
  TrainConfig config_;
  RunSinks sinks_;
  distributed::Group& group_;
  Sums window_, epoch_;
  int64_t window_steps_ = 0, samples_trained_ = 0;
  double window_seconds_ = 0.0;  // step time since the last log line: the live line's rate and ETA
  // As of the last log line; the loss is NaN until the first (the live line shows "-").
  double last_loss_ = std::numeric_limits<double>::quiet_NaN(), samples_per_sec_ = 0.0, seconds_per_step_ = 0.0;
  std::optional<std::pair<double, double>> closed_epoch_;  // loss and accuracy
};

}  // namespace mpt::train
