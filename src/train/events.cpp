// Event records. Field names are a contract with ab-compare, nightly and users' alerting.
#include "train/events.h"

#include <fmt/format.h>

namespace mpt::train {

void EventLog::record(nlohmann::json event) { writer_.write(std::move(event)); }

void EventLog::skipped_step(int64_t step, double scale, int64_t skipped_so_far, const std::string& reason,
                            const std::vector<precision::NonfiniteGrad>& culprits) {
  nlohmann::json params = nlohmann::json::array();
  for (const auto& c : culprits)
    params.push_back({{"name", c.name}, {"nonfinite", c.nonfinite}, {"max_abs_finite", c.max_abs_finite}});
  record({{"step", step},
          {"kind", "skip"},
          {"old_scale", scale},
          {"new_scale", scale},
          {"skipped_steps", skipped_so_far},
          {"reason", reason},
          {"nonfinite_params", params}});
  logger_->warn("step {}: skipped the optimizer step ({}; {}); {} skipped so far", step, reason,
                precision::describe(culprits), skipped_so_far);
}

void EventLog::scale_change(int64_t step, const precision::ScaleUpdate& update, int64_t skipped_so_far) {
  const bool backoff = update.change == precision::ScaleChange::kBackoff;
  record({{"step", step},
          {"kind", backoff ? "backoff" : "growth"},
          {"old_scale", update.old_scale},
          {"new_scale", update.new_scale},
          {"skipped_steps", skipped_so_far}});
  if (backoff)
    logger_->warn("step {}: loss scale backoff {:g} -> {:g}", step, update.old_scale, update.new_scale);
  else
    logger_->info("step {}: loss scale growth {:g} -> {:g}", step, update.old_scale, update.new_scale);
}

void EventLog::fp8_scale(int64_t step, const precision::GemmScaleEvent& change) {
  record({{"step", step},
          {"kind", "fp8_scale"},
          {"tensor", change.tensor},
          {"scale", change.scale},
          {"previous_scale", change.previous},
          {"amax", change.amax},
          {"saturated", change.saturated}});
  const std::string saturated = change.saturated > 0 ? fmt::format(", {} values saturated", change.saturated) : "";
  logger_->info("step {}: fp8 scale of {} {:g} -> {:g} (amax {:g}){}", step, change.tensor, change.previous,
                change.scale, change.amax, saturated);
}

void EventLog::nonfinite_activation(int64_t step, const precision::NonfiniteActivation& activation) {
  record({{"step", step},
          {"kind", "nonfinite_activation"},
          {"module", activation.module},
          {"dtype", activation.dtype},
          {"input_min", activation.input_min},
          {"input_max", activation.input_max}});
  logger_->warn("step {}: {}", step, precision::describe(activation));
}

void EventLog::checkpoint_saved(int64_t step, const std::string& path) {
  record({{"step", step}, {"kind", "checkpoint"}, {"path", path}});
  logger_->info("step {}: checkpoint {}", step, path);
}

void EventLog::checkpoint_rejected(const std::string& path, const std::string& why) {
  record({{"kind", "checkpoint_rejected"}, {"path", path}, {"reason", why}});
  logger_->warn("skipping unusable checkpoint {}: {}", path, why);
}

void EventLog::torn_tail_cut(const std::string& path, int64_t bytes) {
  record({{"kind", "torn_tail_cut"}, {"path", path}, {"bytes", bytes}});
  logger_->warn("{} ended in a partial line (a crash mid-write): cut its last {} bytes", path, bytes);
}

void EventLog::resumed(int64_t step, const std::string& path) {
  record({{"step", step}, {"kind", "resume"}, {"path", path}});
  logger_->info("resumed from {} at step {}", path, step);
}

void EventLog::data_resharded(int64_t step, const data::DataPosition& saved, const data::DataPosition& now) {
  record({{"step", step},
          {"kind", "data_resharded"},
          {"saved", {{"epoch", saved.epoch}, {"batch", saved.batch}, {"batch_samples", saved.batch_samples}}},
          {"now", {{"epoch", now.epoch}, {"batch", now.batch}, {"batch_samples", now.batch_samples}}}});
  logger_->info(
      "data position re-sharded for the new global batch: epoch {} batch {} of {} samples -> epoch {} "
      "batch {} of {} samples",
      saved.epoch, saved.batch, saved.batch_samples, now.epoch, now.batch, now.batch_samples);
}

void EventLog::diverged(int64_t step, const std::string& diagnosis) {
  record({{"step", step}, {"kind", "diverged"}, {"reason", diagnosis}});
  logger_->error("step {}: training diverged: {}", step, diagnosis);
}

void EventLog::failed(int64_t step, int rank, const std::string& reason) {
  record({{"step", step}, {"kind", "failed"}, {"rank", rank}, {"reason", reason}});
  logger_->error("step {}: rank {} failed: {}", step, rank, reason);
}

}  // namespace mpt::train
