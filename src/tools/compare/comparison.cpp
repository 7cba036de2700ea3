// The A/B measures and verdict; the definitions are spelled out in metric_definitions().
#include "tools/compare/comparison.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "common/error.h"
#include "tools/compare/curves.h"

namespace mpt::compare {
namespace {

double number_at(const nlohmann::json& object, std::initializer_list<const char*> path, double fallback = NAN) {
  const nlohmann::json* node = &object;
  for (const char* key : path) {
    if (!node->is_object() || !node->contains(key)) return fallback;
    node = &(*node)[key];
  }
  return node->is_number() ? node->get<double>() : fallback;
}

// A's smoothed train loss at `point` of its training: the loss B must also reach.
double convergence_target(const RunRecord& baseline, double point) {
  const Curve& loss = baseline.train_loss;
  if (loss.empty()) return NAN;
  const std::vector<double> smoothed = trailing_mean(loss.values, convergence_window(loss.size()));
  const double at_step = point * static_cast<double>(loss.steps.back());
  for (size_t i = 0; i < loss.size(); ++i)
    if (static_cast<double>(loss.steps[i]) >= at_step) return smoothed[i];
  return smoothed.back();
}

SideStats side_stats(const std::vector<RunRecord>& runs, double target) {
  const RunRecord& first = runs.front();
  const nlohmann::json& summary = first.summary;
  SideStats side;
  side.name = first.name;
  side.dir = first.dir;
  side.status = first.status;
  for (const RunRecord& run : runs)
    if (run.status != "completed") side.status = run.status;
  side.precision = summary.value("precision", "?");
  side.steps = first.steps();

  std::vector<double> eval_losses;
  for (const RunRecord& run : runs) {
    const double accuracy = number_at(run.summary, {"eval", "accuracy"});
    if (std::isfinite(accuracy)) side.accuracies.push_back(accuracy);
    const double loss = number_at(run.summary, {"eval", "loss"});
    if (!std::isnan(loss)) eval_losses.push_back(loss);
  }
  side.accuracy = mean(side.accuracies);
  side.accuracy_stddev = sample_stddev(side.accuracies);
  side.eval_loss = mean(eval_losses);
  side.final_train_loss = number_at(summary, {"train", "loss"});

  const Curve& loss = first.train_loss;
  side.roughness = roughness(loss.values);
  if (!loss.empty()) side.final_smoothed_loss = trailing_mean(loss.values, convergence_window(loss.size())).back();
  if (!loss.empty() && !std::isnan(target)) {
    const auto smoothed = trailing_mean(loss.values, convergence_window(loss.size()));
    if (auto index = first_at_or_below(smoothed, target)) {
      side.steps_to_target = loss.steps[*index];
      const auto seconds =
          elapsed_seconds(first.samples_per_sec.steps, first.samples_per_sec.values, first.global_batch_size());
      if (*index < seconds.size()) side.seconds_to_target = seconds[*index];
    }
  }

  side.samples_per_sec = number_at(summary, {"samples_per_sec"}, 0.0);
  side.median_step_ms = number_at(summary, {"step_time_ms", "median"}, 0.0);
  side.peak_memory_bytes = number_at(summary, {"peak_memory_bytes"}, 0.0);
  side.eval_peak_bytes = number_at(summary, {"memory", "evaluation_peak_bytes"}, 0.0);
  side.checkpoint_peak_bytes = number_at(summary, {"memory", "checkpoint_peak_bytes"}, 0.0);
  side.process_peak_bytes = number_at(summary, {"memory", "process_peak_bytes"}, 0.0);
  if (summary.contains("memory") && summary["memory"].is_object() && summary["memory"].contains("kind") &&
      summary["memory"]["kind"].is_string())
    side.memory_kind = summary["memory"]["kind"].get<std::string>();
  side.wall_time_sec = number_at(summary, {"wall_time_sec"}, 0.0);
  if (summary.contains("loss_scale")) side.loss_scale_mode = summary["loss_scale"].value("mode", "");
  side.backoffs = static_cast<int64_t>(number_at(summary, {"loss_scale", "backoffs"}, 0));
  side.growths = static_cast<int64_t>(number_at(summary, {"loss_scale", "growths"}, 0));
  side.final_scale = number_at(summary, {"loss_scale", "final"}, 0);
  side.min_scale = number_at(summary, {"loss_scale", "min"}, 0);
  side.skipped_steps = static_cast<int64_t>(number_at(summary, {"skipped_steps"}, 0));
  return side;
}

double ratio(double numerator, double denominator) {
  return denominator > 0.0 && numerator > 0.0 ? numerator / denominator : NAN;
}

// The layers the precision engine blamed across B's runs, most frequent first.
std::vector<std::string> suspects(const std::vector<RunRecord>& runs) {
  std::map<std::string, int64_t> grads, activations;
  for (const RunRecord& run : runs) {
    for (const auto& [name, count] : run.nonfinite_grad_params) grads[name] += count;
    for (const auto& [name, count] : run.nonfinite_activation_modules) activations[name] += count;
  }
  std::vector<std::pair<int64_t, std::string>> ranked;
  for (const auto& [name, count] : activations)
    ranked.emplace_back(count, fmt::format("{} (first non-finite forward output, {}x)", name, count));
  for (const auto& [name, count] : grads)
    ranked.emplace_back(
        count, fmt::format("{} (non-finite gradient on {} skipped step{})", name, count, count == 1 ? "" : "s"));
  std::stable_sort(ranked.begin(), ranked.end(), [](const auto& l, const auto& r) { return l.first > r.first; });
  std::vector<std::string> out;
  for (size_t i = 0; i < ranked.size() && i < 5; ++i) out.push_back(ranked[i].second);
  return out;
}

std::string percent(double fraction) { return fmt::format("{:.2f}%", 100.0 * fraction); }

void fail(Comparison& c, std::string why) {
  c.failures.push_back(std::move(why));
  if (c.verdict == Verdict::kPass) c.verdict = Verdict::kFail;
}

void run_failed(Comparison& c, std::string why) {
  c.failures.push_back(std::move(why));
  c.verdict = Verdict::kRunFailed;
}

// A run that did not finish cannot be judged, except a diverged candidate: that is the verdict.
void judge_run_status(Comparison& c, const std::vector<RunRecord>& a_runs, const std::vector<RunRecord>& b_runs) {
  for (const RunRecord& run : a_runs)
    if (run.status != "completed")
      run_failed(c, fmt::format("baseline run {} ended '{}'{}", run.dir, run.status,
                                run.diagnosis.empty() ? "" : ": " + run.diagnosis));
  for (const RunRecord& run : b_runs) {
    if (run.status == "diverged")
      fail(c, fmt::format("{} diverged: {}", run.dir, run.diagnosis));
    else if (run.status != "completed")
      run_failed(c, fmt::format("run {} ended '{}'", run.dir, run.status));
  }
}

// Test accuracy when both sides report it, else the evaluation loss; a side with neither cannot be judged.
void judge_quality(Comparison& c) {
  const Thresholds& thresholds = c.thresholds;
  if (!c.a.accuracies.empty() && !c.b.accuracies.empty()) {
    if (-c.accuracy_gap > thresholds.max_accuracy_drop)
      fail(c, fmt::format("test accuracy {:.4f} is {} below the baseline's {:.4f} (allowed: {})", c.b.accuracy,
                          percent(-c.accuracy_gap), c.a.accuracy, percent(thresholds.max_accuracy_drop)));
    else if (c.accuracy_gap > thresholds.max_accuracy_drop)
      c.notes.push_back(
          fmt::format("B's accuracy is {} above A's: more than the bar, so the runs are not "
                      "equivalent, though B is not worse",
                      percent(c.accuracy_gap)));
    if (c.repeats > 1)
      c.notes.push_back(fmt::format("seed-to-seed noise (pooled std over {} seeds): {}; the gap is {} it", c.repeats,
                                    percent(c.accuracy_noise),
                                    std::abs(c.accuracy_gap) <= 2 * c.accuracy_noise ? "within 2x" : "beyond 2x"));
  } else if (std::isfinite(c.a.eval_loss) && !std::isnan(c.b.eval_loss)) {
    const double rise = (c.b.eval_loss - c.a.eval_loss) / std::abs(c.a.eval_loss);
    if (!(rise <= thresholds.max_eval_loss_rise))
      fail(c, fmt::format("evaluation loss {:.4f} is {} above the baseline's {:.4f} (allowed: {})", c.b.eval_loss,
                          percent(rise), c.a.eval_loss, percent(thresholds.max_eval_loss_rise)));
  } else {
    fail(c, "the runs have no evaluation metric to compare (did they evaluate?)");
  }
}

// How B trained: whether it converged to A's loss, how rough its loss curve is, how many steps it skipped.
void judge_training(Comparison& c) {
  const Thresholds& thresholds = c.thresholds;
  // Missing the target by a hair at the very end is noise; ending clearly above it is slower convergence.
  if (std::isfinite(c.convergence_target) && !c.b.steps_to_target &&
      !(c.b.final_smoothed_loss <= c.convergence_target * (1.0 + thresholds.max_final_loss_excess)))
    fail(c, fmt::format("B never reached the baseline's loss {:.4f} (A's smoothed loss at {:.0f}% of training) and "
                        "ended at {:.4f}, more than {} above it",
                        c.convergence_target, 100 * thresholds.convergence_point, c.b.final_smoothed_loss,
                        percent(thresholds.max_final_loss_excess)));

  const double roughness_ratio = c.a.roughness > 0 ? c.b.roughness / c.a.roughness : 1.0;
  if (roughness_ratio > thresholds.max_roughness_ratio)
    fail(c, fmt::format("B's loss curve is {:.1f}x as rough as A's ({:.4f} vs {:.4f}; allowed: {:.1f}x)",
                        roughness_ratio, c.b.roughness, c.a.roughness, thresholds.max_roughness_ratio));

  const double skipped_fraction = c.b.steps > 0 ? static_cast<double>(c.b.skipped_steps) / c.b.steps : 0.0;
  if (skipped_fraction > thresholds.max_skipped_fraction)
    fail(c, fmt::format("B skipped {} of {} optimizer steps ({}) on gradient overflow (allowed: {})", c.b.skipped_steps,
                        c.b.steps, percent(skipped_fraction), percent(thresholds.max_skipped_fraction)));
}

}  // namespace

const char* verdict_name(Verdict verdict) {
  switch (verdict) {
    case Verdict::kPass: return "PASS";
    case Verdict::kFail: return "FAIL";
    case Verdict::kRunFailed: return "RUN FAILED";
  }
  return "?";
}

int verdict_exit_code(Verdict verdict) {
  switch (verdict) {
    case Verdict::kPass: return kExitOk;
    case Verdict::kFail: return kExitVerdictFailed;
    case Verdict::kRunFailed: return kExitRunFailed;
  }
  return kExitRunFailed;
}

Comparison compare_runs(const std::vector<RunRecord>& a_runs, const std::vector<RunRecord>& b_runs,
                        const Thresholds& thresholds) {
  MPT_CHECK(!a_runs.empty() && !b_runs.empty(), "compare_runs needs at least one run per side");
  Comparison c;
  c.thresholds = thresholds;
  c.repeats = static_cast<int>(std::min(a_runs.size(), b_runs.size()));
  c.convergence_target = convergence_target(a_runs.front(), thresholds.convergence_point);
  c.a = side_stats(a_runs, c.convergence_target);
  c.b = side_stats(b_runs, c.convergence_target);
  c.suspects = suspects(b_runs);

  c.accuracy_gap = c.b.accuracy - c.a.accuracy;
  c.relative_accuracy_gap = c.a.accuracy > 0 ? c.accuracy_gap / c.a.accuracy : NAN;
  if (c.repeats > 1)
    c.accuracy_noise =
        std::sqrt((c.a.accuracy_stddev * c.a.accuracy_stddev + c.b.accuracy_stddev * c.b.accuracy_stddev) / 2);
  c.speedup = ratio(c.b.samples_per_sec, c.a.samples_per_sec);
  c.step_time_ratio = ratio(c.b.median_step_ms, c.a.median_step_ms);
  c.memory_ratio = ratio(c.b.peak_memory_bytes, c.a.peak_memory_bytes);

  judge_run_status(c, a_runs, b_runs);
  if (c.verdict == Verdict::kRunFailed) return c;
  judge_quality(c);
  judge_training(c);

  if (c.verdict == Verdict::kFail && !c.suspects.empty())
    c.notes.push_back(
        "the precision engine named these layers in B's run; consider keeping them in FP32 "
        "(precision.fp32_modules): " +
        fmt::format("{}", fmt::join(c.suspects, "; ")));
  return c;
}

std::vector<std::string> metric_definitions(const Thresholds& t) {
  return {
      fmt::format("Accuracy gap: B's final test accuracy minus A's (absolute; relative = gap / A). B fails when it "
                  "trails A by more than {}. With --repeats N, both are means over seeds seed..seed+N-1 and the "
                  "noise is the pooled sample standard deviation of the two sides.",
                  percent(t.max_accuracy_drop)),
      fmt::format("Convergence: each train-loss curve is smoothed by a trailing mean over 5% of its logged points (at "
                  "least 3); "
                  "the target is A's smoothed loss at {:.0f}% of its steps; reported are the first step (and the "
                  "training seconds, from the logged throughput) at which each smoothed curve reaches it. B fails "
                  "when it never does and ends more than {} above it.",
                  100 * t.convergence_point, percent(t.max_final_loss_excess)),
      fmt::format("Roughness: RMS of a loss curve's residual from its local quadratic trend (least-squares parabola "
                  "over {} points either side), divided by the curve's mean, over the points after the first 10%; "
                  "0.01 is ~1% jitter. B fails above {:.1f}x A's.",
                  kRoughnessHalfWidth, t.max_roughness_ratio),
      "Throughput: each side's samples/s in its training run, over the time of its optimizer steps (evaluation and "
      "checkpoints excluded). Speed-up (B/A): with --speed-rounds N (3 by default), the median of the B/A ratios of "
      "N rounds of `mpt bench` run on both sides back to back, alternating which goes first (speed_source "
      "\"interleaved\", each round's ratio in speed_ratios); with --speed-rounds 0, B's training samples/s over "
      "A's (speed_source \"training\"). "
      "Step time: median optimizer-step time, ratio B/A. Memory: the training steps' peak of tensor memory above "
      "what was allocated before the model was built (counted by mpt's CPU allocator, or CUDA's caching "
      "allocator), ratio B/A; evaluation and checkpoint writes have their own peaks; the whole process's is its "
      "absolute peak RSS on the CPU. Max batch (when measured): the "
      "largest batch, a multiple of 8, whose training-step peak fits the budget, found by `mpt bench --max-batch`.",
      fmt::format("Loss scale: backoffs, growths, final and minimum scale, and skipped steps; B fails when it skips "
                  "more than {} of its steps or diverges.",
                  percent(t.max_skipped_fraction)),
  };
}

namespace {

nlohmann::json optional_json(const std::optional<int64_t>& value) { return value ? nlohmann::json(*value) : nullptr; }
nlohmann::json optional_json(const std::optional<double>& value) { return value ? nlohmann::json(*value) : nullptr; }
nlohmann::json finite_or_null(double value) { return std::isfinite(value) ? nlohmann::json(value) : nullptr; }

nlohmann::json side_json(const SideStats& s) {
  return {
      {"name", s.name},
      {"run_dir", s.dir},
      {"status", s.status},
      {"precision", s.precision},
      {"steps", s.steps},
      {"accuracy", finite_or_null(s.accuracy)},
      {"accuracies", s.accuracies},
      {"accuracy_stddev", s.accuracy_stddev},
      {"eval_loss", finite_or_null(s.eval_loss)},
      {"final_train_loss", finite_or_null(s.final_train_loss)},
      {"final_smoothed_loss", finite_or_null(s.final_smoothed_loss)},
      {"steps_to_target", optional_json(s.steps_to_target)},
      {"seconds_to_target", optional_json(s.seconds_to_target)},
      {"roughness", finite_or_null(s.roughness)},
      {"samples_per_sec", s.samples_per_sec},
      {"median_step_ms", s.median_step_ms},
      {"peak_memory_bytes", s.peak_memory_bytes},
      {"memory",
       {{"kind", s.memory_kind},
        {"training_peak_bytes", s.peak_memory_bytes},
        {"evaluation_peak_bytes", s.eval_peak_bytes},
        {"checkpoint_peak_bytes", s.checkpoint_peak_bytes},
        {"process_peak_bytes", s.process_peak_bytes}}},
      {"max_batch", s.max_batch > 0 ? nlohmann::json(s.max_batch) : nlohmann::json(nullptr)},
      {"wall_time_sec", s.wall_time_sec},
      {"loss_scale",
       {{"mode", s.loss_scale_mode},
        {"backoffs", s.backoffs},
        {"growths", s.growths},
        {"skipped_steps", s.skipped_steps},
        {"final", s.final_scale},
        {"min", s.min_scale}}},
  };
}

}  // namespace

void use_max_batch(Comparison& c, int64_t budget_bytes, int64_t a_batch, int64_t b_batch) {
  c.max_batch_budget_bytes = budget_bytes;
  c.a.max_batch = a_batch;
  c.b.max_batch = b_batch;
}

void use_speed_rounds(Comparison& c, const SpeedRounds& rounds) {
  c.speed_ratios.clear();
  for (size_t r = 0; r < rounds.a.size() && r < rounds.b.size(); ++r)
    if (rounds.a[r] > 0) c.speed_ratios.push_back(rounds.b[r] / rounds.a[r]);
  if (c.speed_ratios.empty()) return;
  std::vector<double> sorted = c.speed_ratios;
  std::sort(sorted.begin(), sorted.end());
  const size_t n = sorted.size();
  const double median = n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
  c.notes.push_back(
      fmt::format("speed-up {:.2f}x: the median of {} interleaved `mpt bench` rounds (B/A {:.2f}x to "
                  "{:.2f}x); the training runs' own means gave {:.2f}x",
                  median, n, sorted.front(), sorted.back(), c.speedup));
  c.speedup = median;
  c.speed_source = "interleaved";
}

nlohmann::json to_json(const Comparison& c) {
  return {
      {"verdict", verdict_name(c.verdict)},
      {"exit_code", verdict_exit_code(c.verdict)},
      {"failures", c.failures},
      {"notes", c.notes},
      {"suspects", c.suspects},
      {"a", side_json(c.a)},
      {"b", side_json(c.b)},
      {"repeats", c.repeats},
      {"accuracy_gap", finite_or_null(c.accuracy_gap)},
      {"relative_accuracy_gap", finite_or_null(c.relative_accuracy_gap)},
      {"accuracy_noise", c.accuracy_noise},
      {"convergence_target_loss", finite_or_null(c.convergence_target)},
      {"speedup", finite_or_null(c.speedup)},
      {"speed", {{"source", c.speed_source}, {"round_ratios", c.speed_ratios}}},
      {"step_time_ratio", finite_or_null(c.step_time_ratio)},
      {"memory_ratio", finite_or_null(c.memory_ratio)},
      {"max_batch_budget_bytes", c.max_batch_budget_bytes > 0 ? nlohmann::json(c.max_batch_budget_bytes) : nullptr},
      {"allowed_differences", c.allowed_differences},
      {"thresholds",
       {{"max_accuracy_drop", c.thresholds.max_accuracy_drop},
        {"max_eval_loss_rise", c.thresholds.max_eval_loss_rise},
        {"max_roughness_ratio", c.thresholds.max_roughness_ratio},
        {"max_skipped_fraction", c.thresholds.max_skipped_fraction},
        {"convergence_point", c.thresholds.convergence_point},
        {"max_final_loss_excess", c.thresholds.max_final_loss_excess}}},
      {"definitions", metric_definitions(c.thresholds)},
  };
}

}  // namespace mpt::compare
