// The ranks of a data-parallel job, over PyTorch's own distributed engine (c10d): a TCP store for the
// rendezvous, Gloo on CPU, NCCL on CUDA. A default-constructed group is one process, where every collective is
// the identity, so the trainer has a single code path. Every collective waits at most the configured timeout:
// a rank that died or hangs surfaces as mpt::Error on the others, never as a hang.
#pragma once

#include <torch/torch.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "distributed/environment.h"

namespace mpt::distributed {

// The spec's distributed section.
struct DistributedConfig {
  std::string backend = "gloo";  // gloo | nccl (resolved from auto)
  double timeout_sec = 300.0;
  double bucket_mb = 25.0;  // gradient all-reduce bucket size
  bool sync_batchnorm = false;
  bool shard_optimizer = false;  // ZeRO-1: masters and optimizer state split over the ranks
};

// An all-reduce in flight; wait() before reading the tensors.
class PendingReduce {
 public:
  struct Impl;
  PendingReduce();
  explicit PendingReduce(std::shared_ptr<Impl> impl);
  void wait();

 private:
  std::shared_ptr<Impl> impl_;
};

class Group {
 public:
  Group();  // a single process
  // Joins the job `launch` describes; rank 0 hosts the store. Throws mpt::Error when the master cannot be
  // reached or the other ranks do not arrive within the timeout.
  static Group join(const LaunchInfo& launch, const DistributedConfig& config);

  int rank() const { return rank_; }
  int world_size() const { return world_size_; }
  bool is_main() const { return rank_ == 0; }
  bool distributed() const { return world_size_ > 1; }
  const std::string& backend() const { return backend_; }

  // Sums one tensor element-wise across ranks, in place, in the background.
  PendingReduce all_reduce_async(std::vector<torch::Tensor> tensors, const std::string& what);
  // Sums each of `tensors` (one dtype) across ranks, in place, as one collective.
  void all_reduce(std::vector<torch::Tensor> tensors, const std::string& what);
  void all_reduce_max(torch::Tensor tensor, const std::string& what);
  // all_reduce_max as a function of the tensor (what the precision layer's AgreeMax takes); null in one process.
  std::function<void(torch::Tensor&)> agree_max(const std::string& what);
  // Overwrites `tensors` with rank `root`'s values.
  void broadcast(std::vector<torch::Tensor> tensors, const std::string& what, int root = 0);
  void barrier(const std::string& what);

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
  int rank_ = 0;
  int world_size_ = 1;
  std::string backend_ = "none";
};

}  // namespace mpt::distributed
