// See checkpoint_load.h. A load reads every file twice: the first pass checks every record (shapes, layouts, finite
// values, the pieces covering each parameter, the training state) with one tensor staged at a time, so that a
// refused checkpoint leaves the model and optimizer as they were; the second copies each record into its target.
#include "io/checkpoint_load.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <functional>
#include <map>
#include <optional>

#include "common/echo.h"
#include "common/error.h"
#include "common/json.h"
#include "io/checkpoint_content.h"
#include "io/checkpoint_records.h"
#include "ops/optimizer_state.h"

namespace mpt::io {
namespace {

namespace fs = std::filesystem;

// A file of a checkpoint and, for a shard, what the main file's index says it is.
struct CheckpointFile {
  std::string path;
  std::optional<CommittedFile> expected;
};

// The main file, then the shards its first record (the index) names; "" or why the index cannot be used.
std::string read_index(const std::string& main, std::vector<CheckpointFile>& files) {
  files = {{main, std::nullopt}};
  CheckpointReader reader(main);
  Record record;
  if (!reader.next(record) || record.name != kShardIndexRecord || record.kind != RecordKind::kText) return "";
  const nlohmann::json index = parse_json(reader.read_text());
  const std::string at = "byte " + std::to_string(record.offset) + ": the shard index ";
  if (!index.is_object() || !index.contains("shards") || !index["shards"].is_array())
    return at + "is not a JSON object with a list of shards";
  for (const auto& shard : index["shards"]) {
    const auto field = [&](const char* key) {
      return shard.is_object() ? shard.value(key, nlohmann::json()) : nullptr;
    };
    if (!field("file").is_string() || !field("bytes").is_number_unsigned() || !field("crc").is_number_unsigned())
      return at + "holds an entry that is not {file, bytes, crc}";
    const std::string name = shard["file"];
    if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos)
      return at + "names a file outside its folder: " + echo(name);
    files.push_back({(fs::path(main).parent_path() / name).string(),
                     CommittedFile{shard["bytes"].get<uint64_t>(), shard["crc"].get<uint32_t>()}});
  }
  return "";
}

std::vector<CheckpointFile> files_of(const std::string& main) {
  std::vector<CheckpointFile> files;
  if (const std::string problem = read_index(main, files); !problem.empty()) throw Error(main + ": " + problem);
  return files;
}

std::string not_the_shard(const std::string& path) {
  return path +
         ": not the shard this checkpoint's save wrote (its size or CRC differs from the index: a shard of an "
         "earlier, interrupted save?)";
}

// Every record of every file to `visit`; a shard must be the very file the index names.
void for_each_record(const std::vector<CheckpointFile>& files,
                     const std::function<void(CheckpointReader&, const Record&)>& visit) {
  for (const auto& file : files) {
    CheckpointReader reader(file.path);
    for (Record record; reader.next(record);) visit(reader, record);
    const CommittedFile got = reader.committed();
    if (file.expected && (got.bytes != file.expected->bytes || got.crc != file.expected->crc))
      throw Error(not_the_shard(file.path));
  }
}

std::string shape_text(torch::IntArrayRef sizes) { return c10::str(sizes); }

// One load into a model (and optimizer): the first pass's checks, then the second pass's copies.
class StreamedLoad {
 public:
  StreamedLoad(const ModelTensors& model, torch::optim::Optimizer* optimizer) : optimizer_(optimizer) {
    for (const auto& item : model.parameters) targets_[item.key()] = {item.value(), true};
    for (const auto& item : model.buffers) targets_[item.key()] = {item.value(), false};
  }

  void check(CheckpointReader& reader, const Record& record) {
    if (read_training_state(record, reader, state_)) return;
    if (record.name == kOptimizerKindRecord && record.kind == RecordKind::kText) {
      kind_ = reader.read_text();
      return;
    }
    const RecordName name = parse_record_name(record.name);
    if (name.kind == RecordName::Kind::kModel) check_model(reader, record, name.parameter);
    if (name.kind == RecordName::Kind::kOptimizer) check_state(reader, record, name, false);
    if (name.kind == RecordName::Kind::kPiece) check_state(reader, record, name, true);
  }

