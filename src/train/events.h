// Structured run events (events.jsonl) with a readable twin in the log: every loss-scale backoff and growth,
// every skipped step, checkpoints written and rejected, resumes, divergence.
#pragma once

#include <spdlog/spdlog.h>

#include <memory>
#include <string>

#include "common/files.h"
#include "data/loader.h"
#include "precision/diagnosis.h"
#include "precision/gemm_format.h"
#include "precision/loss_scaler.h"
#include "precision/numerics.h"

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
  // A crash left `path` ending in a partial line; its `bytes` were cut before appending.
  void torn_tail_cut(const std::string& path, int64_t bytes);
  // A checkpoint from a run with another global batch (world size): the data position was converted.
  void data_resharded(int64_t step, const data::DataPosition& saved, const data::DataPosition& now);
  void diverged(int64_t step, const std::string& diagnosis);
  // This process stops on an error (`rank` of a data-parallel job: a collective failed when a peer died, an I/O
  // error, ...); the run's summary.json says "failed" too.
  void failed(int64_t step, int rank, const std::string& reason);
  // An FP8 tensor's scale moved by more than 2x since its last event, or its casts saturated (at log points).
  void fp8_scale(int64_t step, const precision::GemmScaleEvent& change);

  JsonlWriter& jsonl() { return writer_; }  // the file, for a resume to rewind (run/run_dir.h)

 private:
  void record(nlohmann::json event);

  JsonlWriter writer_;
  std::shared_ptr<spdlog::logger> logger_;
};

}  // namespace mpt::train
