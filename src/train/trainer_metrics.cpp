// The trainer's reporting window: the metrics line every log_every_steps (one host sync for the running sums)
// and the live progress line between them.
#include <algorithm>

#include "train/trainer.h"

namespace mpt::train {

void Trainer::log_window() {
  const double window_seconds = window_seconds_;
  sum_across_ranks({window_loss_, window_correct_}, window_predictions_, window_samples_);
  const double loss = window_loss_.item<double>() / window_predictions_;
  nlohmann::json line = {{"kind", "train"},
                         {"step", state_.step},
                         {"epoch", state_.data.epoch},
                         {"loss", loss},
                         {"accuracy", window_correct_.item<double>() / window_predictions_},
                         {"lr", current_lr_},
                         {"loss_scale", scaler_.scale()},
                         {"skipped_steps", state_.skipped_steps},
                         {"samples_per_sec", window_samples_ / std::max(window_seconds, 1e-9)}};
  if (last_grad_norm_.defined()) line["grad_norm"] = last_grad_norm_.item<double>();
  if (fp8_) log_fp8_scales(line);
  if (group_->distributed()) line["world_size"] = group_->world_size();
  sinks_.metrics.write(line);
  for (const char* key : {"loss", "accuracy", "lr", "loss_scale", "skipped_steps", "samples_per_sec", "grad_norm"})
    if (line.contains(key)) sinks_.tensorboard.scalar(std::string("train/") + key, state_.step, line[key].get<double>());
  last_loss_ = loss;
  seconds_per_step_ = window_seconds / window_steps_;
  samples_per_sec_ = window_samples_ / std::max(window_seconds, 1e-9);
  if (!sinks_.progress.live() || state_.step == config_.total_steps)
    sinks_.logger->info("{}", io::format_progress(progress_line()));
  window_loss_.zero_(), window_correct_.zero_(), window_steps_ = 0, window_samples_ = 0, window_predictions_ = 0;
  window_seconds_ = 0.0;
}

// FP8 scales at a log point: the range over the layers in metrics.jsonl and TensorBoard, and an fp8_scale event
// for each tensor whose scale moved by more than 2x since its last event or whose casts saturated.
void Trainer::log_fp8_scales(nlohmann::json& line) {
  for (const precision::Fp8ScaleChange& change : fp8_->changes()) sinks_.events.fp8_scale(state_.step, change);
  const precision::Fp8Training::Summary s = fp8_->summary();
  line["fp8"] = {{"input_scale", {s.input_min, s.input_max}},
                 {"weight_scale", {s.weight_min, s.weight_max}},
                 {"grad_output_scale", {s.grad_min, s.grad_max}}};
  const std::pair<const char*, double> scalars[] = {
      {"fp8/input_scale_min", s.input_min}, {"fp8/weight_scale_min", s.weight_min},
      {"fp8/grad_output_scale_min", s.grad_min}, {"fp8/grad_output_scale_max", s.grad_max}};
  for (const auto& [tag, value] : scalars) sinks_.tensorboard.scalar(tag, state_.step, value);
}

io::ProgressLine Trainer::progress_line() const {
  // Between log lines the rate comes from the steps since the last one (host clock only: no device sync), so the
  // live line moves from the first step instead of showing zeros until the first log point.
  const bool live = window_steps_ > 0 && window_seconds_ > 0.0;
  const double per_step = live ? window_seconds_ / static_cast<double>(window_steps_) : seconds_per_step_;
  const double rate = live ? static_cast<double>(window_samples_ * group_->world_size()) / window_seconds_
                           : samples_per_sec_;
  return {state_.step, config_.total_steps, last_loss_, scaler_.scale(), current_lr_, rate,
          per_step * static_cast<double>(config_.total_steps - state_.step)};
}

}  // namespace mpt::train
