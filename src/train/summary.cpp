// summary.json fields; names are a contract (README "Run directory").
#include "train/summary.h"

#include <torch/version.h>

#include "mpt/version.h"

namespace mpt::train {

namespace {

nlohmann::json resident(int64_t bytes) { return bytes < 0 ? nlohmann::json() : nlohmann::json(bytes); }

}  // namespace

nlohmann::json make_summary(const TrainResult& result, const RunContext& context) {
  nlohmann::json summary = {
      {"name", context.name},
      {"status", result.status},
      {"steps", result.steps},
      {"total_steps", context.total_steps},
      {"skipped_steps", result.skipped_steps},
      {"train", {{"loss", result.train_loss}, {"accuracy", result.train_accuracy}}},
      {"loss_scale",
       {{"mode", context.loss_scale_mode},
        {"final", result.scaler.scale},
        {"min", result.scaler.lowest_scale},
        {"backoffs", result.scaler.backoffs},
        {"growths", result.scaler.growths}}},
      {"samples_per_sec", result.train_time_sec > 0 ? result.samples_trained / result.train_time_sec : 0.0},
      {"step_time_ms", {{"median", result.median_step_ms}, {"p90", result.p90_step_ms}}},
      {"global_batch_size", context.global_batch_size},
      {"peak_memory_bytes", context.memory.training},  // the mixed-vs-FP32 answer: the training steps' peak
      {"memory",
       {{"kind", context.memory.kind},
        {"training_peak_bytes", context.memory.training},
        {"evaluation_peak_bytes", context.memory.evaluation},
        {"checkpoint_peak_bytes", context.memory.checkpoint},
        {"process_peak_bytes", context.memory.process},
        {"resident_peak_bytes",
         {{"training", resident(context.memory.training_resident)},
          {"evaluation", resident(context.memory.evaluation_resident)},
          {"checkpoint", resident(context.memory.checkpoint_resident)}}}}},
      {"wall_time_sec", context.wall_time_sec},
      {"started_at", context.started_at},
      {"ended_at", context.ended_at},
      {"precision", context.precision_mode},
      {"precision_strategy", context.precision_strategy},
      {"fp32_modules", {{"patterns", context.fp32_modules}, {"origin", context.fp32_modules_origin}}},
      {"device", context.device},
      {"tf32", context.tf32},
      {"threads", context.threads},
      {"blas", context.blas},
      {"versions", {{"mpt", kVersion}, {"git", kGitHash}, {"libtorch", TORCH_VERSION}}},
  };
  summary["eval"] = result.eval ? nlohmann::json{{"loss", result.eval->loss},
                                                 {"accuracy", result.eval->accuracy},
                                                 {"samples", result.eval->samples}}
                                : nlohmann::json::object();
  if (!result.diagnosis.empty()) summary["diagnosis"] = result.diagnosis;
  if (!result.resumed_from.empty()) summary["resumed_from"] = result.resumed_from;
  if (context.world_size > 1) {
    summary["distributed"] = {{"world_size", context.world_size},
                              {"backend", context.distributed_backend},
                              {"ranks_agree", result.ranks_agree}};
    if (!result.ranks_agree) summary["distributed"]["disagreement"] = result.ranks_disagreement;
  }
  return summary;
}

}  // namespace mpt::train
