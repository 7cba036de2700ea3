// The debug section's rehearsals of what goes wrong in real runs: a non-finite gradient at chosen steps (on every
// rank or one), a stop at a chosen step, a data-parallel rank that dies. The training step calls in at one point;
// everything else about them lives here.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <string>

#include "train/train_config.h"

namespace mpt::train {

using NamedTensors = torch::OrderedDict<std::string, torch::Tensor>;

class Rehearsal {
 public:
  // `weights` name the parameters debug.inject_nonfinite_param may pick; throws UsageError when it names none.
  Rehearsal(const DebugConfig& config, const NamedTensors& weights, int rank, int world_size);

  // After backward and the gradient average, before the overflow check: the last rank dies at debug.die_at_step
  // (as an OOM kill or a node failure would), and an injected step gets an Inf in its gradient. `holders` gives
  // the tensors whose grad() holds this step's gradients, named like the weights (called only when injecting).
  void after_backward(int64_t step, const std::function<NamedTensors()>& holders) const;

  bool injects_at(int64_t step) const;
  // debug.stop_after_steps: whether the run stops, interrupted, before taking step `next`.
  bool stops_before(int64_t next) const;
  // debug.slow_down: at the end of a step that took `seconds` so far, sleep that fraction of it.
  void slow_down(double seconds) const;
  bool forbids_host_syncs() const { return config_.forbid_host_syncs; }

 private:
  DebugConfig config_;
  std::string inject_name_;
  int rank_, world_size_;
};

}  // namespace mpt::train
