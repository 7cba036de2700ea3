// Writing checkpoints in the streamed format, the checkpoints/ folder, and which reader a file needs: the streamed
// format's is checkpoint_load.cpp, the first format's checkpoint_v1.cpp.
#include "io/checkpoint.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>

#include "common/error.h"
#include "common/files.h"
#include "io/checkpoint_load.h"
#include "io/checkpoint_records.h"
#include "io/checkpoint_v1.h"
#include "ops/optimizer_state.h"

namespace mpt::io {
namespace {

namespace fs = std::filesystem;

constexpr const char* kShardInfix = ".shard-";

// The parameters (those in `pieces` as pieces records, their elements in the shards), then the buffers.
void write_model(CheckpointWriter& writer, const ModelTensors& model,
                 const std::map<std::string, std::vector<int64_t>>& pieces) {
  for (const auto& item : model.parameters) {
    const auto sharded = pieces.find(item.key());
    if (sharded == pieces.end())
      writer.tensor(model_record(item.key()), item.value());
    else
      writer.pieces(model_record(item.key()), torch::kFloat, item.value().sizes(), sharded->second);
  }
  for (const auto& item : model.buffers) writer.tensor(model_record(item.key()), item.value());
}

void write_optimizer(CheckpointWriter& writer, const NamedTensors& parameters, torch::optim::Optimizer& optimizer) {
  writer.text(kOptimizerKindRecord, ops::optimizer_kind(optimizer));
  for (const auto& item : parameters) {
    const auto found = optimizer.state().find(item.value().unsafeGetTensorImpl());
    if (found == optimizer.state().end()) continue;  // no step yet
    const ops::StateFields fields = ops::fields_of(*found->second);
    if (fields.step) writer.integer(optimizer_record(item.key(), "step"), *fields.step);
    for (const auto& [field, tensor] : fields.tensors)
      if (tensor->defined()) writer.tensor(optimizer_record(item.key(), field), *tensor);
  }
}

nlohmann::json index_of(const std::string& main_path, const std::vector<CommittedFile>& shards) {
  nlohmann::json files = nlohmann::json::array();
  for (size_t rank = 0; rank < shards.size(); ++rank)
    files.push_back(
        {{"file",
          fs::path(shard_path(main_path, static_cast<int>(rank), static_cast<int>(shards.size()))).filename().string()},
         {"bytes", shards[rank].bytes},
         {"crc", shards[rank].crc}});
  return {{"world_size", shards.size()}, {"shards", files}};
}

// Why `path` cannot be read as a checkpoint at all, when it is not one of either format.
std::string not_a_checkpoint(const std::string& path) {
  if (std::string problem = path_problem(path, PathKind::kFile); !problem.empty()) return problem;
  if (const uintmax_t size = fs::file_size(path); size < 40)
    return "only " + std::to_string(size) + " bytes; a checkpoint has at least 40 (truncated?)";
  return "byte 0: not an mpt checkpoint (bad magic, or a format version this mpt does not read)";
}

}  // namespace

ModelTensors tensors_of(torch::nn::Module& model) { return {model.named_parameters(), model.named_buffers()}; }

std::string shard_path(const std::string& main_path, int rank, int world_size) {
  const fs::path main(main_path);
  return (main.parent_path() / fmt::format("{}{}{}-of-{}.mpt", main.stem().string(), kShardInfix, rank, world_size))
      .string();
}

std::string piece_record(const std::string& parameter, const std::string& field, int64_t start) {
  return "piece." + parameter + "." + field + "@" + std::to_string(start);
}

torch::Tensor memory_order(const torch::Tensor& tensor) {
  MPT_CHECK(tensor.is_non_overlapping_and_dense(), "a piece of a tensor that is not dense");
  return tensor.as_strided({tensor.numel()}, {1}, tensor.storage_offset());
}

void save_checkpoint(const std::string& path, const ModelTensors& model, torch::optim::Optimizer& optimizer,
                     const TrainingState& state) {
  CheckpointWriter writer(path);
  write_model(writer, model, {});
  write_optimizer(writer, model.parameters, optimizer);
  write_training_state(writer, state);
  writer.commit();
}

void save_sharded_main(const std::string& path, const ModelTensors& model, const std::string& optimizer_kind,
                       const TrainingState& state, const ShardedMasters& sharded) {
  CheckpointWriter writer(path);
  writer.text(kShardIndexRecord, index_of(path, sharded.shards).dump());
  writer.text(kOptimizerKindRecord, optimizer_kind);
  write_model(writer, model, sharded.strides);
  write_training_state(writer, state);
  writer.commit();
}

std::string verify_checkpoint(const std::string& path) {
  switch (checkpoint_version(path)) {
    case 1: return verify_v1(path);
    case kStreamVersion: return verify_streamed(path);
    default: return not_a_checkpoint(path);
  }
}

TrainingState load_checkpoint(const std::string& path, const ModelTensors& model, torch::optim::Optimizer& optimizer,
                              const ContentCheck& check) {
  switch (checkpoint_version(path)) {
    case 1: return load_v1(path, model, optimizer, check);
    case kStreamVersion: return load_streamed(path, model, optimizer, check);
    default: throw Error(path + ": " + not_a_checkpoint(path));
  }
}

std::vector<std::pair<std::string, torch::Tensor>> read_checkpoint_weights(const std::string& path) {
  switch (checkpoint_version(path)) {
    case 1: return read_weights_v1(path);
    case kStreamVersion: return read_weights_streamed(path);
    default: throw Error(path + ": " + not_a_checkpoint(path));
  }
}

CheckpointStore::CheckpointStore(std::string folder, int64_t keep_last)
    : folder_(std::move(folder)), keep_last_(keep_last) {
  fs::create_directories(folder_);
  // A writer killed mid-save leaves only its temp file behind (the rename never happened): clear those.
  std::error_code ignored;  // every rank may clear the same file at start-up
  for (const auto& entry : fs::directory_iterator(folder_))
    if (entry.path().filename().string().find(".mpt.tmp.") != std::string::npos) fs::remove(entry.path(), ignored);
}

std::string CheckpointStore::path_in(const std::string& folder, int64_t step) {
  return folder + fmt::format("/step-{:09d}.mpt", step);
}

std::string CheckpointStore::save(const ModelTensors& model, torch::optim::Optimizer& optimizer,
                                  const TrainingState& state) {
  const std::string path = path_for(state.step);
  save_checkpoint(path, model, optimizer, state);
  prune();
  return path;
}

std::string CheckpointStore::save_sharded(const ModelTensors& model, const std::string& optimizer_kind,
                                          const TrainingState& state, const ShardedMasters& sharded) {
  const std::string path = path_for(state.step);
  save_sharded_main(path, model, optimizer_kind, state, sharded);
  prune();
  return path;
}

std::vector<std::pair<int64_t, std::string>> CheckpointStore::list() const {
  std::vector<std::pair<int64_t, std::string>> found;
  for (const auto& entry : fs::directory_iterator(folder_))
    if (const int64_t step = step_of(entry.path().string()); step >= 0) found.emplace_back(step, entry.path().string());
  std::sort(found.rbegin(), found.rend());
  return found;
}

// Keeps the newest keep_last checkpoints; shards go with their main file, and shards whose main file was never
// written (a save killed between the shards and the main file) go too.
void CheckpointStore::prune() const {
  const auto all = list();
  for (size_t i = static_cast<size_t>(keep_last_); i < all.size(); ++i) fs::remove(all[i].second);
  for (const auto& entry : fs::directory_iterator(folder_)) {
    const std::string name = entry.path().filename().string();
    const size_t infix = name.find(kShardInfix);
    if (infix == std::string::npos || name.find(".mpt.tmp.") != std::string::npos) continue;
    if (!fs::exists(folder_ + "/" + name.substr(0, infix) + ".mpt")) fs::remove(entry.path());
  }
}

int64_t CheckpointStore::step_of(const std::string& path) {
  long long step = 0;
  char tail[8] = {0};
  const std::string name = fs::path(path).filename().string();
  return std::sscanf(name.c_str(), "step-%lld.%7s", &step, tail) == 2 && std::string(tail) == "mpt" ? step : -1;
}

std::optional<std::string> CheckpointStore::latest_valid(
    const std::function<void(const std::string&, const std::string&)>& on_rejected, int64_t before_step) const {
  for (const auto& [step, path] : list()) {
    if (step >= before_step) continue;
    std::string problem = verify_checkpoint(path);
    if (problem.empty()) return path;
    on_rejected(path, problem);
  }
  return std::nullopt;
}

}  // namespace mpt::io
