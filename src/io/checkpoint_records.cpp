// See checkpoint_records.h.
#include "io/checkpoint_records.h"

#include <functional>
#include <utility>
#include <vector>

namespace mpt::io {
namespace {

const std::vector<std::pair<const char*, std::function<int64_t&(TrainingState&)>>>& integer_fields() {
  static const std::vector<std::pair<const char*, std::function<int64_t&(TrainingState&)>>> fields = {
      {"state.step", [](TrainingState& s) -> int64_t& { return s.step; }},
      {"state.applied_steps", [](TrainingState& s) -> int64_t& { return s.applied_steps; }},
      {"state.skipped_steps", [](TrainingState& s) -> int64_t& { return s.skipped_steps; }},
      {"state.data_epoch", [](TrainingState& s) -> int64_t& { return s.data.epoch; }},
      {"state.data_batch", [](TrainingState& s) -> int64_t& { return s.data.batch; }},
      {"state.data_batch_samples", [](TrainingState& s) -> int64_t& { return s.data.batch_samples; }},
      {"scaler.growth_tracker", [](TrainingState& s) -> int64_t& { return s.scaler.growth_tracker; }},
      {"scaler.backoffs", [](TrainingState& s) -> int64_t& { return s.scaler.backoffs; }},
      {"scaler.growths", [](TrainingState& s) -> int64_t& { return s.scaler.growths; }},
      {"scaler.hysteresis_left", [](TrainingState& s) -> int64_t& { return s.scaler.hysteresis_left; }},
      {"scaler.overflows_at_min", [](TrainingState& s) -> int64_t& { return s.scaler.overflows_at_min; }}};
  return fields;
}

const std::vector<std::pair<const char*, std::function<double&(TrainingState&)>>>& real_fields() {
  static const std::vector<std::pair<const char*, std::function<double&(TrainingState&)>>> fields = {
      {"scaler.scale", [](TrainingState& s) -> double& { return s.scaler.scale; }},
      {"scaler.lowest_scale", [](TrainingState& s) -> double& { return s.scaler.lowest_scale; }}};
  return fields;
}

constexpr const char* kRngRecord = "rng.cpu";
constexpr const char* kLoggingPrefix = "logging.";

}  // namespace

RecordName parse_record_name(const std::string& name) {
  RecordName parsed;
  const auto field_of = [&](const std::string& rest) {
    const size_t dot = rest.rfind('.');
    if (dot == std::string::npos || dot == 0) return false;
    parsed.parameter = rest.substr(0, dot), parsed.field = rest.substr(dot + 1);
    return true;
  };
  if (name.rfind("model.", 0) == 0) {
    parsed.kind = RecordName::Kind::kModel, parsed.parameter = name.substr(6);
  } else if (name.rfind("optimizer.", 0) == 0 && name != kOptimizerKindRecord && field_of(name.substr(10))) {
    parsed.kind = RecordName::Kind::kOptimizer;
  } else if (const size_t at = name.rfind('@');
             name.rfind("piece.", 0) == 0 && at != std::string::npos && field_of(name.substr(6, at - 6))) {
    const std::string start = name.substr(at + 1);
    if (start.empty() || start.size() > 18 || start.find_first_not_of("0123456789") != std::string::npos)
      return RecordName{};
    parsed.kind = RecordName::Kind::kPiece, parsed.start = std::stoll(start);
  }
  return parsed;
}

void write_training_state(CheckpointWriter& writer, const TrainingState& state) {
  TrainingState copy = state;
  for (const auto& [name, field] : integer_fields()) writer.integer(name, field(copy));
  for (const auto& [name, field] : real_fields()) writer.real(name, field(copy));
  if (state.rng_state.defined()) writer.tensor(kRngRecord, state.rng_state);
  for (const auto& item : state.logging) writer.tensor(kLoggingPrefix + item.key(), item.value());
}

bool read_training_state(const Record& record, CheckpointReader& reader, TrainingState& state) {
  for (const auto& [name, field] : integer_fields())
    if (record.name == name && record.kind == RecordKind::kInteger) return field(state) = record.integer, true;
  for (const auto& [name, field] : real_fields())
    if (record.name == name && record.kind == RecordKind::kReal) return field(state) = record.real, true;
  if (record.kind != RecordKind::kTensor) return false;
  if (record.name == kRngRecord) return state.rng_state = reader.read_tensor(), true;
  if (record.name.rfind(kLoggingPrefix, 0) != 0) return false;
  state.logging.insert(record.name.substr(std::string(kLoggingPrefix).size()), reader.read_tensor());
  return true;
}

}  // namespace mpt::io
