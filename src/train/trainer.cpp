// The training loop. Host syncs are deliberate and few: one per optimizer step for the overflow flag (the
// price of skipping bad steps), and one per log line, eval or epoch end to read the running sums.
// debug.forbid_host_syncs makes LibTorch refuse any other inside a step on a GPU (host_syncs.h).
#include "train/trainer.h"

#include <algorithm>
#include <chrono>
#include <limits>

#include <torch/cuda.h>

#include "common/error.h"
#include "common/stats.h"
#include "device/host_syncs.h"
#include "ops/fused_optimizers.h"
#include "precision/autocast.h"
#include "train/optimizer.h"

namespace mpt::train {
namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Without master_weights the optimizer's FP32 parameters are the model's: each is its own master.
std::vector<precision::MasterPair> own_masters(const std::vector<torch::Tensor>& parameters) {
  std::vector<precision::MasterPair> pairs;
  for (const auto& p : parameters) pairs.push_back({p, p, /*shared=*/true});
  return pairs;
}

// Data parallelism: the finisher's flags all-reduced (max) over the group; null in one process.
precision::AgreeMax agree_max(dist::Group* group) {
  if (!group || !group->distributed()) return nullptr;
  return [group](torch::Tensor& flags) { group->all_reduce_max(flags, "overflow-flag all-reduce"); };
}

}  // namespace

Trainer::Trainer(TrainConfig config, ScheduleConfig schedule, models::Model model,
                 std::unique_ptr<torch::optim::Optimizer> optimizer, PrecisionRuntime precision, torch::Device device,
                 data::BatchLoader& train_loader, const data::Dataset& test_set, RunSinks sinks, dist::Group* group)
    : config_(std::move(config)),
      schedule_(schedule),
      model_(std::move(model)),
      optimizer_(std::move(optimizer)),
      scaler_(std::move(precision.scaler)),
      compute_dtype_(precision.compute_dtype),
      master_weights_(precision.master_weights),
      numerics_(precision.numerics),
      fp8_(precision.fp8),
      computes_in_fp32_(std::move(precision.computes_in_fp32)),
      device_(device),
      train_loader_(train_loader),
      test_set_(test_set),
      sinks_(sinks),
      weights_{master_weights_ ? master_weights_->masters() : model_->named_parameters(), model_->named_buffers()},
      parameters_(weights_.parameters.values()),
      model_parameters_(model_->parameters()),
      masters_(master_weights_ ? master_weights_->pairs() : own_masters(parameters_)),
      group_(group ? group : &single_process_),
      rehearsal_(config_, weights_.parameters, group_->rank(), group_->world_size()),
      finisher_(scaler_, config_.grad_clip_norm, agree_max(group_)) {
  auto options = torch::TensorOptions().dtype(torch::kDouble).device(device_);
  window_loss_ = torch::zeros({}, options);
  window_correct_ = torch::zeros({}, options);
  epoch_loss_ = torch::zeros({}, options);
  epoch_correct_ = torch::zeros({}, options);
  state_.scaler = scaler_.state();
  // FP8 scales and amax histories travel in checkpoints with the buffers, so a resumed run casts as it would have.
  if (fp8_)
    for (const auto& [name, tensor] : fp8_->state()) weights_.buffers.insert(name, tensor);
  if (group_->distributed())
    averager_ = std::make_unique<dist::GradientAverager>(*group_, parameters_, config_.bucket_mb);
}

void Trainer::resume(const std::string& checkpoint_path) {
  state_ = io::load_checkpoint(checkpoint_path, weights_, *optimizer_, [this](const auto& saved) {
    return fp8_ ? fp8_->check_state(saved) : std::string();
  });
  if (master_weights_) master_weights_->masters_to_model();
  scaler_.load_state(state_.scaler);
  if (train_loader_.seek(state_.data)) sinks_.events.data_resharded(state_.step, state_.data, train_loader_.position());
  if (state_.rng_state.defined()) {
    at::Generator generator = at::detail::getDefaultCPUGenerator();  // a handle to the global one
    generator.set_state(state_.rng_state);
  }
  result_.resumed_from = checkpoint_path;
  sinks_.events.resumed(state_.step, checkpoint_path);
}

