// The record names of a streamed checkpoint (io/checkpoint_stream.h), shared by its writer and its reader:
//   checkpoint.shards            text: the index of a sharded checkpoint's main file (its first record)
//   optimizer.kind               text: adam, adamw or sgd
//   model.<name>                 a parameter (FP32) or buffer; a pieces record when only shards hold its elements
//   optimizer.<name>.<field>     a parameter's optimizer state: step (integer), exp_avg, exp_avg_sq, ...
//   piece.<name>.<field>@<start> a run of a parameter's elements in memory order: master, exp_avg, ...; step
//   state.*, scaler.*, rng.cpu, logging.*   the training state
#pragma once

#include <string>

#include "io/checkpoint.h"
#include "io/checkpoint_stream.h"

namespace mpt::io {

inline constexpr const char* kShardIndexRecord = "checkpoint.shards";
inline constexpr const char* kOptimizerKindRecord = "optimizer.kind";

inline std::string model_record(const std::string& name) { return "model." + name; }
inline std::string optimizer_record(const std::string& parameter, const std::string& field) {
  return "optimizer." + parameter + "." + field;
}

// A record name taken apart: the parameter and field of optimizer.* and piece.* records, a piece's start.
struct RecordName {
  enum class Kind { kModel, kOptimizer, kPiece, kOther } kind = Kind::kOther;
  std::string parameter, field;
  int64_t start = 0;
};
RecordName parse_record_name(const std::string& name);

void write_training_state(CheckpointWriter& writer, const TrainingState& state);
// Reads `record` into `state` when it is one of the training state's; false (nothing read) otherwise.
bool read_training_state(const Record& record, CheckpointReader& reader, TrainingState& state);

}  // namespace mpt::io
