// A finished (or failed) run as ab-compare and nightly see it: summary.json, the metric curves from
// metrics.jsonl and the loss-scale story from events.jsonl, read back from a run directory.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace mpt::compare {

// One column of metrics.jsonl against the optimizer step.
struct Curve {
  std::vector<int64_t> steps;
  std::vector<double> values;

  bool empty() const { return steps.empty(); }
  size_t size() const { return steps.size(); }
};

struct ScaleEvent {
  int64_t step = 0;
  std::string kind;  // "backoff" or "growth"
  double new_scale = 0.0;
};

struct RunRecord {
  std::string dir;
  std::string name;
  std::string status;  // completed | diverged | interrupted | ...
  nlohmann::json summary;

  Curve train_loss, lr, loss_scale, samples_per_sec;
  Curve eval_loss, eval_accuracy;
  // precision.mode fp8: the smallest scale over the FP8 layers' inputs, weights and output gradients (empty
  // otherwise).
  Curve fp8_input_scale, fp8_weight_scale, fp8_grad_scale;
  std::vector<ScaleEvent> scale_events;

  // The precision engine's diagnosis: how often each parameter had non-finite gradients on a skipped step,
  // the modules check_numerics named, and the divergence reason.
  std::map<std::string, int64_t> nonfinite_grad_params;
  std::map<std::string, int64_t> nonfinite_activation_modules;
  std::string diagnosis;

  int64_t steps() const;
  int64_t global_batch_size() const;
};

// Reads DIR/summary.json, DIR/metrics.jsonl and DIR/events.jsonl. A resumed run appends records for steps it
// re-ran after its checkpoint; the last record of a step wins, so every curve is strictly increasing in step.
// Throws mpt::Error naming the file (and line) when a file is missing or malformed.
RunRecord load_run_record(const std::string& dir);

}  // namespace mpt::compare