// One optimizer step, top to bottom: gradients from every micro-batch, then the backward finished (unscale,
// check, clip, decide), then the update applied or the step skipped.
void Trainer::step_once() {
  const auto started = std::chrono::steady_clock::now();
  ForbidHostSyncs forbid(config_.forbid_host_syncs && device_.is_cuda());
  PhaseClock clock(profile_, device_);
  const int64_t step = state_.step + 1;  // 1-based number of the step being taken
  clear_gradients();
  for (int64_t micro = 0; micro < config_.grad_accum_steps; ++micro) forward_backward(step, clock);
  ++window_steps_;

  const bool one_pass = takes_one_pass_step();
  if (master_weights_ && !one_pass) master_weights_->grads_to_masters();
  if (averager_) averager_->average();  // data parallelism: every rank now holds the same mean gradients
  rehearsal_.after_backward(step, [&] { return gradient_holders(one_pass); });
  const bool stop_requested = stop_requested_ && stop_requested_->load();
  const precision::FinishedBackward finished = finisher_.finish(gradients(one_pass), one_pass, stop_requested);
  stop_agreed_ = finished.stop_agreed;
  clock.mark(&StepPhases::scaler);

  current_lr_ = learning_rate(schedule_, state_.applied_steps);
  state_.step = step;
  if (finished.skip) record_skip(step, finished, one_pass);
  else apply_update(finished, one_pass);
  clock.mark(&StepPhases::optimizer);
  record_scale_change(step, finished.scale_update);
  if (fp8_) fp8_->after_step(agree_max(group_));  // delayed scaling: this step's amaxes set the next step's scales
  state_.scaler = scaler_.state();
  state_.data = train_loader_.position();
  rehearsal_.slow_down(seconds_since(started));  // debug.slow_down: a planted slowdown
}

void Trainer::clear_gradients() {
  for (auto* list : {&model_parameters_, &parameters_})
    for (auto& p : *list) p.mutable_grad() = torch::Tensor();  // set_to_none: no zeroing pass
}

void Trainer::forward_backward(int64_t step, PhaseClock& clock) {
  const int64_t epoch_before = train_loader_.position().epoch;
  data::Batch batch = train_loader_.next();
  // The loader delivers to this device (pinned and non-blocking on a GPU, data::Delivery); `to` is then a no-op.
  torch::Tensor inputs = batch.inputs.to(device_), targets = batch.targets.to(device_);
  clock.mark(&StepPhases::data);
  models::Prediction prediction;
  {
    precision::AutocastScope autocast(device_.type(), compute_dtype_);
    prediction = model_->predict(inputs, targets, batch.target_positions);  // (N, K), compute dtype but FP32 islands
  }
  if (numerics_) {
    if (auto activation = numerics_->take()) {
      sinks_.events.nonfinite_activation(step, *activation);
      last_activation_ = activation;
    }
  }
  const torch::Tensor logits = prediction.logits.to(torch::kFloat);
  torch::Tensor loss = torch::nn::functional::cross_entropy(logits, prediction.targets);  // FP32, mean over N
  clock.mark(&StepPhases::forward);
  scaler_.scale_loss(loss / static_cast<double>(config_.grad_accum_steps)).backward();

  // Loss and accuracy are per prediction (a sample, or a masked token); throughput is per sample.
  const int64_t predicted = prediction.targets.size(0);
  torch::Tensor detached = loss.detach().to(torch::kDouble) * static_cast<double>(predicted);
  torch::Tensor correct = logits.detach().argmax(1).eq(prediction.targets).sum();
  window_loss_ += detached, epoch_loss_ += detached;
  window_correct_ += correct, epoch_correct_ += correct;
  window_predictions_ += predicted, epoch_predictions_ += predicted;
  window_samples_ += inputs.size(0), epoch_samples_ += inputs.size(0);
  result_.samples_trained += inputs.size(0) * group_->world_size();  // every rank trains a batch this size
  close_epoch_if_done(epoch_before);
  clock.mark(&StepPhases::backward);
}

// In one CPU process the fused optimizer takes the step in one pass (ops/fused_optimizers.h): it unscales and clips
// each gradient by one factor as it reads it, and under master_weights reads the model's BF16 gradients and
// writes its BF16 weights. Otherwise gradients are unscaled in place and, under master_weights, copied to the
// FP32 masters and back.
bool Trainer::takes_one_pass_step() const {
  return !group_->distributed() && ops::can_step_masters(*optimizer_, masters_);
}

NamedTensors Trainer::gradient_holders(bool one_pass) const {
  return one_pass ? model_->named_parameters() : weights_.parameters;
}

std::vector<torch::Tensor> Trainer::gradients(bool one_pass) const {
  std::vector<torch::Tensor> grads;
  for (const auto& p : one_pass ? model_parameters_ : parameters_)
    if (p.grad().defined()) grads.push_back(p.grad());
  return grads;
}

void Trainer::apply_update(const precision::FinishedBackward& finished, bool one_pass) {
  consecutive_skips_ = 0;
  if (finished.grad_norm.defined()) last_grad_norm_ = finished.grad_norm;
  set_learning_rate(*optimizer_, current_lr_);
  if (one_pass) {
    ops::step_masters(*optimizer_, masters_, finished.grad_factor);
  } else {
    optimizer_->step();
    if (master_weights_) master_weights_->masters_to_model();
  }
  ++state_.applied_steps;  // the schedule's clock advances only on applied steps
}

