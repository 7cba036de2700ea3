// Checkpoint container: "MPTCKPT\n" | u32 version | u32 crc32(payload) | u64 payload length | payload |
// "MPTDONE\n", little-endian. The payload is a torch::serialize archive (a zip), so tensors keep their dtypes.
#include "io/checkpoint.h"

#include <fmt/format.h>
#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <limits>
#include <sstream>

#include "common/error.h"
#include "common/files.h"
#include "io/checkpoint_content.h"
#include "io/torch_pickle.h"

namespace mpt::io {
namespace {

constexpr char kMagic[8] = {'M', 'P', 'T', 'C', 'K', 'P', 'T', '\n'};
constexpr char kTrailer[8] = {'M', 'P', 'T', 'D', 'O', 'N', 'E', '\n'};
constexpr uint32_t kVersion = 1;
constexpr size_t kHeaderBytes = 24;
constexpr const char* kLoggingPrefix = "logging.";

template <typename T>
void put(std::string& out, T value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof(T));
}
template <typename T>
T get(const std::string& in, size_t offset) {
  T value;
  std::memcpy(&value, in.data() + offset, sizeof(T));
  return value;
}

uint32_t crc_of(const char* data, size_t size) {
  return static_cast<uint32_t>(crc32(0L, reinterpret_cast<const Bytef*>(data), static_cast<uInt>(size)));
}

// Returns "" and sets `payload_offset`/`payload_size` when the container is sound.
std::string check_container(const std::string& bytes, size_t* payload_size) {
  if (bytes.size() < kHeaderBytes + sizeof(kTrailer))
    return "only " + std::to_string(bytes.size()) + " bytes; a checkpoint has at least 32 (truncated?)";
  if (std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0) return "byte 0: not an mpt checkpoint (bad magic)";
  if (uint32_t version = get<uint32_t>(bytes, 8); version != kVersion)
    return "byte 8: format version " + std::to_string(version) + ", this mpt reads version " + std::to_string(kVersion);
  const uint64_t size = get<uint64_t>(bytes, 16);
  if (bytes.size() != kHeaderBytes + size + sizeof(kTrailer))
    return "byte 16: header promises a " + std::to_string(size) + "-byte payload, the file has room for " +
           std::to_string(
               bytes.size() >= kHeaderBytes + sizeof(kTrailer) ? bytes.size() - kHeaderBytes - sizeof(kTrailer) : 0) +
           " (truncated or overwritten)";
  if (std::memcmp(bytes.data() + kHeaderBytes + size, kTrailer, sizeof(kTrailer)) != 0)
    return "byte " + std::to_string(kHeaderBytes + size) + ": missing the completion trailer";
  if (crc_of(bytes.data() + kHeaderBytes, size) != get<uint32_t>(bytes, 12))
    return "bytes " + std::to_string(kHeaderBytes) + ".." + std::to_string(kHeaderBytes + size) +
           ": CRC-32 mismatch (the payload is corrupt)";
  // LibTorch's reader trusts each tensor's declared size: a CRC-valid file can still declare more than it holds.
  if (std::string problem = check_archive_storages(bytes.data() + kHeaderBytes, size, "payload"); !problem.empty())
    return problem;
  *payload_size = size;
  return "";
}

int64_t read_int(torch::serialize::InputArchive& archive, const std::string& key) {
  c10::IValue value;
  archive.read(key, value);
  return value.toInt();
}
double read_double(torch::serialize::InputArchive& archive, const std::string& key) {
  c10::IValue value;
  archive.read(key, value);
  return value.toDouble();
}

TrainingState read_state(torch::serialize::InputArchive& archive) {
  TrainingState state;
  state.step = read_int(archive, "state.step");
  state.applied_steps = read_int(archive, "state.applied_steps");
  state.skipped_steps = read_int(archive, "state.skipped_steps");
  state.data = {read_int(archive, "state.data_epoch"), read_int(archive, "state.data_batch")};
  if (c10::IValue samples; archive.try_read("state.data_batch_samples", samples))  // since distributed runs
    state.data.batch_samples = samples.toInt();
  state.scaler = {read_double(archive, "scaler.scale"),        read_int(archive, "scaler.growth_tracker"),
                  read_int(archive, "scaler.backoffs"),        read_int(archive, "scaler.growths"),
                  read_double(archive, "scaler.lowest_scale"), read_int(archive, "scaler.hysteresis_left"),
                  read_int(archive, "scaler.overflows_at_min")};
  archive.read("rng.cpu", state.rng_state);
  for (const std::string& key : archive.keys()) {
    torch::Tensor tensor;
    if (key.rfind(kLoggingPrefix, 0) == 0 && archive.try_read(key, tensor))
      state.logging.insert(key.substr(std::string(kLoggingPrefix).size()), tensor);
  }
  return state;
}

// What a CRC-valid checkpoint can still hold that training must not resume from: counters that do not add up,
// a loss scale outside FP32's positive finite range (which would skip every step without backing off).
std::string check_state(const TrainingState& state) {
  if (state.step < 0 || state.applied_steps < 0 || state.skipped_steps < 0 ||
      state.applied_steps + state.skipped_steps != state.step)
    return fmt::format("state.step {} is not state.applied_steps {} + state.skipped_steps {}", state.step,
                       state.applied_steps, state.skipped_steps);
  if (state.data.epoch < 0 || state.data.batch < 0 || state.data.batch_samples < 0)
    return fmt::format("state.data_epoch {} / state.data_batch {}: expected positions >= 0", state.data.epoch,
                       state.data.batch);
  constexpr double kFp32Max = std::numeric_limits<float>::max();
  for (const auto& [name, value] :
       {std::pair{"scaler.scale", state.scaler.scale}, std::pair{"scaler.lowest_scale", state.scaler.lowest_scale}})
    if (!(value > 0 && value <= kFp32Max))
      return fmt::format("{} = {}: expected a loss scale in (0, 3.40282e+38], FP32's positive finite range", name,
                         value);
  if (state.scaler.growth_tracker < 0 || state.scaler.backoffs < 0 || state.scaler.growths < 0 ||
      state.scaler.hysteresis_left < 0 || state.scaler.overflows_at_min < 0)
    return "a negative loss-scaler counter (scaler.growth_tracker, backoffs, growths, hysteresis_left or "
           "overflows_at_min)";
  return "";
}

}  // namespace

