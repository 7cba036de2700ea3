// FP32 training checkpoints: weights and buffers, optimizer state, loss scaler, schedule position, data position,
// RNG state and what logged values depend on, streamed record by record (io/checkpoint_stream.h) into a file
// written atomically; a corrupt or truncated one is detected and never chosen for resume. Under ZeRO-1 each rank
// writes the pieces it owns to a shard of its own beside the main file, which rank 0 writes last. Files of the
// first format (a zip built in memory) still load.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "common/error.h"
#include "data/loader.h"
#include "io/checkpoint_stream.h"
#include "precision/loss_scaler.h"

namespace mpt::io {

using NamedTensors = torch::OrderedDict<std::string, torch::Tensor>;

struct TrainingState {
  int64_t step = 0;           // optimizer steps attempted (applied + skipped)
  int64_t applied_steps = 0;  // the LR schedule's clock
  int64_t skipped_steps = 0;
  data::DataPosition data;
  precision::LossScaleState scaler;
  torch::Tensor rng_state;  // torch's default CPU generator (dropout, init)
  // What logged values depend on beyond training (the metrics window's sums, a GEMM format's last reported scales),
  // so that a resumed run logs what the uninterrupted one would have. A checkpoint without it resumes with fresh
  // windows.
  NamedTensors logging;
};

// The weights a checkpoint holds: FP32 parameters (the masters under master_weights) and the model's buffers.
struct ModelTensors {
  NamedTensors parameters;
  NamedTensors buffers;
};

ModelTensors tensors_of(torch::nn::Module& model);

// One file holding everything, written by one process.
void save_checkpoint(const std::string& path, const ModelTensors& model, torch::optim::Optimizer& optimizer,
                     const TrainingState& state);

// ZeRO-1. A piece is a run of a parameter's elements in memory order (its layout given by `strides`); the record
// names of a shard's pieces, and the view a piece is read into or written from.
std::string shard_path(const std::string& main_path, int rank, int world_size);
std::string piece_record(const std::string& parameter, const std::string& field, int64_t start);
torch::Tensor memory_order(const torch::Tensor& tensor);  // a dense tensor's elements, flat, in memory order

// What rank 0's main file says of the shards the ranks wrote: each one's size and CRC (so that a shard left by an
// earlier, killed save is never taken for this one's), and the parameters whose values only pieces hold, with
// the layout those pieces were cut from.
struct ShardedMasters {
  std::vector<CommittedFile> shards;  // by rank
  std::map<std::string, std::vector<int64_t>> strides;
};
// The main file: `model`'s parameters (those of `sharded.strides` as pieces records), its buffers, the training
// state and the index; the optimizer state lives in the shards alone.
void save_sharded_main(const std::string& path, const ModelTensors& model, const std::string& optimizer_kind,
                       const TrainingState& state, const ShardedMasters& sharded);

// A checkpoint whose container verifies but whose content cannot be trusted (non-finite weights or optimizer state, a
// non-finite loss scale, FP8 scales out of range): refused before anything was loaded, so an older checkpoint can
// be tried instead.
class RejectedCheckpoint : public Error {
 public:
  RejectedCheckpoint(const std::string& path, std::string why) : Error(path + ": " + why), why_(std::move(why)) {}
  const std::string& why() const { return why_; }

 private:
  std::string why_;
};

// Checks the buffers a checkpoint holds (FP8 state among them; by name, as in ModelTensors) before anything is
// loaded: "" when they may be, else what is wrong, naming the tensor.
using ContentCheck = std::function<std::string(const NamedTensors& saved)>;

// Loads into `model`'s tensors (names and shapes must match) and `optimizer`, from one file or a main file and its
// shards (whatever the world size that wrote them); throws mpt::Error naming the file, and the byte offset or
// tensor that is wrong, and RejectedCheckpoint when a weight, buffer or optimizer tensor is not finite, the
// loss-scale state is out of range or `check` refuses the content (nothing is loaded then). The file is read
// twice, once to check and once to load, each holding one tensor at a time.
TrainingState load_checkpoint(const std::string& path, const ModelTensors& model, torch::optim::Optimizer& optimizer,
                              const ContentCheck& check = nullptr);

// The model tensors of a checkpoint, by name (FP32 weights and buffers), without a model or optimizer: what
// `mpt export` writes out; a sharded checkpoint's masters are assembled from its shards.
std::vector<std::pair<std::string, torch::Tensor>> read_checkpoint_weights(const std::string& path);

// Checks the container (magic, version, length, CRC, trailer; every shard a main file names) without loading;
// "" when sound, else why not.
std::string verify_checkpoint(const std::string& path);

// The checkpoints/ folder of a run: step-numbered files, newest-valid lookup, pruning to keep_last (a sharded
// checkpoint's shards with its main file, and shards a killed save left without one).
class CheckpointStore {
 public:
  CheckpointStore(std::string folder, int64_t keep_last);

  static std::string path_in(const std::string& folder, int64_t step);
  std::string path_for(int64_t step) const { return path_in(folder_, step); }
  std::string save(const ModelTensors& model, torch::optim::Optimizer& optimizer, const TrainingState& state);
  std::string save_sharded(const ModelTensors& model, const std::string& optimizer_kind, const TrainingState& state,
                           const ShardedMasters& sharded);

  // The newest checkpoint before `before_step` that verifies; each rejected one is reported through
  // `on_rejected(path, why)`.
  std::optional<std::string> latest_valid(
      const std::function<void(const std::string&, const std::string&)>& on_rejected,
      int64_t before_step = std::numeric_limits<int64_t>::max()) const;
  // The step a checkpoint file of this store was written at (from its name), or -1.
  static int64_t step_of(const std::string& path);

 private:
  std::vector<std::pair<int64_t, std::string>> list() const;  // (step, path), newest first
  void prune() const;

  std::string folder_;
  int64_t keep_last_;
};

}  // namespace mpt::io
