// The training loop (see trainer.h).
#include "train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "common/error.h"
#include "common/stats.h"
#include "hardware/host_syncs.h"
#include "io/checkpoint.h"

namespace mpt::train {

Trainer::Trainer(const TrainConfig& config, TrainStep& step, LoopParts parts, distributed::Group& group)
    : config_(config), step_(step), parts_(parts), group_(group) {}

TrainResult Trainer::run(const std::atomic<bool>& stop_requested) {
  step_.model().train();
  // Whatever an earlier invocation logged from here on (a run killed before its first checkpoint restarts at
  // step 1) is replaced by what this one logs.
  parts_.sinks.tensorboard.restart_at(step_.state().step + 1);
  if (group_.distributed()) {  // identical starting weights whatever each rank initialised or loaded
    group_.broadcast(step_.recipe().weights().values(), "weight broadcast");
    group_.broadcast(step_.model().buffers(), "weight broadcast");
    step_.recipe().masters_to_model();
  }
  std::vector<double> step_seconds;
  skipped_at_start_ = step_.state().skipped_steps;
  while (step_.state().step < config_.total_steps) {
    if (const std::string why = stop_reason(stop_requested); !why.empty()) {
      result_.status = "interrupted";
      result_.diagnosis = why + " at step " + std::to_string(step_.state().step) + "; run again to resume";
      break;
    }
    const auto start = std::chrono::steady_clock::now();
    const StepResult taken = take_step(stop_requested.load());
    step_seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    record(taken);
    if (diverged(taken)) break;
    parts_.metrics.after_step(step_, step_seconds.back());
    parts_.evaluator.maybe_evaluate(step_.model(), step_.recipe().compute_dtype(), taken.step, parts_.sinks.metrics,
                                    parts_.sinks.tensorboard, *parts_.sinks.logger);
    parts_.checkpointer.maybe_save(step_, config_.total_steps);
  }
  finish(step_seconds);
  return result_;
}

std::string Trainer::stop_reason(const std::atomic<bool>& stop_requested) const {
  if (step_.rehearsal().stops_before(step_.state().step + 1)) return "stopped as debug.stop_after_steps asked";
  // Under data parallelism a stop takes effect where all ranks agreed on it (the step's overflow all-reduce).
  if (group_.distributed() ? stop_agreed_ : stop_requested.load()) return "stopped by a signal";
  return "";
}

StepResult Trainer::take_step(bool stop_requested) {
  try {
    StepResult taken = step_.run(&parts_.metrics, stop_requested);
    stop_agreed_ = taken.finished.stop_agreed;
    return taken;
  } catch (const c10::Error& e) {
    if (!is_forbidden_sync_error(e.what())) throw;
    throw Error(
        fmt::format("debug.forbid_host_syncs: step {} made the host wait for the device outside the "
                    "overflow check; LibTorch's trace names the operation: {}",
                    step_.state().step + 1, e.what()));
  }
}

void Trainer::record(const StepResult& taken) {
  EventLog& events = parts_.sinks.events;
  if (taken.activation) {
    events.nonfinite_activation(taken.step, *taken.activation);
    if (!first_activation_) first_activation_ = taken.activation;
  }
  if (taken.finished.skip) {
    last_culprits_ = taken.culprits;
    events.skipped_step(taken.step, taken.finished.scale_update.old_scale, step_.state().skipped_steps,
                        taken.skip_reason, taken.culprits);
  }
  const precision::ScaleUpdate& update = taken.finished.scale_update;
  if (update.change == precision::ScaleChange::kNone) return;
  events.scale_change(taken.step, update, step_.state().skipped_steps);
  const bool backoff = update.change == precision::ScaleChange::kBackoff;
  parts_.sinks.tensorboard.scalar(backoff ? "loss_scale/backoff" : "loss_scale/growth", taken.step, update.new_scale);
}

bool Trainer::diverged(const StepResult& taken) {
  const precision::LossScaler& scaler = step_.recipe().scaler();
  const int64_t skips = step_.consecutive_skips();
  if (!scaler.collapsed() && skips < config_.max_consecutive_skips) return false;
  result_.status = "diverged";
  result_.diagnosis = fmt::format("{} ({} consecutive steps skipped, loss scale {:g}); non-finite gradients in {}. {}",
                                  scaler.collapsed() ? "the loss scale collapsed to its floor" : "every step overflows",
                                  skips, scaler.scale(), precision::describe(last_culprits_),
                                  precision::divergence_advice(last_culprits_, [this](const std::string& p) {
                                    return step_.recipe().computes_in_fp32(p);
                                  }));
  if (first_activation_)
    result_.diagnosis += "; first non-finite activation: " + precision::describe(*first_activation_);
  parts_.sinks.events.diverged(taken.step, result_.diagnosis);
  return true;
}

// A run that skipped most of its steps trained on nothing but non-finite losses or gradients (a learning rate of
// 1e30, weights at FP32's edge): it diverged, whatever max_consecutive_skips allowed.
void Trainer::check_most_steps_trained(int64_t steps_taken) {
  const int64_t skipped = step_.state().skipped_steps - skipped_at_start_;
  if (result_.status != "completed" || steps_taken < 2 || 2 * skipped <= steps_taken) return;
  result_.status = "diverged";
  result_.diagnosis = fmt::format(
      "{} of the {} steps taken were skipped on non-finite gradients (the losses were "
      "NaN or Inf); non-finite gradients last in {}. {}",
      skipped, steps_taken, precision::describe(last_culprits_),
      precision::divergence_advice(last_culprits_,
                                   [this](const std::string& p) { return step_.recipe().computes_in_fp32(p); }));
  parts_.sinks.events.diverged(step_.state().step, result_.diagnosis);
}

void Trainer::finish(const std::vector<double>& step_seconds) {
  const int64_t steps = step_.state().step;
  check_most_steps_trained(static_cast<int64_t>(step_seconds.size()));
  if (result_.status == "completed" && !parts_.evaluator.last())  // resumed a finished run: still report
    parts_.evaluator.evaluate_now(step_.model(), step_.recipe().compute_dtype(), steps, parts_.sinks.metrics,
                                  parts_.sinks.tensorboard, *parts_.sinks.logger);
  if (result_.status == "interrupted" && steps > 0) parts_.checkpointer.save(step_);
  std::tie(result_.train_loss, result_.train_accuracy) = parts_.metrics.epoch_loss_and_accuracy();
  parts_.sinks.progress.finish();
  if (group_.distributed()) check_ranks_agree();
  result_.eval = parts_.evaluator.last();
  result_.resumed_from = parts_.checkpointer.resumed_from();
  result_.steps = steps;
  result_.skipped_steps = step_.state().skipped_steps;
  result_.scaler = step_.recipe().scaler().state();
  result_.samples_trained = parts_.metrics.samples_trained();
  for (double s : step_seconds) result_.train_time_sec += s;
  result_.median_step_ms = 1e3 * percentile(step_seconds, 0.5);
  result_.p90_step_ms = 1e3 * percentile(step_seconds, 0.9);
}

namespace {

// A weight's elements summed in double a slice at a time: a double copy of the largest weight at once would be the
// biggest allocation of the run's end.
double sum_in_double(const torch::Tensor& weight) {
  constexpr int64_t kSlice = int64_t{1} << 20;
  const torch::Tensor elements = io::memory_order(weight.detach());
  double sum = 0.0;
  for (int64_t start = 0; start < elements.numel(); start += kSlice)
    sum +=
        elements.narrow(0, start, std::min(kSlice, elements.numel() - start)).to(torch::kDouble).sum().item<double>();
  return sum;
}

}  // namespace

void Trainer::check_ranks_agree() {
  // Each rank writes its fingerprint into its own row; the sum over ranks gathers them all.
  constexpr int64_t kFields = 5;
  const io::TrainingState& state = step_.state();
  const torch::Device device = step_.recipe().weights().values().front().device();
  torch::Tensor rows =
      torch::zeros({group_.world_size(), kFields}, torch::TensorOptions().dtype(torch::kDouble).device(device));
  double checksum = 0.0;
  for (const auto& p : step_.model().parameters())  // the model's: a sharded run keeps pieces of the masters
    checksum += sum_in_double(p);
  rows[group_.rank()] =
      torch::tensor({state.scaler.scale, static_cast<double>(state.step), static_cast<double>(state.applied_steps),
                     static_cast<double>(state.skipped_steps), checksum},
                    torch::kDouble)
          .to(device);
  group_.all_reduce({rows}, "agreement check");
  rows = rows.cpu();
  const char* names[kFields] = {"loss scale", "steps", "applied steps", "skipped steps", "weight checksum"};
  bool nonfinite = false;  // NaN never equals NaN: non-finite weights are the finding, not a difference
  for (int64_t r = 0; r < group_.world_size() && !nonfinite; ++r) {
    const double sum = rows[r][kFields - 1].item<double>();
    nonfinite = !std::isfinite(sum);
    if (nonfinite)
      result_.ranks_disagreement = fmt::format("rank {} ends with non-finite weights (checksum {})", r, sum);
  }
  result_.ranks_agree = !nonfinite;
  for (int64_t r = 1; r < group_.world_size() && result_.ranks_agree; ++r)
    for (int64_t f = 0; f < kFields && result_.ranks_agree; ++f) {
      const double a = rows[0][f].item<double>(), b = rows[r][f].item<double>();
      if (a == b) continue;
      result_.ranks_agree = false;
      result_.ranks_disagreement = fmt::format("rank {} ends with {} {:.17g}, rank 0 with {:.17g}", r, names[f], b, a);
    }
  if (result_.ranks_agree) return;
  if (result_.status == "completed") {
    result_.status = nonfinite ? "diverged" : "failed";
    result_.diagnosis = "ranks disagree at the end of training: " + result_.ranks_disagreement;
  }
}

}  // namespace mpt::train
