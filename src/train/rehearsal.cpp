// See rehearsal.h.
#include "train/rehearsal.h"

#include <algorithm>
#include <chrono>
#include <csignal>
#include <limits>
#include <thread>

#include "common/error.h"

namespace mpt::train {

Rehearsal::Rehearsal(const DebugConfig& config, const NamedTensors& weights, int rank, int world_size)
    : config_(config), rank_(rank), world_size_(world_size) {
  const std::string& target = config_.inject_nonfinite_param;
  if (config_.inject_nonfinite_grad_at.empty()) return;
  if (target.empty())
    inject_name_ = weights.keys().front();
  else if (weights.contains(target))
    inject_name_ = target;
  else
    throw UsageError("debug.inject_nonfinite_param = " + target + ": the model has no such parameter; it has " +
                     c10::Join(", ", weights.keys()));
}

bool Rehearsal::injects_at(int64_t step) const {
  const auto& at = config_.inject_nonfinite_grad_at;
  return std::count(at.begin(), at.end(), step) > 0 &&
         (config_.inject_nonfinite_rank < 0 || config_.inject_nonfinite_rank == rank_);
}

bool Rehearsal::stops_before(int64_t next) const {
  return config_.stop_after_steps > 0 && next == config_.stop_after_steps + 1;
}

void Rehearsal::slow_down(double seconds) const {
  if (config_.slow_down > 0) std::this_thread::sleep_for(std::chrono::duration<double>(seconds * config_.slow_down));
}

void Rehearsal::after_backward(int64_t step, const std::function<NamedTensors()>& holders) const {
  if (config_.die_at_step == step && world_size_ > 1 && rank_ == world_size_ - 1) std::raise(SIGKILL);
  if (!injects_at(step)) return;
  // The gradient's first element in memory, whatever its layout (channels-last has no flat view).
  const torch::Tensor grad = holders()[inject_name_].grad();
  grad.as_strided({1}, {1}, grad.storage_offset()).fill_(std::numeric_limits<float>::infinity());
}

}  // namespace mpt::train
