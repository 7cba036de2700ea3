// The A/B comparison: a baseline (A, usually FP32) against a candidate (B, usually mixed precision), each
// possibly repeated over seeds, reduced to the numbers the seed asks about and a PASS/FAIL verdict.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

#include "tools/compare/run_record.h"

namespace mpt::compare {

struct Thresholds {
  double max_accuracy_drop = 0.005;     // absolute: B's mean test accuracy may trail A's by at most this
  double max_eval_loss_rise = 0.02;     // relative, used when the runs report no accuracy
  double max_roughness_ratio = 2.0;     // B's loss-curve roughness over A's
  double max_skipped_fraction = 0.05;   // of B's optimizer steps skipped on overflow
  double convergence_point = 0.9;       // the target is A's smoothed loss at this fraction of its training
  double max_final_loss_excess = 0.02;  // B missing the target fails only when it ends this far above it
};

// One side's numbers; accuracy and eval loss are means over its repeats, the rest come from its first run.
struct SideStats {
  std::string name;
  std::string dir;
  std::string status;
  std::string precision;
  int64_t steps = 0;
  std::vector<double> accuracies;  // one per repeat (empty when the runs report no accuracy)
  double accuracy = NAN;
  double accuracy_stddev = 0.0;
  double eval_loss = NAN;
  double final_train_loss = NAN;
  double final_smoothed_loss = NAN;  // the convergence smoothing at the last logged step
  std::optional<int64_t> steps_to_target;
  std::optional<double> seconds_to_target;
  double roughness = 0.0;
  double samples_per_sec = 0.0;
  double median_step_ms = 0.0;
  double peak_memory_bytes = 0.0;  // the training steps' peak
  double eval_peak_bytes = 0.0, checkpoint_peak_bytes = 0.0, process_peak_bytes = 0.0;
  std::string memory_kind;  // "CPU tensors" or "CUDA allocator"; empty from a run before phases were kept
  int64_t max_batch = 0;    // the largest batch within Comparison::max_batch_budget_bytes (0: not measured)
  double wall_time_sec = 0.0;
  std::string loss_scale_mode;
  int64_t backoffs = 0;
  int64_t growths = 0;
  int64_t skipped_steps = 0;
  double final_scale = 0.0;
  double min_scale = 0.0;
};

enum class Verdict { kPass, kFail, kRunFailed };
const char* verdict_name(Verdict verdict);  // PASS, FAIL, RUN FAILED
int verdict_exit_code(Verdict verdict);     // 0, 3, 1

struct Comparison {
  SideStats a;
  SideStats b;
  Thresholds thresholds;
  int repeats = 1;
  double convergence_target = NAN;  // A's smoothed train loss at thresholds.convergence_point of its steps
  double accuracy_gap = NAN;        // B - A (absolute)
  double relative_accuracy_gap = NAN;
  double accuracy_noise = 0.0;            // pooled seed-to-seed standard deviation (repeats > 1)
  double speedup = NAN;                   // B's samples/s over A's (the interleaved rounds' median when measured)
  std::string speed_source = "training";  // "training" (each side's run, minutes apart) or "interleaved"
  std::vector<double> speed_ratios;       // B/A of each interleaved round
  double step_time_ratio = NAN;           // B's median step over A's
  double memory_ratio = NAN;              // B's training-step peak memory over A's
  int64_t max_batch_budget_bytes = 0;     // when measured: the budget both sides' largest batch fits in
  Verdict verdict = Verdict::kPass;
  std::vector<std::string> failures;             // why it failed; empty on PASS
  std::vector<std::string> notes;                // what a reader should know either way
  std::vector<std::string> suspects;             // layers the precision engine named in B's runs, most frequent first
  std::vector<std::string> allowed_differences;  // spec keys allowed to differ besides precision.*
};

// `a_runs` and `b_runs` hold one record per repeat (seed), first run first; neither may be empty.
Comparison compare_runs(const std::vector<RunRecord>& a_runs, const std::vector<RunRecord>& b_runs,
                        const Thresholds& thresholds);

// samples/s of each side in rounds of `mpt bench` timed back to back, alternating which goes first.
struct SpeedRounds {
  std::vector<double> a;
  std::vector<double> b;
};

// The speed-up as the median of the rounds' B/A ratios instead of the training runs' means, which ran minutes
// apart and swing with whatever else the machine does; the spread and the training runs' figure become a note.
void use_speed_rounds(Comparison& comparison, const SpeedRounds& rounds);

// The largest batch each side fits within `budget_bytes` (from `mpt bench --max-batch` per side).
void use_max_batch(Comparison& comparison, int64_t budget_bytes, int64_t a_batch, int64_t b_batch);

nlohmann::json to_json(const Comparison& comparison);

// The definitions of every reported measure, in words, for the reports.
std::vector<std::string> metric_definitions(const Thresholds& thresholds);

}  // namespace mpt::compare