void Trainer::record_skip(int64_t step, const precision::FinishedBackward& finished, bool one_pass) {
  ++state_.skipped_steps;
  ++consecutive_skips_;
  AllowHostSyncs rare;  // a skipped step's diagnosis reads the gradients
  last_culprits_ = precision::find_nonfinite_grads(gradient_holders(one_pass), /*limit=*/3, finished.grads_scaled_by);
  const char* reason = rehearsal_.injects_at(step) ? "injected non-finite gradient (debug.inject_nonfinite_grad_at)"
                       : group_->distributed() && last_culprits_.empty()
                           ? "non-finite gradient on another rank (the ranks skip together)"
                           : "non-finite gradient";
  sinks_.events.skipped_step(step, finished.scale_update.old_scale, state_.skipped_steps, reason, last_culprits_);
}

void Trainer::record_scale_change(int64_t step, const precision::ScaleUpdate& update) {
  if (update.change == precision::ScaleChange::kNone) return;
  sinks_.events.scale_change(step, update, state_.skipped_steps);
  const bool backoff = update.change == precision::ScaleChange::kBackoff;
  sinks_.tensorboard.scalar(backoff ? "loss_scale/backoff" : "loss_scale/growth", step, update.new_scale);
}

void Trainer::sum_across_ranks(std::vector<torch::Tensor> sums, int64_t& predictions, int64_t& samples) {
  if (!group_->distributed()) return;
  torch::Tensor counts = torch::tensor({static_cast<double>(predictions), static_cast<double>(samples)},
                                       torch::TensorOptions().dtype(torch::kDouble).device(device_));
  sums.push_back(counts);
  group_->all_reduce(sums, "metrics all-reduce");
  const torch::Tensor host = counts.cpu();
  predictions = static_cast<int64_t>(host[0].item<double>());
  samples = static_cast<int64_t>(host[1].item<double>());
}

void Trainer::close_epoch_if_done(int64_t epoch_before) {
  if (train_loader_.position().epoch == epoch_before) return;
  AllowHostSyncs once_an_epoch;
  sum_across_ranks({epoch_loss_, epoch_correct_}, epoch_predictions_, epoch_samples_);
  result_.train_loss = epoch_loss_.item<double>() / epoch_predictions_;
  result_.train_accuracy = epoch_correct_.item<double>() / epoch_predictions_;
  epoch_loss_.zero_(), epoch_correct_.zero_(), epoch_samples_ = 0, epoch_predictions_ = 0;
  epoch_closed_ = true;
}

void Trainer::evaluate_now() {
  const hardware::MemoryPhaseScope phase(memory_, hardware::MemoryPhase::kEvaluation);
  // Batch-norm statistics are per rank (local batch norm): evaluate every shard with rank 0's, which the
  // checkpoint holds too.
  group_->broadcast(model_->buffers(), "buffer broadcast");
  EvalMetrics metrics = evaluate(*model_, test_set_, device_, compute_dtype_, config_.eval_batch_size, group_);
  result_.eval = metrics;
  sinks_.metrics.write({{"kind", "eval"},
                        {"step", state_.step},
                        {"eval", {{"loss", metrics.loss}, {"accuracy", metrics.accuracy}, {"samples", metrics.samples}}}});
  sinks_.tensorboard.scalar("eval/loss", state_.step, metrics.loss);
  sinks_.tensorboard.scalar("eval/accuracy", state_.step, metrics.accuracy);
  sinks_.logger->info("step {}: eval loss {:.4f} accuracy {:.4f} ({} samples)", state_.step, metrics.loss,
                      metrics.accuracy, metrics.samples);
}

void Trainer::save_checkpoint() {
  if (!sinks_.checkpoints) return;
  const hardware::MemoryPhaseScope phase(memory_, hardware::MemoryPhase::kCheckpoint);
  state_.rng_state = at::detail::getDefaultCPUGenerator().get_state();
  sinks_.events.checkpoint_saved(state_.step, sinks_.checkpoints->save(weights_, *optimizer_, state_));
}

void Trainer::check_ranks_agree() {
  // Each rank writes its fingerprint into its own row; the sum over ranks gathers them all.
  constexpr int64_t kFields = 5;
  torch::Tensor rows = torch::zeros({group_->world_size(), kFields}, torch::TensorOptions().dtype(torch::kDouble).device(device_));
  double checksum = 0.0;
  for (const auto& p : parameters_) checksum += p.detach().to(torch::kDouble).sum().item<double>();
  rows[group_->rank()] = torch::tensor({scaler_.scale(), static_cast<double>(state_.step),
                                        static_cast<double>(state_.applied_steps),
                                        static_cast<double>(state_.skipped_steps), checksum},
                                       torch::kDouble)
                               .to(device_);
  group_->all_reduce({rows}, "agreement check");
  rows = rows.cpu();
  const char* names[kFields] = {"loss scale", "steps", "applied steps", "skipped steps", "weight checksum"};
  for (int64_t r = 1; r < group_->world_size(); ++r)
    for (int64_t f = 0; f < kFields; ++f) {
      const double a = rows[0][f].item<double>(), b = rows[r][f].item<double>();
      if (a != b && result_.ranks_agree) {
        result_.ranks_agree = false;
        result_.ranks_disagreement = fmt::format("rank {} ends with {} {:.17g}, rank 0 with {:.17g}", r, names[f], b, a);
      }
    }
}