  // After the first pass: every tensor there, whole or in pieces; the content trusted, or RejectedCheckpoint.
  void finish_check(const std::string& path, const ContentCheck& content_check) {
    for (const auto& [name, target] : targets_)
      if (!target.seen || target.covered != target.tensor.numel())
        throw Error(target.seen ? fmt::format("{}: its shards hold {} of the {} elements of '{}'", path, target.covered,
                                              target.tensor.numel(), name)
                                : path + ": has no tensor '" + name + "'; was it written for a different model?");
    const std::string kind = optimizer_ ? ops::optimizer_kind(*optimizer_) : "";
    if (!kind_.empty() && !kind.empty() && kind_ != kind)
      throw Error(path + ": holds the state of optimizer " + echo(kind_) + ", this run's optimizer is " + kind);
    for (const std::string& problem :
         {training_state_problem(state_), content_check ? content_check(buffers_) : std::string(), problem_})
      if (!problem.empty()) throw RejectedCheckpoint(path, problem);
  }

  void load(CheckpointReader& reader, const Record& record) {
    const RecordName name = parse_record_name(record.name);
    const auto found = targets_.find(name.parameter);
    if (name.kind == RecordName::Kind::kOther || found == targets_.end()) return;
    const torch::Tensor& target = found->second.tensor;
    if (name.kind != RecordName::Kind::kModel && !found->second.parameter) return;
    if (name.kind == RecordName::Kind::kModel) {
      if (record.kind == RecordKind::kTensor) reader.read_into(target);
    } else if (name.kind == RecordName::Kind::kPiece && name.field == "master") {
      reader.read_into(memory_order(target).narrow(0, name.start, record.sizes[0]));
    } else if (optimizer_) {
      load_state(reader, record, name, target);
    }
  }

  const TrainingState& state() const { return state_; }

 private:
  struct Target {
    torch::Tensor tensor;
    bool parameter = false;
    bool seen = false, pieces = false;
    int64_t covered = 0;  // elements read, whole or in pieces
  };

  void note(const std::string& problem) {
    if (problem_.empty()) problem_ = problem;
  }

  Target* parameter(const std::string& name) {
    const auto found = targets_.find(name);
    return found != targets_.end() && found->second.parameter ? &found->second : nullptr;
  }

  void check_model(CheckpointReader& reader, const Record& record, const std::string& name) {
    const auto found = targets_.find(name);
    if (found == targets_.end()) return;  // a tensor this model does not have: left unread
    Target& target = found->second;
    const auto fail = [&](const std::string& why) { throw Error(reader.path() + ": tensor '" + name + "' " + why); };
    if (torch::IntArrayRef(record.sizes) != target.tensor.sizes())
      fail("has shape " + shape_text(record.sizes) + ", the model expects " + shape_text(target.tensor.sizes()) +
           " (a different model spec?)");
    target.seen = true;
    if (record.kind == RecordKind::kPieces) {
      if (!target.parameter || torch::IntArrayRef(record.strides) != target.tensor.strides())
        fail("was cut into pieces laid out as " + shape_text(record.strides) + ", the model's as " +
             shape_text(target.tensor.strides()) + " (a different model.channels_last?)");
      target.pieces = true;
      return;
    }
    if (record.kind != RecordKind::kTensor) fail("is not a tensor");
    const torch::Tensor saved = reader.read_tensor();
    note(tensor_problem(name, saved, false));
    if (!target.parameter) buffers_.insert(name, saved);
    target.covered = saved.numel();
  }

  // An optimizer.* record (`piece` false) or a piece.* record: a step, or a tensor of a parameter's state or master.
  void check_state(CheckpointReader& reader, const Record& record, const RecordName& name, bool piece) {
    Target* target = parameter(name.parameter);
    if (!target) return;
    const std::string what = (name.field == "master" ? "master" : "optimizer." + name.field) + " of " + name.parameter;
    if (name.field == "step") {
      if (record.kind != RecordKind::kInteger) throw Error(reader.path() + ": " + what + " is not an integer");
      if (record.integer < 0) note(fmt::format("{} is {}: expected a count >= 0", what, record.integer));
      return;
    }
    const auto expected =
        piece ? std::vector<int64_t>{record.sizes.empty() ? -1 : record.sizes[0]} : target->tensor.sizes().vec();
    const bool fits = !piece || (record.sizes.size() == 1 && name.start <= target->tensor.numel() - record.sizes[0]);
    if (record.kind != RecordKind::kTensor || record.sizes != expected || !fits ||
        (name.field == "master" && !target->pieces))
      throw Error(reader.path() + ": " + what + (piece ? fmt::format(" at element {}", name.start) : "") +
                  " has shape " + shape_text(record.sizes) + ", which does not fit the parameter's " +
                  shape_text(target->tensor.sizes()));
    note(tensor_problem(what, reader.read_tensor(), second_moment(name.field)));
    if (name.field == "master") target->covered += record.sizes[0];
  }

