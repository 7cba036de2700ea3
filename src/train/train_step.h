// One optimizer step, top to bottom: gradients from every micro-batch (forward under the recipe's autocast, the FP32
// loss, the scaled backward), the update path's gather, the rehearsal hook, the backward finished (unscale, check,
// clip, the loss scale's rule), then the update applied or the step skipped, and the FP8 scales' update. `mpt train`'s
// loop and `mpt bench` drive the same object.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "data/loader.h"
#include "distributed/process_group.h"
#include "io/checkpoint.h"
#include "models/model.h"
#include "precision/diagnosis.h"
#include "precision/numerics.h"
#include "precision/recipe.h"
#include "train/rehearsal.h"
#include "train/schedule.h"
#include "train/step_phases.h"
#include "train/train_config.h"
#include "train/update_path.h"

namespace mpt::train {

// A micro-batch's contribution to the running loss and accuracy: device-side sums, read only at log points.
struct MicroBatchStats {
  torch::Tensor loss_sum;  // double: loss x predictions
  torch::Tensor correct;
  int64_t predictions = 0;  // samples, or masked tokens under masked-LM
  int64_t samples = 0;
  bool ends_epoch = false;  // the last batch of an epoch
};

// Where micro-batch sums go (the metrics window; nothing in mpt bench).
class MicroBatchObserver {
 public:
  virtual ~MicroBatchObserver() = default;
  virtual void add(const MicroBatchStats& stats) = 0;
};

// What a step did, for the loop's events and its divergence check.
struct StepResult {
  int64_t step = 0;  // 1-based
  precision::FinishedBackward finished;
  std::string skip_reason;                                   // on a skip
  std::vector<precision::NonfiniteGrad> culprits;            // on a skip: the first non-finite gradients
  std::optional<precision::NonfiniteActivation> activation;  // debug.check_numerics: the first non-finite output
};

// What a step is built from; the run's wiring (run/stack.h) owns the model's and the recipe's lifetimes.
struct TrainStepParts {
  models::Model model;
  std::unique_ptr<torch::optim::Optimizer> optimizer;
  precision::Recipe& recipe;
  precision::NumericsMonitor* numerics = nullptr;  // debug.check_numerics; null when off
  torch::Device device = torch::kCPU;
  data::BatchLoader& loader;
  distributed::Group& group;
};

class TrainStep {
 public:
  // Chooses the update path once (update_path.h). `group` distributed: the loader must read this rank's shard.
  TrainStep(TrainStepParts parts, const TrainConfig& train, const ScheduleConfig& schedule, const DebugConfig& debug,
            const distributed::DistributedConfig& distributed);

  StepResult run(MicroBatchObserver* observer, bool stop_requested);

  // The counters, data position and loss-scale state a checkpoint keeps, and what it holds beyond them.
  const io::TrainingState& state() const { return state_; }
  io::ModelTensors checkpoint_tensors() const;
  torch::optim::Optimizer& optimizer() { return *optimizer_; }
  // After a checkpoint's load: the counters, the loss scale, the data position and the CPU generator; the masters
  // copied into the model. Returns the loader's new position when the global batch changed (re-sharded).
  std::optional<data::DataPosition> restore(const io::TrainingState& state);

  models::ModelImpl& model() { return *model_; }
  precision::Recipe& recipe() const { return recipe_; }
  const Rehearsal& rehearsal() const { return rehearsal_; }
  UpdatePath& update_path() const { return *path_; }
  double learning_rate() const { return lr_; }
  int64_t consecutive_skips() const { return consecutive_skips_; }
  const torch::Tensor& last_grad_norm() const { return last_grad_norm_; }  // of the last applied step, on the device
  int64_t samples_per_step() const;                                        // by all ranks together
  void attach_profile(StepPhases* phases) { profile_ = phases; }

 private:
  void clear_gradients();
  MicroBatchStats forward_backward(PhaseClock& clock);
  void record_skip(StepResult& result);

  models::Model model_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  precision::Recipe& recipe_;
  precision::NumericsMonitor* numerics_;
  torch::Device device_;
  data::BatchLoader& loader_;
  distributed::Group& group_;
  TrainConfig config_;
  ScheduleConfig schedule_;
  Rehearsal rehearsal_;
  std::unique_ptr<UpdatePath> path_;
  io::TrainingState state_;
  double lr_ = 0.0;
  int64_t consecutive_skips_ = 0;
  torch::Tensor last_grad_norm_;
  StepPhases* profile_ = nullptr;
};

}  // namespace mpt::train
