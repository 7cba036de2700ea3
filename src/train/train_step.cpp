// One optimizer step (see train_step.h). Host syncs are deliberate and few: the update path's overflow verdict
// (the price of skipping bad steps), and a skipped step's diagnosis.
#include "train/train_step.h"

#include <chrono>

#include "hardware/host_syncs.h"
#include "precision/autocast.h"
#include "train/optimizer.h"

namespace mpt::train {

TrainStep::TrainStep(TrainStepParts parts, const TrainConfig& train, const ScheduleConfig& schedule,
                     const DebugConfig& debug, const distributed::DistributedConfig& distributed)
    : model_(std::move(parts.model)),
      optimizer_(std::move(parts.optimizer)),
      recipe_(parts.recipe),
      numerics_(parts.numerics),
      device_(parts.device),
      loader_(parts.loader),
      group_(parts.group),
      config_(train),
      schedule_(schedule),
      rehearsal_(debug, recipe_.weights(), group_.rank(), group_.world_size()),
      path_(choose_update_path(*optimizer_, recipe_, *model_, config_.grad_clip_norm, group_, distributed)) {
  state_.scaler = recipe_.scaler().state();
}

StepResult TrainStep::run(MicroBatchObserver* observer, bool stop_requested) {
  const auto started = std::chrono::steady_clock::now();
  ForbidHostSyncs forbid(rehearsal_.forbids_host_syncs() && device_.is_cuda());
  PhaseClock clock(profile_, device_);
  StepResult result;
  result.step = state_.step + 1;
  clear_gradients();
  for (int64_t micro = 0; micro < config_.grad_accum_steps; ++micro) {
    const MicroBatchStats stats = forward_backward(clock);
    if (observer) observer->add(stats);
  }
  path_->gather();
  rehearsal_.after_backward(result.step, [&] { return path_->gradient_holders(); });
  result.finished = path_->finish(stop_requested);
  clock.mark(&StepPhases::scaler);

  lr_ = train::learning_rate(schedule_, state_.applied_steps);
  state_.step = result.step;
  if (result.finished.skip) {
    record_skip(result);
  } else {
    set_learning_rate(*optimizer_, lr_);
    path_->apply(result.finished);
    ++state_.applied_steps;  // the schedule's clock advances only on applied steps
    consecutive_skips_ = 0;
    if (result.finished.grad_norm.defined()) last_grad_norm_ = result.finished.grad_norm;
  }
  clock.mark(&StepPhases::optimizer);
  recipe_.after_step(group_.distributed() ? group_.agree_max("FP8 amax all-reduce") : nullptr);
  state_.scaler = recipe_.scaler().state();
  state_.data = loader_.position();
  if (numerics_) result.activation = numerics_->take();
  rehearsal_.slow_down(std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  return result;
}

void TrainStep::clear_gradients() {
  for (auto& p : model_->parameters()) p.mutable_grad() = torch::Tensor();  // set_to_none: no zeroing pass
  for (const auto& item : recipe_.weights()) item.value().mutable_grad() = torch::Tensor();
}

MicroBatchStats TrainStep::forward_backward(PhaseClock& clock) {
  const int64_t epoch_before = loader_.position().epoch;
  data::Batch batch = loader_.next();
  // The loader delivers to this device (pinned and non-blocking on a GPU, data::Delivery); `to` is then a no-op.
  const torch::Tensor inputs = batch.inputs.to(device_), targets = batch.targets.to(device_);
  clock.mark(&StepPhases::data);
  models::Prediction prediction;
  {
    precision::AutocastScope autocast(device_.type(), recipe_.compute_dtype());
    prediction = model_->predict(inputs, targets, batch.target_positions);  // (N, K), compute dtype but FP32 islands
  }
  const torch::Tensor logits = prediction.logits.to(torch::kFloat);
  const torch::Tensor loss = torch::nn::functional::cross_entropy(logits, prediction.targets);  // FP32, mean over N
  clock.mark(&StepPhases::forward);
  recipe_.scaler().scale_loss(loss / static_cast<double>(config_.grad_accum_steps)).backward();
  // Loss and accuracy are per prediction (a sample, or a masked token); throughput is per sample. Their argmax
  // is timed with backward, so that the scaler phase times the gradient check and the loss scale alone.
  const int64_t predicted = prediction.targets.size(0);
  MicroBatchStats stats{loss.detach().to(torch::kDouble) * static_cast<double>(predicted),
                        logits.detach().argmax(1).eq(prediction.targets).sum(), predicted, inputs.size(0),
                        loader_.position().epoch != epoch_before};
  clock.mark(&StepPhases::backward);
  return stats;
}

void TrainStep::record_skip(StepResult& result) {
  ++state_.skipped_steps;
  ++consecutive_skips_;
  AllowHostSyncs rare;  // a skipped step's diagnosis reads the gradients
  result.culprits =
      precision::find_nonfinite_grads(path_->gradient_holders(), /*limit=*/3, result.finished.grads_scaled_by);
  result.skip_reason = rehearsal_.injects_at(result.step)
                           ? "injected non-finite gradient (debug.inject_nonfinite_grad_at)"
                       : group_.distributed() && result.culprits.empty()
                           ? "non-finite gradient on another rank (the ranks skip together)"
                           : "non-finite gradient";
}

io::ModelTensors TrainStep::checkpoint_tensors() const {
  io::ModelTensors tensors{recipe_.weights(), model_->named_buffers()};
  // FP8 scales and amax histories travel with the buffers, so a resumed run casts as it would have.
  for (const auto& [name, tensor] : recipe_.state()) tensors.buffers.insert(name, tensor);
  return tensors;
}

std::optional<data::DataPosition> TrainStep::restore(const io::TrainingState& state) {
  state_ = state;
  recipe_.masters_to_model();
  recipe_.scaler().load_state(state_.scaler);
  if (state_.rng_state.defined()) {
    at::Generator generator = at::detail::getDefaultCPUGenerator();  // a handle to the global one
    generator.set_state(state_.rng_state);
  }
  if (!loader_.seek(state_.data)) return std::nullopt;
  return loader_.position();
}

int64_t TrainStep::samples_per_step() const { return loader_.position().batch_samples * config_.grad_accum_steps; }

}  // namespace mpt::train