  void load_state(CheckpointReader& reader, const Record& record, const RecordName& name, const torch::Tensor& target) {
    auto& slot = optimizer_->state()[target.unsafeGetTensorImpl()];
    if (!slot) slot = ops::fresh_state(*optimizer_);
    const ops::StateFields fields = ops::fields_of(*slot);
    if (name.field == "step") {
      if (fields.step) *fields.step = record.integer;
      return;
    }
    for (const auto& [field, tensor] : fields.tensors) {
      if (name.field != field) continue;
      if (!tensor->defined()) *tensor = torch::zeros_like(target, torch::MemoryFormat::Preserve);
      const torch::Tensor into = name.kind == RecordName::Kind::kPiece
                                     ? memory_order(*tensor).narrow(0, name.start, record.sizes[0])
                                     : *tensor;
      reader.read_into(into);
    }
  }

  torch::optim::Optimizer* optimizer_;
  std::map<std::string, Target> targets_;
  NamedTensors buffers_;  // read in the first pass for the content check (FP8 state among them)
  TrainingState state_;
  std::string kind_, problem_;
};

}  // namespace

std::string verify_streamed(const std::string& path) {
  if (std::string problem = verify_stream(path); !problem.empty()) return problem;
  std::vector<CheckpointFile> files;
  try {
    if (std::string problem = read_index(path, files); !problem.empty()) return problem;
  } catch (const Error& e) {
    return e.what();
  }
  for (size_t i = 1; i < files.size(); ++i) {
    CommittedFile got;
    const std::string name = fs::path(files[i].path).filename().string();
    if (std::string problem = verify_stream(files[i].path, &got); !problem.empty())
      return "shard " + name + ": " + problem;
    if (got.bytes != files[i].expected->bytes || got.crc != files[i].expected->crc) return not_the_shard(name);
  }
  return "";
}

TrainingState load_streamed(const std::string& path, const ModelTensors& model, torch::optim::Optimizer& optimizer,
                            const ContentCheck& check) {
  try {
    const std::vector<CheckpointFile> files = files_of(path);
    StreamedLoad load(model, &optimizer);
    for_each_record(files, [&](CheckpointReader& reader, const Record& record) { load.check(reader, record); });
    load.finish_check(path, check);
    torch::NoGradGuard no_grad;
    optimizer.state().clear();
    for_each_record(files, [&](CheckpointReader& reader, const Record& record) { load.load(reader, record); });
    return load.state();
  } catch (const c10::Error& e) {
    throw Error(path + ": unreadable checkpoint: " + e.what_without_backtrace());
  }
}

std::vector<std::pair<std::string, torch::Tensor>> read_weights_streamed(const std::string& path) {
  std::vector<std::pair<std::string, torch::Tensor>> weights;
  std::map<std::string, std::pair<size_t, int64_t>> assembled;  // a sharded master: its place, the elements read
  try {
    for_each_record(files_of(path), [&](CheckpointReader& reader, const Record& record) {
      const RecordName name = parse_record_name(record.name);
      // Under model.: the weights and buffers, and FP8 scaling state (training state, not weights).
      if (name.kind == RecordName::Kind::kModel && name.parameter.rfind("fp8.", 0) != 0) {
        if (record.kind == RecordKind::kTensor) weights.emplace_back(name.parameter, reader.read_tensor());
        if (record.kind != RecordKind::kPieces) return;
        if (!dense_layout(record.sizes, record.strides))
          throw Error(reader.path() + ": tensor '" + name.parameter + "' declares a layout that is not dense");
        assembled[name.parameter] = {weights.size(), 0};
        weights.emplace_back(name.parameter, torch::empty_strided(record.sizes, record.strides, record.dtype));
      } else if (name.kind == RecordName::Kind::kPiece && name.field == "master" && assembled.count(name.parameter)) {
        auto& [at, covered] = assembled[name.parameter];
        const torch::Tensor whole = memory_order(weights[at].second);
        if (record.sizes.size() != 1 || name.start > whole.numel() - record.sizes[0])
          throw Error(reader.path() + ": a piece of '" + name.parameter + "' that does not fit it");
        reader.read_into(whole.narrow(0, name.start, record.sizes[0]));
        covered += record.sizes[0];
      }
    });
  } catch (const c10::Error& e) {
    throw Error(path + ": unreadable checkpoint: " + e.what_without_backtrace());
  }
  for (const auto& [name, place] : assembled)
    if (place.second != weights[place.first].second.numel())
      throw Error(fmt::format("{}: its shards hold {} of the {} elements of '{}'", path, place.second,
                              weights[place.first].second.numel(), name));
  return weights;
}

}  // namespace mpt::io
