// The training loop, as torchtitan's: take a step (train_step.h), record what it did, then let each component decide
// whether its time has come - the metrics window logs, the evaluator evaluates, the checkpointer saves - until the
// run's length, a stop (a signal, or debug.stop_after_steps) or divergence.
#pragma once

#include <spdlog/spdlog.h>

#include <atomic>
#include <memory>
#include <optional>
#include <string>

#include "distributed/process_group.h"
#include "train/checkpointer.h"
#include "train/evaluate.h"
#include "train/events.h"
#include "train/metrics_window.h"
#include "train/train_step.h"

namespace mpt::train {

struct TrainResult {
  std::string status = "completed";  // completed | diverged | interrupted | failed (ranks disagree)
  std::string diagnosis;
  int64_t steps = 0;
  int64_t skipped_steps = 0;
  std::optional<EvalMetrics> eval;
  double train_loss = 0.0;  // over the last complete epoch (or the partial one if none completed)
  double train_accuracy = 0.0;
  precision::LossScaleState scaler;
  int64_t samples_trained = 0;  // in this invocation, by all ranks together
  double train_time_sec = 0.0;  // sum of step times in this invocation (no eval, no checkpoints)
  double median_step_ms = 0.0;
  double p90_step_ms = 0.0;
  std::string resumed_from;  // the checkpoint this invocation resumed from, if any
  // Data parallelism: whether every rank ended with the same weights, loss scale and step counts, and if not,
  // what differed (checked once at the end).
  bool ranks_agree = true;
  std::string ranks_disagreement;
};

// The components the loop calls, each deciding its own timing; the run's wiring owns them.
struct LoopParts {
  MetricsWindow& metrics;
  Evaluator& evaluator;
  Checkpointer& checkpointer;
  RunSinks sinks;
};

class Trainer {
 public:
  Trainer(const TrainConfig& config, TrainStep& step, LoopParts parts, distributed::Group& group);
  TrainResult run(const std::atomic<bool>& stop_requested);

 private:
  StepResult take_step(bool stop_requested);
  void record(const StepResult& taken);
  bool diverged(const StepResult& taken);
  std::string stop_reason(const std::atomic<bool>& stop_requested) const;
  void check_most_steps_trained(int64_t steps_taken);
  void finish(const std::vector<double>& step_seconds);
  void check_ranks_agree();

  TrainConfig config_;
  TrainStep& step_;
  LoopParts parts_;
  distributed::Group& group_;
  TrainResult result_;
  std::optional<precision::NonfiniteActivation> first_activation_;
  std::vector<precision::NonfiniteGrad> last_culprits_;
  bool stop_agreed_ = false;  // data parallelism: some rank was asked to stop; all stop after this step
  int64_t skipped_at_start_ = 0;
};

}  // namespace mpt::train
