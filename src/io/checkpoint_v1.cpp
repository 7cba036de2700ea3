// The first checkpoint format (see checkpoint_v1.h): "MPTCKPT\n" | u32 version 1 | u32 crc32(payload) | u64 payload
// length | payload | "MPTDONE\n", little-endian; the payload a torch::serialize archive (a zip).
#include "io/checkpoint_v1.h"

#include <fmt/format.h>
#include <zlib.h>

#include <cstring>
#include <map>

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

// torch::optim's state keys (a parameter's TensorImpl address when saved) -> the parameter's position, read from
// param_groups: param_groups/<g>: params/<i>.
std::map<std::string, size_t> parameter_positions(torch::serialize::InputArchive& optimizer) {
  std::map<std::string, size_t> positions;
  torch::serialize::InputArchive all_groups, groups;
  if (!optimizer.try_read("param_groups", all_groups)) return positions;
  for (int64_t g = 0, position = 0;; ++g) {
    if (!all_groups.try_read("param_groups/" + std::to_string(g), groups)) break;
    torch::Tensor count;
    if (!groups.try_read("params/size", count)) break;
    for (int64_t i = 0; i < count.item<int64_t>(); ++i, ++position) {
      c10::IValue key;
      if (groups.try_read("params/" + std::to_string(i), key) && key.isString())
        positions[key.toStringRef()] = static_cast<size_t>(position);
    }
  }
  return positions;
}

// The first problem in an optimizer's saved state (torch::optim's archive: state/<key>/exp_avg, ...), naming the
// parameter from `parameter_names` (the order the optimizer holds them in); "" when it may be loaded.
std::string optimizer_state_problem(torch::serialize::InputArchive& optimizer,
                                    const std::vector<std::string>& parameter_names) {
  torch::serialize::InputArchive states;
  if (!optimizer.try_read("state", states)) return "";
  const std::map<std::string, size_t> positions = parameter_positions(optimizer);
  for (const std::string& key : states.keys()) {
    torch::serialize::InputArchive state;
    if (!states.try_read(key, state)) continue;
    const auto position = positions.find(key);
    const std::string parameter = position != positions.end() && position->second < parameter_names.size()
                                      ? parameter_names[position->second]
                                      : "#" + key;
    for (const std::string& field : state.keys()) {
      torch::Tensor tensor;
      if (!state.try_read(field, tensor)) continue;
      if (std::string problem = tensor_problem("optimizer." + field + " of " + parameter, tensor, second_moment(field));
          !problem.empty())
        return problem;
    }
  }
  return "";
}

}  // namespace

std::string verify_v1(const std::string& path) {
  std::string bytes;
  try {
    bytes = read_file(path);
  } catch (const Error& e) {
    return e.what();
  }
  size_t payload_size = 0;
  return check_container(bytes, &payload_size);
}

std::vector<std::pair<std::string, torch::Tensor>> read_weights_v1(const std::string& path) {
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

TrainingState load_v1(const std::string& path, const ModelTensors& model, torch::optim::Optimizer& optimizer,
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
         {training_state_problem(state), check ? check(saved) : std::string(), nonfinite_tensor(saved),
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

}  // namespace mpt::io