ModelTensors tensors_of(torch::nn::Module& model) { return {model.named_parameters(), model.named_buffers()}; }

void save_checkpoint(const std::string& path, const ModelTensors& model, torch::optim::Optimizer& optimizer,
                     const TrainingState& state) {
  torch::serialize::OutputArchive archive;
  for (const auto& item : model.parameters) archive.write("model." + item.key(), item.value().detach().cpu());
  for (const auto& item : model.buffers) archive.write("model." + item.key(), item.value().cpu(), true);
  torch::serialize::OutputArchive optimizer_archive;
  optimizer.save(optimizer_archive);
  archive.write("optimizer", optimizer_archive);
  archive.write("state.step", state.step);
  archive.write("state.applied_steps", state.applied_steps);
  archive.write("state.skipped_steps", state.skipped_steps);
  archive.write("state.data_epoch", state.data.epoch);
  archive.write("state.data_batch", state.data.batch);
  archive.write("state.data_batch_samples", state.data.batch_samples);
  archive.write("scaler.scale", state.scaler.scale);
  archive.write("scaler.growth_tracker", state.scaler.growth_tracker);
  archive.write("scaler.backoffs", state.scaler.backoffs);
  archive.write("scaler.growths", state.scaler.growths);
  archive.write("scaler.lowest_scale", state.scaler.lowest_scale);
  archive.write("scaler.hysteresis_left", state.scaler.hysteresis_left);
  archive.write("scaler.overflows_at_min", state.scaler.overflows_at_min);
  archive.write("rng.cpu", state.rng_state);
  for (const auto& item : state.logging) archive.write(kLoggingPrefix + item.key(), item.value().detach().cpu());

  std::ostringstream payload_stream;
  archive.save_to(payload_stream);
  const std::string payload = payload_stream.str();
  std::string bytes(kMagic, sizeof(kMagic));
  put<uint32_t>(bytes, kVersion);
  put<uint32_t>(bytes, crc_of(payload.data(), payload.size()));
  put<uint64_t>(bytes, payload.size());
  bytes += payload;
  bytes.append(kTrailer, sizeof(kTrailer));
  write_file_atomically(path, bytes);
}

std::string verify_checkpoint(const std::string& path) {
  std::string bytes;
  try {
    bytes = read_file(path);
  } catch (const Error& e) {
    return e.what();
  }
  size_t payload_size = 0;
  return check_container(bytes, &payload_size);
}

