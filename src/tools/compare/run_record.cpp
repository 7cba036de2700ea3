// Reading a run directory back (the field names are the contract written by src/train).
#include "tools/compare/run_record.h"

#include <filesystem>

#include "common/error.h"
#include "common/files.h"
#include "common/json.h"

namespace mpt::compare {
namespace {

using StepSeries = std::map<int64_t, double>;  // last record of a step wins

Curve to_curve(const StepSeries& series) {
  Curve curve;
  for (const auto& [step, value] : series) curve.steps.push_back(step), curve.values.push_back(value);
  return curve;
}

double number_or(const nlohmann::json& object, const char* key, double fallback) {
  auto it = object.find(key);
  return it != object.end() && it->is_number() ? it->get<double>() : fallback;
}

}  // namespace

int64_t RunRecord::steps() const { return summary.value("steps", int64_t{0}); }
int64_t RunRecord::global_batch_size() const { return summary.value("global_batch_size", int64_t{0}); }

namespace {

void read_summary(RunRecord& run, const std::string& dir, std::string& reading) {
  const std::string summary_path = reading = dir + "/summary.json";
  if (!std::filesystem::exists(summary_path))
    throw Error(dir + ": no summary.json; is this a run directory of a run that ended?");
  run.summary = parse_json(read_file(summary_path));
  if (run.summary.is_discarded() || !run.summary.is_object())
    throw Error(summary_path + ": not a JSON object (a damaged summary; rerun the run to rewrite it)");
  run.name = run.summary.value("name", std::filesystem::path(dir).filename().string());
  run.status = run.summary.value("status", "unknown");
  if (run.summary.contains("diagnosis")) run.diagnosis = run.summary["diagnosis"].get<std::string>();
}

// The smallest FP8 scale of one role: the first of its [min, max] range.
double smallest(const nlohmann::json& fp8, const char* key) {
  return fp8.contains(key) && fp8[key].is_array() && !fp8[key].empty() && fp8[key][0].is_number()
             ? fp8[key][0].get<double>()
             : NAN;
}

// The columns of metrics.jsonl by step, filled record by record and turned into the run's curves at the end.
struct MetricSeries {
  StepSeries loss, lr, scale, throughput, eval_loss, eval_accuracy, fp8_input, fp8_weight, fp8_grad;

  void add_train(const nlohmann::json& record, int64_t step) {
    loss[step] = number_or(record, "loss", NAN);
    lr[step] = number_or(record, "lr", NAN);
    scale[step] = number_or(record, "loss_scale", NAN);
    throughput[step] = number_or(record, "samples_per_sec", NAN);
    if (record.contains("fp8") && record["fp8"].is_object()) {
      fp8_input[step] = smallest(record["fp8"], "input_scale");
      fp8_weight[step] = smallest(record["fp8"], "weight_scale");
      fp8_grad[step] = smallest(record["fp8"], "grad_output_scale");
    }
  }

  void add_eval(const nlohmann::json& eval, int64_t step) {
    eval_loss[step] = number_or(eval, "loss", NAN);
    eval_accuracy[step] = number_or(eval, "accuracy", NAN);
  }

  void store(RunRecord& run) const {
    run.train_loss = to_curve(loss), run.lr = to_curve(lr), run.loss_scale = to_curve(scale);
    run.samples_per_sec = to_curve(throughput);
    run.eval_loss = to_curve(eval_loss), run.eval_accuracy = to_curve(eval_accuracy);
    run.fp8_input_scale = to_curve(fp8_input), run.fp8_weight_scale = to_curve(fp8_weight);
    run.fp8_grad_scale = to_curve(fp8_grad);
  }
};

void read_metrics(RunRecord& run, const std::string& dir, std::string& reading) {
  MetricSeries series;
  const std::string metrics_path = reading = dir + "/metrics.jsonl";
  if (std::filesystem::exists(metrics_path)) {
    for (const nlohmann::json& record : read_jsonl_records(metrics_path)) {
      const std::string kind = record.value("kind", "");
      const int64_t step = record.value("step", int64_t{-1});
      if (step < 0) continue;
      if (kind == "train")
        series.add_train(record, step);
      else if (kind == "eval" && record.contains("eval"))
        series.add_eval(record["eval"], step);
    }
  }
  series.store(run);
}

void read_events(RunRecord& run, const std::string& dir, std::string& reading) {
  const std::string events_path = reading = dir + "/events.jsonl";
  if (!std::filesystem::exists(events_path)) return;
  std::map<std::pair<int64_t, std::string>, ScaleEvent> scale_events;  // a resumed run may repeat some
  for (const nlohmann::json& event : read_jsonl_records(events_path)) {
    const std::string kind = event.value("kind", "");
    const int64_t step = event.value("step", int64_t{0});
    if (kind == "backoff" || kind == "growth") {
      scale_events[{step, kind}] = ScaleEvent{step, kind, number_or(event, "new_scale", NAN)};
    } else if (kind == "skip" && event.contains("nonfinite_params")) {
      for (const auto& param : event["nonfinite_params"])
        if (param.contains("name")) ++run.nonfinite_grad_params[param["name"].get<std::string>()];
    } else if (kind == "nonfinite_activation" && event.contains("module")) {
      ++run.nonfinite_activation_modules[event["module"].get<std::string>()];
    } else if (kind == "diverged" && run.diagnosis.empty()) {
      run.diagnosis = event.value("reason", "");
    }
  }
  for (auto& [key, event] : scale_events) run.scale_events.push_back(std::move(event));
}

// `reading` follows the file being read, so that a value of the wrong type is reported with its file.
RunRecord read_run_record(const std::string& dir, std::string& reading) {
  RunRecord run;
  run.dir = dir;
  read_summary(run, dir, reading);
  read_metrics(run, dir, reading);
  read_events(run, dir, reading);
  return run;
}

}  // namespace

RunRecord load_run_record(const std::string& dir) {
  std::string reading = dir;
  try {
    return read_run_record(dir, reading);
  } catch (const nlohmann::json::exception& e) {
    throw Error(reading + ": a value of the wrong type (" + e.what() + "); is the file damaged?");
  }
}

}  // namespace mpt::compare
