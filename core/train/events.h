// Structured run events (events.jsonl) with a readable twin in the log: every loss-scale backoff and growth,
// every skipped step, checkpoints written and rejected, resumes, divergence.
#pragma once

#include <spdlog/spdlog.h>

#include <memory>
#include <string>

#include "core/data/loader.h"
#include "core/io/files.h"
#include "core/precision/diagnosis.h"
#include "core/precision/loss_scaler.h"
#include "core/precision/numerics.h"

namespace mpt::train {

class EventLog {
 public:
  EventLog(const std::string& path, std::shared_ptr<spdlog::logger> logger)
      : writer_(path), logger_(std::move(logger)) {}

  void skipped_step(int64_t step, double scale, int64_t skipped_so_far, const std::string& reason,
                    const std::vector<precision::NonfiniteGrad>& culprits);
  void scale_change(int64_t step, const precision::ScaleUpdate& update, int64_t skipped_so_far);
  void nonfinite_activation(int64_t step, const precision::NonfiniteActivation& activation);
  void checkpoint_saved(int64_t step, const std::string& path);
  void checkpoint_rejected(const std::string& path, const std::string& why);
  void resumed(int64_t step, const std::string& path);
  // A checkpoint from a run with another global batch (world size): the data position was converted.
  void data_resharded(int64_t step, const data::DataPosition& saved, const data::DataPosition& now);
  void diverged(int64_t step, const std::string& diagnosis);

 private:
  void record(nlohmann::json event);

  io::JsonlWriter writer_;
  std::shared_ptr<spdlog::logger> logger_;
};

}  // namespace mpt::train