std::vector<std::pair<std::string, torch::Tensor>> read_checkpoint_weights(const std::string& path) {
  const std::string bytes = read_file(path);
  size_t payload_size = 0;
  if (std::string problem = check_container(bytes, &payload_size); !problem.empty()) throw Error(path + ": " + problem);
  std::vector<std::pair<std::string, torch::Tensor>> weights;
  try {
    torch::serialize::InputArchive archive;
    archive.load_from(bytes.data() + kHeaderBytes, payload_size);
    for (const std::string& key : archive.keys()) {
      // Under model.: the weights and buffers, and FP8 scaling state (training state, not weights).
      if (key.rfind("model.", 0) != 0 || key.rfind("model.fp8.", 0) == 0) continue;
      torch::Tensor tensor;
      if (!archive.try_read(key, tensor, /*is_buffer=*/false)) archive.read(key, tensor, /*is_buffer=*/true);
      weights.emplace_back(key.substr(6), tensor);
    }
  } catch (const c10::Error& e) {
    throw Error(path + ": unreadable checkpoint payload: " + e.what_without_backtrace());
  }
  return weights;
}

TrainingState load_checkpoint(const std::string& path, const ModelTensors& model, torch::optim::Optimizer& optimizer,
                              const ContentCheck& check) {
  const std::string bytes = read_file(path);
  size_t payload_size = 0;
  if (std::string problem = check_container(bytes, &payload_size); !problem.empty()) throw Error(path + ": " + problem);
  torch::serialize::InputArchive archive;
  TrainingState state;
  try {
    archive.load_from(bytes.data() + kHeaderBytes, payload_size);
    // Everything is read and checked before anything is copied: a refused checkpoint leaves the model as it was.
    torch::OrderedDict<std::string, torch::Tensor> saved;
    auto read = [&](const std::string& name, const torch::Tensor& target, bool is_buffer) {
      torch::Tensor tensor;
      if (!archive.try_read("model." + name, tensor, is_buffer))
        throw Error(path + ": has no tensor '" + name + "'; was it written for a different model?");
      if (tensor.sizes() != target.sizes())
        throw Error(path + ": tensor '" + name + "' has shape " + c10::str(tensor.sizes()) + ", the model expects " +
                    c10::str(target.sizes()) + " (a different model spec?)");
      saved.insert(name, tensor);
    };
    for (const auto& item : model.parameters) read(item.key(), item.value(), false);
    for (const auto& item : model.buffers) read(item.key(), item.value(), true);
    state = read_state(archive);
    torch::serialize::InputArchive optimizer_archive;
    archive.read("optimizer", optimizer_archive);
    // The recipe's own check first: it says more of its state than "non-finite" does.
    for (const std::string& problem :
         {check_state(state), check ? check(saved) : std::string(), nonfinite_tensor(saved),
          optimizer_state_problem(optimizer_archive, model.parameters.keys())})
      if (!problem.empty()) throw RejectedCheckpoint(path, problem);

    torch::NoGradGuard no_grad;
    for (const auto& item : model.parameters) item.value().copy_(saved[item.key()]);
    for (const auto& item : model.buffers) item.value().copy_(saved[item.key()]);
    optimizer.load(optimizer_archive);
  } catch (const c10::Error& e) {
    throw Error(path + ": unreadable checkpoint payload: " + e.what_without_backtrace());
  }
  return state;
}

CheckpointStore::CheckpointStore(std::string folder, int64_t keep_last)
    : folder_(std::move(folder)), keep_last_(keep_last) {
  std::filesystem::create_directories(folder_);
  // A writer killed mid-save leaves only its temp file behind (the rename never happened): clear those.
  for (const auto& entry : std::filesystem::directory_iterator(folder_))
    if (entry.path().filename().string().find(".mpt.tmp.") != std::string::npos) std::filesystem::remove(entry.path());
}

std::string CheckpointStore::path_for(int64_t step) const {
  char name[64];
  std::snprintf(name, sizeof(name), "step-%09lld.mpt", static_cast<long long>(step));
  return folder_ + "/" + name;
}

std::string CheckpointStore::save(const ModelTensors& model, torch::optim::Optimizer& optimizer,
                                  const TrainingState& state) {
  const std::string path = path_for(state.step);
  save_checkpoint(path, model, optimizer, state);
  prune();
  return path;
}

std::vector<std::pair<int64_t, std::string>> CheckpointStore::list() const {
  std::vector<std::pair<int64_t, std::string>> found;
  for (const auto& entry : std::filesystem::directory_iterator(folder_))
    if (const int64_t step = step_of(entry.path().string()); step >= 0) found.emplace_back(step, entry.path().string());
  std::sort(found.rbegin(), found.rend());
  return found;
}

void CheckpointStore::prune() const {
  auto all = list();
  for (size_t i = static_cast<size_t>(keep_last_); i < all.size(); ++i) std::filesystem::remove(all[i].second);
}

int64_t CheckpointStore::step_of(const std::string& path) {
  long long step = 0;
  char tail[8] = {0};
  const std::string name = std::filesystem::path(path).filename().string();
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
