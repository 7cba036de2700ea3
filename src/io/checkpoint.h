// FP32 training checkpoints: weights and buffers, optimizer state, loss scaler, schedule position, data
// position and RNG state, in a container with a magic, a version, a length, a CRC-32 and a "done" trailer.
// Files are written atomically; a corrupt or truncated one is detected and never chosen for resume.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "common/error.h"
#include "data/loader.h"
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
  torch::OrderedDict<std::string, torch::Tensor> parameters;
  torch::OrderedDict<std::string, torch::Tensor> buffers;
};

ModelTensors tensors_of(torch::nn::Module& model);

void save_checkpoint(const std::string& path, const ModelTensors& model, torch::optim::Optimizer& optimizer,
                     const TrainingState& state);

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

// Checks the tensors a checkpoint holds (by name, as in ModelTensors) before any is loaded: "" when they may be,
// else what is wrong, naming the tensor.
using ContentCheck = std::function<std::string(const torch::OrderedDict<std::string, torch::Tensor>& saved)>;

// Loads into `model`'s tensors (names and shapes must match) and `optimizer`; throws mpt::Error naming the
// file, and the byte offset or tensor that is wrong, and RejectedCheckpoint when a weight, buffer or optimizer
// tensor is not finite, the loss-scale state is out of range or `check` refuses the content (nothing is loaded then).
TrainingState load_checkpoint(const std::string& path, const ModelTensors& model, torch::optim::Optimizer& optimizer,
                              const ContentCheck& check = nullptr);

// The model tensors of a checkpoint, by name (FP32 weights and buffers), without a model or optimizer: what
// `mpt export` writes out.
std::vector<std::pair<std::string, torch::Tensor>> read_checkpoint_weights(const std::string& path);

// Checks the container (magic, version, length, CRC, trailer) without loading; "" when sound, else why not.
std::string verify_checkpoint(const std::string& path);

// The checkpoints/ folder of a run: step-numbered files, newest-valid lookup, pruning to keep_last.
class CheckpointStore {
 public:
  CheckpointStore(std::string folder, int64_t keep_last);

  std::string path_for(int64_t step) const;
  std::string save(const ModelTensors& model, torch::optim::Optimizer& optimizer, const TrainingState& state);

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