TrainResult Trainer::run(const std::atomic<bool>& stop_requested) {
  model_->train();
  // Whatever an earlier invocation logged from here on (a run killed before its first checkpoint restarts at
  // step 1) is replaced by what this one logs.
  sinks_.tensorboard.restart_at(state_.step + 1);
  stop_requested_ = &stop_requested;
  if (group_->distributed()) {  // identical starting weights whatever each rank initialised or loaded
    group_->broadcast(weights_.parameters.values(), "weight broadcast");
    group_->broadcast(weights_.buffers.values(), "weight broadcast");
    if (master_weights_) master_weights_->masters_to_model();
  }
  std::vector<double> step_seconds;
  while (state_.step < config_.total_steps) {
    const bool rehearsal = rehearsal_.stops_before(state_.step + 1);
    // Under data parallelism a stop takes effect where all ranks agreed on it (see step_once).
    if ((group_->distributed() ? stop_agreed_ : stop_requested.load()) || rehearsal) {
      result_.status = "interrupted";
      result_.diagnosis = (rehearsal ? "stopped as debug.stop_after_steps asked" : "stopped by a signal") +
                          std::string(" at step ") + std::to_string(state_.step) + "; run again to resume";
      break;
    }
    const auto start = std::chrono::steady_clock::now();
    const int64_t taking = state_.step + 1;
    try {
      step_once();
    } catch (const c10::Error& e) {
      if (!is_forbidden_sync_error(e.what())) throw;
      throw Error(fmt::format("debug.forbid_host_syncs: step {} made the host wait for the device outside the "
                              "overflow check; LibTorch's trace names the operation: {}", taking, e.what()));
    }
    step_seconds.push_back(seconds_since(start));
    window_seconds_ += step_seconds.back();
    if (scaler_.collapsed() || consecutive_skips_ >= config_.max_consecutive_skips) {
      result_.status = "diverged";
      result_.diagnosis = fmt::format(
          "{} ({} consecutive steps skipped, loss scale {:g}); non-finite gradients in {}. {}",
          scaler_.collapsed() ? "the loss scale collapsed to its floor" : "every step overflows", consecutive_skips_,
          scaler_.scale(), precision::describe(last_culprits_),
          precision::divergence_advice(last_culprits_, computes_in_fp32_));
      if (last_activation_) result_.diagnosis += "; first non-finite activation: " + precision::describe(*last_activation_);
      sinks_.events.diverged(state_.step, result_.diagnosis);
      break;
    }
    const bool last = state_.step == config_.total_steps;
    if (state_.step % config_.log_every_steps == 0 || last) log_window();
    sinks_.progress.update(progress_line());  // the live line shows the latest logged loss: no extra sync
    const bool evaluate = (config_.eval_every_steps > 0 && state_.step % config_.eval_every_steps == 0) || last;
    const bool checkpoint =
        (config_.checkpoint_every_steps > 0 && state_.step % config_.checkpoint_every_steps == 0) || last;
    if (evaluate) evaluate_now();
    if (checkpoint) save_checkpoint();
  }
  if (!result_.eval && result_.status == "completed") evaluate_now();  // resumed a finished run: still report
  if (result_.status == "interrupted" && state_.step > 0) save_checkpoint();
  if (!epoch_closed_ && epoch_samples_ > 0) {  // no epoch completed: report the partial one
    sum_across_ranks({epoch_loss_, epoch_correct_}, epoch_predictions_, epoch_samples_);
    result_.train_loss = epoch_loss_.item<double>() / epoch_predictions_;
    result_.train_accuracy = epoch_correct_.item<double>() / epoch_predictions_;
  }
  sinks_.progress.finish();
  if (group_->distributed()) check_ranks_agree();
  result_.steps = state_.step;
  result_.skipped_steps = state_.skipped_steps;
  result_.scaler = scaler_.state();
  for (double s : step_seconds) result_.train_time_sec += s;
  result_.median_step_ms = 1e3 * percentile(step_seconds, 0.5);
  result_.p90_step_ms = 1e3 * percentile(step_seconds, 0.9);
  return result_;
}

}  // namespace mpt::train
