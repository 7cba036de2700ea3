// The metrics window (see metrics_window.h).
#include "train/metrics_window.h"

#include "hardware/host_syncs.h"

#include <algorithm>

namespace mpt::train {

MetricsWindow::MetricsWindow(const TrainConfig& config, RunSinks sinks, distributed::Group& group, torch::Device device)
    : config_(config), sinks_(sinks), group_(group) {
  const auto options = torch::TensorOptions().dtype(torch::kDouble).device(device);
  for (Sums* sums : {&window_, &epoch_})
    sums->loss = torch::zeros({}, options), sums->correct = torch::zeros({}, options);
}

void MetricsWindow::add(const MicroBatchStats& stats) {
  for (Sums* sums : {&window_, &epoch_}) {
    sums->loss += stats.loss_sum, sums->correct += stats.correct;
    sums->predictions += stats.predictions, sums->samples += stats.samples;
  }
  samples_trained_ += stats.samples * group_.world_size();  // every rank trains a batch this size
  if (!stats.ends_epoch) return;
  AllowHostSyncs once_an_epoch;
  sum_across_ranks({epoch_.loss, epoch_.correct}, epoch_.predictions, epoch_.samples);
  closed_epoch_ = {epoch_.loss.item<double>() / epoch_.predictions, epoch_.correct.item<double>() / epoch_.predictions};
  epoch_.loss.zero_(), epoch_.correct.zero_(), epoch_.predictions = 0, epoch_.samples = 0;
}

void MetricsWindow::after_step(const TrainStep& step, double seconds) {
  ++window_steps_;
  window_seconds_ += seconds;
  const int64_t done = step.state().step;
  if (done % config_.log_every_steps == 0 || done == config_.total_steps) log(step);
  sinks_.progress.update(progress_line(step));  // the latest logged loss: no extra sync
}

std::pair<double, double> MetricsWindow::epoch_loss_and_accuracy() {
  if (closed_epoch_ || epoch_.samples == 0) return closed_epoch_.value_or(std::pair<double, double>{0.0, 0.0});
  sum_across_ranks({epoch_.loss, epoch_.correct}, epoch_.predictions, epoch_.samples);
  return {epoch_.loss.item<double>() / epoch_.predictions, epoch_.correct.item<double>() / epoch_.predictions};
}

io::NamedTensors MetricsWindow::logging_state(TrainStep& step) {
  const auto count = [](int64_t n) { return torch::tensor(static_cast<double>(n), torch::kDouble); };
  std::vector<torch::Tensor> sums = {window_.loss.clone(), window_.correct.clone(), epoch_.loss.clone(),
                                     epoch_.correct.clone()};
  int64_t window_predictions = window_.predictions, window_samples = window_.samples;
  int64_t epoch_predictions = epoch_.predictions, epoch_samples = epoch_.samples;
  sum_across_ranks({sums[0], sums[1]}, window_predictions, window_samples);
  sum_across_ranks({sums[2], sums[3]}, epoch_predictions, epoch_samples);
  io::NamedTensors state;
  state.insert("metrics.window",
               torch::stack({sums[0].cpu(), sums[1].cpu(), count(window_predictions), count(window_samples),
                             count(window_steps_), torch::tensor(window_seconds_, torch::kDouble)}));
  state.insert("metrics.epoch",
               torch::stack({sums[2].cpu(), sums[3].cpu(), count(epoch_predictions), count(epoch_samples)}));
  const auto [loss, accuracy] = closed_epoch_.value_or(std::pair<double, double>{0.0, 0.0});
  state.insert("metrics.closed_epoch", torch::tensor({closed_epoch_ ? 1.0 : 0.0, loss, accuracy}, torch::kDouble));
  if (precision::LowPrecisionGemms* gemms = step.recipe().gemms())
    for (const auto& item : gemms->report_state()) state.insert(item.key(), item.value());
  return state;
}

void MetricsWindow::restore_logging(const io::NamedTensors& saved, TrainStep& step) {
  if (precision::LowPrecisionGemms* gemms = step.recipe().gemms()) gemms->restore_report_state(saved);
  const torch::Tensor* window = saved.find("metrics.window");
  const torch::Tensor* epoch = saved.find("metrics.epoch");
  const torch::Tensor* closed = saved.find("metrics.closed_epoch");
  if (!window || !epoch || !closed || window->numel() != 6 || epoch->numel() != 4 || closed->numel() != 3) return;
  const auto w = window->to(torch::kDouble).contiguous(), e = epoch->to(torch::kDouble).contiguous();
  const auto c = closed->to(torch::kDouble).contiguous();
  window_steps_ = static_cast<int64_t>(w[4].item<double>());
  window_seconds_ = w[5].item<double>();
  if (c[0].item<double>() != 0.0) closed_epoch_ = std::pair{c[1].item<double>(), c[2].item<double>()};
  if (group_.rank() != 0) return;  // one rank holds the sums of all
  window_.loss.fill_(w[0].item<double>()), window_.correct.fill_(w[1].item<double>());
  window_.predictions = static_cast<int64_t>(w[2].item<double>());
  window_.samples = static_cast<int64_t>(w[3].item<double>());
  epoch_.loss.fill_(e[0].item<double>()), epoch_.correct.fill_(e[1].item<double>());
  epoch_.predictions = static_cast<int64_t>(e[2].item<double>()),
  epoch_.samples = static_cast<int64_t>(e[3].item<double>());
}

void MetricsWindow::sum_across_ranks(std::vector<torch::Tensor> sums, int64_t& predictions, int64_t& samples) {
  if (!group_.distributed()) return;
  const torch::Tensor counts =
      torch::tensor({static_cast<double>(predictions), static_cast<double>(samples)},
                    torch::TensorOptions().dtype(torch::kDouble).device(sums.front().device()));
  sums.push_back(counts);
  group_.all_reduce(sums, "metrics all-reduce");
  const torch::Tensor host = counts.cpu();
  predictions = static_cast<int64_t>(host[0].item<double>());
  samples = static_cast<int64_t>(host[1].item<double>());
}

void MetricsWindow::log(const TrainStep& step) {
  const io::TrainingState& state = step.state();
  sum_across_ranks({window_.loss, window_.correct}, window_.predictions, window_.samples);
  const double loss = window_.loss.item<double>() / window_.predictions;
  const double rate = window_.samples / std::max(window_seconds_, 1e-9);
  nlohmann::json line = {{"kind", "train"},
                         {"step", state.step},
                         {"epoch", state.data.epoch},
                         {"loss", loss},
                         {"accuracy", window_.correct.item<double>() / window_.predictions},
                         {"lr", step.learning_rate()},
                         {"loss_scale", state.scaler.scale},
                         {"skipped_steps", state.skipped_steps},
                         {"samples_per_sec", rate}};
  if (step.last_grad_norm().defined()) line["grad_norm"] = step.last_grad_norm().item<double>();
  log_gemm_scales(step, line);
  if (group_.distributed()) line["world_size"] = group_.world_size();
  sinks_.metrics.write(line);
  for (const char* key : {"loss", "accuracy", "lr", "loss_scale", "skipped_steps", "samples_per_sec", "grad_norm"})
    if (line.contains(key)) sinks_.tensorboard.scalar(std::string("train/") + key, state.step, line[key].get<double>());
  last_loss_ = loss;
  seconds_per_step_ = window_seconds_ / static_cast<double>(window_steps_);
  samples_per_sec_ = rate;
  if (!sinks_.progress.live() || state.step == config_.total_steps)
    sinks_.logger->info("{}", io::format_progress(progress_line(step)));
  window_.loss.zero_(), window_.correct.zero_(), window_.predictions = 0, window_.samples = 0;
  window_steps_ = 0, window_seconds_ = 0.0;
}

// A low-precision GEMM format's scales at a log point: each tensor's range in metrics.jsonl ("fp8": {"input_scale":
// [min, max], ...}) and TensorBoard, and an fp8_scale event for each scale that moved by more than 2x or saturated.
void MetricsWindow::log_gemm_scales(const TrainStep& step, nlohmann::json& line) {
  precision::LowPrecisionGemms* gemms = step.recipe().gemms();
  if (!gemms) return;
  const precision::GemmReport report = gemms->report();
  for (const precision::GemmScaleEvent& event : report.events) sinks_.events.fp8_scale(line["step"], event);
  if (report.ranges.empty()) return;
  nlohmann::json& scales = line["fp8"];
  for (const auto& [name, range] : report.ranges) {
    scales[name] = {range.first, range.second};
    sinks_.tensorboard.scalar("fp8/" + name + "_min", line["step"], range.first);
  }
  sinks_.tensorboard.scalar("fp8/grad_output_scale_max", line["step"], report.ranges.back().second.second);
}

io::ProgressLine MetricsWindow::progress_line(const TrainStep& step) const {
  // Between log lines the rate comes from the steps since the last one (host clock only: no device sync), so the
  // live line moves from the first step instead of showing zeros until the first log point.
  const bool live = window_steps_ > 0 && window_seconds_ > 0.0;
  const double per_step = live ? window_seconds_ / static_cast<double>(window_steps_) : seconds_per_step_;
  const double rate =
      live ? static_cast<double>(window_.samples * group_.world_size()) / window_seconds_ : samples_per_sec_;
  const io::TrainingState& state = step.state();
  return {state.step,
          config_.total_steps,
          last_loss_,
          state.scaler.scale,
          step.learning_rate(),
          rate,
          per_step * static_cast<double>(config_.total_steps - state.step)};
}

}  // namespace mpt::train
